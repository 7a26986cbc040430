"""Every secret desktop-agent keeps or reads: the one module that talks to the OS keyring.

The Anthropic API key comes from the environment, else the OS keyring, else this session
only; it is never written to the database, logs, exports or process arguments. Also here:
the webhook signing secret of a data folder (:func:`webhook_secret`), the HTTP API's token
(through :func:`read_secret` and :func:`store_secret`, called by ``httpapi/auth.py``), and
the secrets the analyst puts in the keyring for the worker to read: PostgreSQL passwords,
the SMTP and IMAP passwords, MCP servers' secrets.

The keyring's entries follow one scheme, (service, user):

==========================  ==========================================================
``desktop-agent``           what the app keeps itself or asks for by name:
                            ``anthropic-api-key``, ``http-api-token:<data folder>``,
                            ``webhook-secret:<data folder>``, ``smtp-password``,
                            ``imap-password``
``desktop-agent-database``  a PostgreSQL password per server: ``user@host:port/db``
``desktop-agent-mcp``       an MCP server's secret: ``<server>/<NAME>``
==========================  ==========================================================

A keyring that is missing or breaks never crashes a caller: reads see nothing (and say
why), writes report failure. ``tests/unit/test_secrets_scheme.py`` fails if any other
module of the package uses the keyring.
"""

from __future__ import annotations

import contextlib
import os
import secrets as _random
import threading
from dataclasses import dataclass, field
from pathlib import Path

import keyring
import keyring.errors
from keyring.backends import fail

from desktop_agent.domain.errors import KnownError, plain_error

SERVICE = "desktop-agent"
"""The keyring service of the secrets the app keeps itself or asks for by name."""
DATABASE_SERVICE = "desktop-agent-database"
"""The keyring service of PostgreSQL passwords; the user name is the server's
``user@host:port/database`` (``keyring set desktop-agent-database postgres@db:5432/agents``)."""
MCP_SERVICE = "desktop-agent-mcp"
"""The keyring service of MCP servers' secrets; the user name is ``<server>/<NAME>``."""
USERNAME = "anthropic-api-key"
ENV_VAR = "ANTHROPIC_API_KEY"

_session_lock = threading.Lock()
_session_key: str | None = None


@dataclass(frozen=True)
class KeyStatus:
    """Where the key comes from, without the key itself."""

    source: str
    present: bool
    secure_store: bool
    backend: str
    message: str


def mask(key: str) -> str:
    """A form of the key safe to show: prefix and last four characters."""
    if len(key) < 12:
        return "****"
    return f"{key[:7]}…{key[-4:]}"


class KeyStore:
    """Reads and writes the API key.

    A keyring backend that breaks (D-Bus gone, a locked or prompting file backend raising
    ``EOFError``...) never crashes anything: reads see no key, writes fall back to this
    session, and :attr:`last_error` says what went wrong, for the user.
    """

    last_error: str = ""

    def secure_store_available(self) -> bool:
        """Whether a real OS keyring backend exists."""
        return secure_store_available()

    def backend_name(self) -> str:
        """Name of the keyring backend in use."""
        backend = keyring.get_keyring()
        return f"{type(backend).__module__}.{type(backend).__name__}"

    def get(self) -> str | None:
        """The key, from the environment, the keyring or this session; None if unset."""
        env = os.environ.get(ENV_VAR, "").strip()
        if env:
            return env
        try:
            stored = keyring.get_password(SERVICE, USERNAME)
        except Exception as exc:  # any backend failure reads as "no key there"
            self.last_error = _describe(exc)
            stored = None
        if stored:
            return stored
        with _session_lock:
            return _session_key

    def set(self, key: str) -> str:
        """Store the key; returns where it went ("keyring" or "session").

        Without a usable keyring the key is kept in this process only (see
        :meth:`save_in_keyring` for a caller whose process is about to end).
        """
        global _session_key
        key = clean_key(key)
        if self.save_in_keyring(key):
            return "keyring"
        with _session_lock:
            _session_key = key
        return "session"

    def save_in_keyring(self, key: str) -> bool:
        """Store the key in the OS keyring only; whether it was stored there.

        False when no secure store exists (the ``fail`` backend, which raises, and the
        ``null`` one, which would silently drop the key) or when the keyring fails; then
        :attr:`last_error` says why the keyring failed (empty when there is none).
        """
        key = clean_key(key)
        if not self.secure_store_available():
            return False
        try:
            keyring.set_password(SERVICE, USERNAME, key)
        except Exception as exc:
            if not isinstance(exc, keyring.errors.NoKeyringError):
                self.last_error = _describe(exc)
            return False
        return True

    def delete(self) -> bool:
        """Forget the stored key (keyring and session); returns whether one was stored."""
        global _session_key
        had = False
        try:
            keyring.delete_password(SERVICE, USERNAME)
            had = True
        except keyring.errors.PasswordDeleteError:
            pass
        except Exception as exc:
            self.last_error = _describe(exc)
        with _session_lock:
            if _session_key:
                had = True
            _session_key = None
        return had

    def status(self, *, session_outlives_call: bool = True) -> KeyStatus:
        """Where the key would come from, and whether it is stored securely.

        Args:
            session_outlives_call: False for a command-line process, which ends right
                after: a key set in it could not be kept for the session, so the note
                about a missing secure store says what to do instead.
        """
        secure = self.secure_store_available()
        backend = self.backend_name()
        if os.environ.get(ENV_VAR, "").strip():
            return KeyStatus("environment", True, secure, backend, f"key set by {ENV_VAR}")
        failed = ""
        try:
            stored = keyring.get_password(SERVICE, USERNAME)
        except keyring.errors.NoKeyringError:
            stored = None
        except Exception as exc:
            stored = None
            failed = f"; the OS keyring failed ({_describe(exc)})"
        if stored:
            return KeyStatus("keyring", True, True, backend, "key stored in the OS keyring")
        with _session_lock:
            session = _session_key
        if secure:
            note = ""
        elif session_outlives_call:
            note = (
                "; no secure store (OS keyring) exists here: a key set now is kept for this "
                f"session only, or set {ENV_VAR}"
            )
        else:
            note = (
                "; no secure store (OS keyring) exists here, so `desktop-agent key set` "
                f"cannot keep a key: set {ENV_VAR} instead"
            )
        if session:
            return KeyStatus(
                "session", True, secure, backend, "key kept for this session only" + failed + note
            )
        return KeyStatus("none", False, secure, backend, "no API key set" + failed + note)


