"""The API's bearer token: made at first start, kept in the OS keyring.

Where no secure keyring exists, the token is kept in a file beside the database that only
its owner may read (``api-token``, mode 0600): the API is for scripts of the same user.
The token is never logged and never put on a command line; ``desktop-agent api-token
show`` prints it on request.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

import keyring
from keyring.backends import fail

SERVICE = "desktop-agent"
TOKEN_FILE = "api-token"


def _user(db_path: Path) -> str:
    """One token per data folder."""
    return f"http-api-token:{db_path.parent.absolute()}"


def _secure() -> bool:
    backend = keyring.get_keyring()
    return not isinstance(backend, fail.Keyring) and backend.priority > 0


def load_token(db_path: Path) -> str | None:
    """The token, if one was made."""
    if _secure():
        with contextlib.suppress(Exception):
            stored = keyring.get_password(SERVICE, _user(db_path))
            if stored:
                return stored
    path = db_path.parent / TOKEN_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8").strip() or None
    return None


def make_token(db_path: Path) -> str:
    """A new token, stored (replacing any older one); returns it."""
    token = secrets.token_urlsafe(32)
    if _secure():
        try:
            keyring.set_password(SERVICE, _user(db_path), token)
        except Exception:  # a keyring that fails: the private file instead
            pass
        else:
            with contextlib.suppress(OSError):
                (db_path.parent / TOKEN_FILE).unlink()
            return token
    path = db_path.parent / TOKEN_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return token


def token_for(db_path: Path) -> str:
    """The token, made on first use."""
    return load_token(db_path) or make_token(db_path)
