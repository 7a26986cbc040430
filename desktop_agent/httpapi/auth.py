"""The API's bearer token: made at first start, kept in the OS keyring.

Where no secure keyring exists, the token is kept in a file beside the database that only
its owner may read (``api-token``, mode 0600): the API is for scripts of the same user.
The token is never logged and never put on a command line; ``desktop-agent api-token
show`` prints it on request.

A rotation takes effect on a running server at once. Reading the keyring on every request
would cost milliseconds (the Secret Service opens a D-Bus connection and a new encrypted
session for each read) and could prompt, so :func:`make_token` also writes a stamp beside
the database (``api-token.stamp``: a random value, nothing of the token), after the token
itself. :class:`CurrentToken` reads the stamp on every request (a few microseconds) and the
token again only when the stamp has changed.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
import threading
from pathlib import Path
from typing import Protocol

from desktop_agent.secrets import (
    SERVICE,
    read_secret,
    secure_store_available,
    store_secret,
    write_private,
)

log = logging.getLogger(__name__)

TOKEN_FILE = "api-token"
STAMP_FILE = "api-token.stamp"
"""Beside the database: changes each time a token is made (what it holds is random)."""


def _user(db_path: Path) -> str:
    """One token per data folder."""
    return f"http-api-token:{db_path.parent.absolute()}"


def load_token(db_path: Path) -> str | None:
    """The token, if one was made."""
    if secure_store_available():
        stored, _failed = read_secret(SERVICE, _user(db_path))  # a failure: the file
        if stored:
            return stored
    path = db_path.parent / TOKEN_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8").strip() or None
    return None


def read_stamp(db_path: Path) -> bytes:
    """The token's stamp (empty before the first :func:`make_token` that wrote one)."""
    try:
        with open(db_path.parent / STAMP_FILE, "rb") as f:
            return f.read(256)
    except OSError:
        return b""


def make_token(db_path: Path) -> str:
    """A new token, stored (replacing any older one); returns it.

    The stamp is written after the token, so that whoever sees the new stamp finds the new
    token: a running server refuses the old one from the moment this returns.
    """
    token = secrets.token_urlsafe(32)
    stored = False
    if not store_secret(SERVICE, _user(db_path), token):  # else the private file
        stored = True
        with contextlib.suppress(OSError):
            (db_path.parent / TOKEN_FILE).unlink()
    if not stored:
        write_private(db_path.parent / TOKEN_FILE, token)
    write_private(db_path.parent / STAMP_FILE, secrets.token_hex(16))
    return token


def token_for(db_path: Path) -> str:
    """The token, made on first use."""
    return load_token(db_path) or make_token(db_path)


class TokenCheck(Protocol):
    """What the API's guard asks of the token it accepts."""

    def stale(self) -> bool:
        """Whether the token may have changed since it was read (cheap: no keyring)."""
        ...

    def reload(self) -> None:
        """Read the token again (may block on the keyring: called off the event loop)."""
        ...

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is the token (constant time)."""
        ...


class FixedToken:
    """One token for the server's life (a server built in-process, e.g. by tests)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def stale(self) -> bool:
        """Never."""
        return False

    def reload(self) -> None:
        """Nothing to read."""

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is the token."""
        return hmac.compare_digest(given.encode(), self._token)


class CurrentToken:
    """The token of the data folder of ``db_path`` as it is now (made on first use).

    :meth:`stale` compares the stamp with the one read with the token; :meth:`reload`
    reads both again, the stamp first (a rotation between the two reads leaves the stamp
    read older than the token, which only costs one more reload). When the token cannot be
    read back after a change, nothing is accepted until it can: the old token is refused
    either way.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._lock = threading.Lock()
        self._stamp = read_stamp(db_path)
        self._token: bytes | None = token_for(db_path).encode()

    def stale(self) -> bool:
        """Whether the stamp changed since the token was read."""
        return read_stamp(self.db_path) != self._stamp

    def reload(self) -> None:
        """Read the stamp, then the token."""
        with self._lock:
            stamp = read_stamp(self.db_path)
            if stamp == self._stamp:
                return  # another request reloaded it
            token = load_token(self.db_path)
            if token is None:
                self._token = None  # the stamp stays old: the next request tries again
                log.warning("the API token changed but cannot be read: every request is refused")
                return
            changed = token.encode() != self._token
            self._token, self._stamp = token.encode(), stamp
        if changed:
            log.info("the API token was rotated: the old one is refused from now on")

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is the token last read."""
        token = self._token
        return token is not None and hmac.compare_digest(given.encode(), token)