def clean_key(key: str) -> str:
    """The key without surrounding whitespace; raises KnownError if it cannot be a key."""
    key = key.strip()
    if not key:
        raise KnownError("the API key is empty")
    if any(c.isspace() for c in key):
        raise KnownError("the API key contains spaces or line breaks; paste it again")
    return key


def _describe(exc: BaseException) -> str:
    """What a keyring failure says, on one line (its class goes to the log, not here)."""
    return plain_error(exc, empty="it gave no reason")[:200]


def secure_store_available() -> bool:
    """Whether a real OS keyring backend exists (not the failing or the null one)."""
    backend = keyring.get_keyring()
    return not isinstance(backend, fail.Keyring) and backend.priority > 0


def read_secret(service: str, user: str) -> tuple[str | None, str]:
    """The secret stored under (``service``, ``user``), and what went wrong reading it.

    ``(None, "")``: nothing is stored (or no keyring exists); ``(None, reason)``: the
    keyring failed, and ``reason`` says how, in one line for the user.
    """
    try:
        stored = keyring.get_password(service, user)
    except keyring.errors.NoKeyringError:
        return None, ""
    except Exception as exc:  # any backend failure reads as "not there", said
        return None, _describe(exc)
    return stored or None, ""


def store_secret(service: str, user: str, value: str) -> str:
    """Keep ``value`` under (``service``, ``user``) in the OS keyring; "" when it was kept.

    Otherwise the reason it was not, for the user: no secure store exists here (the
    ``null`` backend would drop the value silently, so it is never written), or how the
    keyring failed.
    """
    if not secure_store_available():
        return "no secure store (OS keyring) exists here"
    try:
        keyring.set_password(service, user, value)
    except keyring.errors.NoKeyringError:
        return "no secure store (OS keyring) exists here"
    except Exception as exc:
        return f"the OS keyring failed ({_describe(exc)})"
    return ""


def forget_secret(service: str, user: str) -> bool:
    """Delete the entry (``service``, ``user``); whether one was there to delete."""
    try:
        keyring.delete_password(service, user)
    except Exception:  # not there, or a keyring that fails: nothing was deleted
        return False
    return True


def mcp_secret(server: str, name: str) -> str | None:
    """The secret ``name`` of the MCP server ``server`` (a broken keyring reads as none)."""
    return read_secret(MCP_SERVICE, f"{server}/{name}")[0]


def database_account(url: str) -> str:
    """The keyring user name of the database at ``url``: ``user@host:port/database``."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return f"{u.username or ''}@{u.host or ''}:{u.port or 5432}/{u.database or ''}"


def database_password(url: str) -> str | None:
    """The password of the database at ``url`` from the OS keyring, or None.

    None lets the driver look where libpq looks (``PGPASSWORD``, ``~/.pgpass``, a service
    file); a broken keyring reads as none, as for the API key.
    """
    return read_secret(DATABASE_SERVICE, database_account(url))[0]


WEBHOOK_FILE = "webhook-secret"
"""Beside the database, mode 0600: the webhook secret where no OS keyring keeps it."""


@dataclass(frozen=True)
class WebhookSecret:
    """The key of the webhooks' signatures (:mod:`desktop_agent.webhooks`), and where it is.

    Attributes:
        value: the secret (left out of ``repr``: never logged).
        stored: ``keyring`` (the OS keyring) or ``file`` (:data:`WEBHOOK_FILE`).
        note: why it is in the file and not the keyring, for the user ("" in the keyring).
    """

    value: str = field(repr=False)
    stored: str
    note: str


def _webhook_user(folder: Path) -> str:
    """One secret per data folder, as the HTTP API's token."""
    return f"webhook-secret:{folder.absolute()}"


def _file_note(keyring_error: str) -> str:
    where = f"a private file beside the database ({WEBHOOK_FILE}, readable by you only)"
    if keyring_error:
        return f"the OS keyring failed ({keyring_error}): the secret is kept in {where}"
    return f"no secure store (OS keyring) exists here: the secret is kept in {where}"


def write_private(path: Path, text: str) -> None:
    """``text`` in ``path`` (mode 0600, in a folder of mode 0700), replacing it at once."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def _store_webhook_secret(
    folder: Path, value: str, keyring_error: str, *, replace: bool = False
) -> WebhookSecret:
    """Keep ``value`` in the keyring, else in the private file; never raises for the keyring.

    With ``keyring_error`` (reading the keyring just failed) the keyring is not written:
    a secret it holds but could not give back is not replaced behind the user's back.
    With ``replace``, a secret the keyring still holds is deleted when the new one goes to
    the file, so that it does not hide the new one.
    """
    if secure_store_available() and not keyring_error:
        try:
            keyring.set_password(SERVICE, _webhook_user(folder), value)
        except Exception as exc:
            if not isinstance(exc, keyring.errors.NoKeyringError):
                keyring_error = _describe(exc)
        else:
            with contextlib.suppress(OSError):
                (folder / WEBHOOK_FILE).unlink()
            return WebhookSecret(value, "keyring", "")
    write_private(folder / WEBHOOK_FILE, value)
    if replace and secure_store_available():
        with contextlib.suppress(Exception):
            keyring.delete_password(SERVICE, _webhook_user(folder))
    return WebhookSecret(value, "file", _file_note(keyring_error))


def _read_webhook_secret(folder: Path) -> tuple[WebhookSecret | None, str]:
    """The stored secret (keyring first, then the file), and what the keyring said."""
    error = ""
    if secure_store_available():
        try:
            stored = keyring.get_password(SERVICE, _webhook_user(folder))
        except Exception as exc:  # any backend failure reads as "not there", said
            if not isinstance(exc, keyring.errors.NoKeyringError):
                error = _describe(exc)
            stored = None
        if stored:
            return WebhookSecret(stored, "keyring", ""), ""
    path = folder / WEBHOOK_FILE
    with contextlib.suppress(OSError, UnicodeDecodeError):
        value = path.read_text(encoding="utf-8").strip()
        if value:
            return WebhookSecret(value, "file", _file_note(error)), error
    return None, error


def new_webhook_secret() -> str:
    """A fresh secret: 32 random bytes, URL-safe text."""
    return _random.token_urlsafe(32)


def webhook_secret(folder: Path) -> WebhookSecret:
    """The webhook secret of the data folder ``folder``, made on first need.

    Kept in the OS keyring (service ``desktop-agent``, user ``webhook-secret:<folder>``).
    A keyring that is missing or breaks never crashes this: the secret is then kept in a
    private file beside the database, and :attr:`WebhookSecret.note` says so and why.

    Raises:
        OSError: the private file was needed and cannot be written.
    """
    found, error = _read_webhook_secret(folder)
    if found is not None:
        return found
    return _store_webhook_secret(folder, new_webhook_secret(), error)


def rotate_webhook_secret(folder: Path) -> WebhookSecret:
    """Replace the webhook secret of ``folder`` with a new one; returns it.

    The worker signs its next post with the new secret: a receiver must be given it.

    Raises:
        OSError: the private file was needed and cannot be written.
    """
    return _store_webhook_secret(folder, new_webhook_secret(), "", replace=True)
