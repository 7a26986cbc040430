"""Where things live and the user's settings.

The database defaults to the user's data folder; ``--db PATH`` or ``DESKTOP_AGENT_DB``
override it. Settings are a small JSON file next to the database, so that a data folder
(copied, or given with ``--db``) carries its own settings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import types
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from desktop_agent.domain.errors import InvalidInputError

APP_NAME = "desktop-agent"
DB_ENV = "DESKTOP_AGENT_DB"
DB_FILE = "desktop-agent.db"
URL_FILE = "database.url"
"""Beside where the database file would be: the PostgreSQL URL the folder stands for (the
same name as ``persistence.db.URL_FILE``, which reads it)."""
PALETTES = ("system", "light", "dark")
"""The desktop app's palette choices (``Settings.palette``)."""

log = logging.getLogger(__name__)


def default_data_dir() -> Path:
    """The user's data folder for desktop-agent."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def resolve_db_path(cli_value: str | None = None) -> Path:
    """``--db``, else ``DESKTOP_AGENT_DB``, else the data folder's database.

    Either may be a file path or a PostgreSQL URL (``postgresql://user@host:5432/db``).
    A URL stands for a local folder of its own under the data folder (see
    :func:`server_folder`): its settings, logs and archives live there, and the path
    returned is where that folder's database file would be, which every process (a worker
    started with ``--db`` on it, too) opens as the server.
    """
    value = cli_value or os.environ.get(DB_ENV)
    if not value:
        return default_data_dir() / DB_FILE
    if "://" in value:
        return server_folder(value) / DB_FILE
    return Path(value).expanduser().absolute()


POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")


def server_folder(url: str) -> Path:
    """The local folder standing for the PostgreSQL database at ``url`` (made if needed).

    Raises:
        InvalidInputError: not a PostgreSQL URL, a password in it, or no driver installed.
    """
    from sqlalchemy.engine import make_url  # only when a URL is given
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidInputError(f"{url!r} is not a database URL or a file path") from None
    if parsed.drivername not in POSTGRES_SCHEMES:
        raise InvalidInputError(
            f"database URLs must be PostgreSQL ones (postgresql://user@host:5432/name), "
            f"not {parsed.drivername}; for SQLite give the file's path"
        )
    if parsed.password is not None:
        account = f"{parsed.username or ''}@{parsed.host}:{parsed.port or 5432}/{parsed.database}"
        raise InvalidInputError(
            "the database URL holds a password: remove it, and keep the password in the OS "
            f"keyring (keyring set desktop-agent-database {account}), ~/.pgpass or "
            "PGPASSWORD instead"
        )
    if not parsed.database or not parsed.host:
        raise InvalidInputError(f"the database URL {url!r} must name a host and a database")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise InvalidInputError(
            "PostgreSQL support is not installed: pip install 'desktop-agent[postgres]'"
        ) from None
    url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    slug = "".join(
        c if c.isalnum() or c in "-." else "_"
        for c in f"{parsed.username or ''}@{parsed.host}-{parsed.port or 5432}-{parsed.database}"
    )
    folder = default_data_dir() / "servers" / slug
    pointer = folder / URL_FILE
    if not pointer.is_file() or pointer.read_text(encoding="utf-8").strip() != url:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = pointer.with_suffix(".tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(url + "\n")
        os.replace(tmp, pointer)
    return folder


def database_url(db_path: Path) -> str | None:
    """The PostgreSQL URL ``db_path`` stands for, or None for a SQLite file."""
    pointer = db_path.parent / URL_FILE
    return pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else None


@dataclass
class Settings:
    """User settings, stored as ``settings.json`` beside the database.

    Attributes:
        default_model: model for new runs.
        default_max_cost_usd: default cost budget of new runs (None: unlimited).
        default_max_steps: default step budget.
        default_max_time_s: default time budget.
        monthly_spend_cap_usd: what all runs together may spend in a calendar month (local
            time; None: no cap); checked before every model call, like a run's budget.
        durability: ``FULL`` or ``NORMAL`` (SQLite ``synchronous``).
        workers: runs executed at once by one worker.
        close_action: what closing the main window does: ``tray`` or ``quit``.
        approval_deadline_s: default deadline of approvals (None: none).
        approval_default: what an expired approval does: ``reject`` or ``approve``.
        ask_unsafe: ask before every tool with an unsafe effect.
        ask_overwrite: ask before a write that overwrites different content.
        webhook_url: where to POST notifications (empty: none).
        notify_needs_user: the desktop app notifies when a run needs the analyst.
        notify_finished: the desktop app notifies when a run finishes.
        notify_failed: the desktop app notifies when a run fails.
        allow_private_fetch: let web_fetch and http_post reach private, loopback and
            link-local addresses.
        web_search: offer Anthropic's server-side web search to runs that list it.
        web_search_max_uses: searches allowed per model call.
        idempotent_post_prefixes: URL prefixes of endpoints that honour the
            ``Idempotency-Key`` header; http_post calls under them are idempotent.
        smtp_host: mail server for send_email (empty: e-mail is not set up).
        smtp_port: its port.
        smtp_security: ``starttls``, ``ssl`` or ``none``.
        smtp_username: login name (the password is in the OS keyring, service
            ``desktop-agent``, user ``smtp-password``; never in this file).
        smtp_from: sender address.
        imap_host: IMAP server used to look for sent mail after a crash (empty: none).
        imap_port: its port.
        imap_security: ``ssl``, ``starttls`` or ``none``.
        imap_username: login name (default: ``smtp_username``).
        imap_sent_folder: folder holding sent mail.
        notify_stall_minutes: notify when a running run makes no progress this long
            (the scheduler also flags such runs as stuck).
        retention_days: archive runs finished longer ago than this into a compressed
            file beside the database, and remove them from it (None: keep everything).
        fallback_model: model used after repeated overload (empty: none).
        compaction_threshold: fraction of the context window that triggers compaction.
        prompt_cache_ttl: how long a run's prompt cache is written for: ``auto`` (an hour
            for runs that can wait for the analyst or a timer, else five minutes), ``5m``
            or ``1h``. The hour costs 2x input instead of 1.25x and pays back after a wait
            longer than five minutes (figures: bench/README.md, cache share).
        batch_window_s: economy mode: how long a queued turn waits for others to share
            its Message Batch (the first one queued is sent this long after it was).
        batch_poll_s: economy mode: the first look at a batch's status after it was sent;
            later looks wait longer each time, up to ten minutes.
        batch_doubt_s: economy mode: a batch a worker was sending when it died is looked
            for in the API's list of batches this long after (never sent twice).
        palette: the desktop app's colors: ``system`` (follow the desktop), ``light`` or
            ``dark``.
        mcp_servers: MCP servers whose tools runs may use: ``{"name", "command", "args",
            "env"}`` (stdio) or ``{"name", "url", "headers"}`` (Streamable HTTP), with
            optional ``effects`` (per-tool ``read_only``/``idempotent``/``unsafe``) and
            ``timeout_s``; ``env`` and ``headers`` values ``keyring:NAME`` are secrets kept
            in the OS keyring (see :mod:`desktop_agent.tools.mcp`).
        shared_paths: folders every worker can reach (a shared mount): on PostgreSQL, a
            run whose workspace lies under one may run on any worker, else only on the
            workers of the machine that started it.
        otel_endpoint: an OpenTelemetry collector's OTLP/HTTP address (e.g.
            ``http://127.0.0.1:4318``): workers send a trace of every run there (empty:
            no tracing).
        otel_include_content: traces carry prompts, answers and tool results (cut and
            redacted); off by default.
    """

    default_model: str = "demo"
    default_max_cost_usd: float | None = 5.0
    default_max_steps: int | None = 200
    default_max_time_s: float | None = None
    monthly_spend_cap_usd: float | None = None
    durability: str = "FULL"
    workers: int = 8
    close_action: str = "tray"
    approval_deadline_s: float | None = None
    approval_default: str = "reject"
    ask_unsafe: bool = True
    ask_overwrite: bool = True
    webhook_url: str = ""
    notify_needs_user: bool = True
    notify_finished: bool = True
    notify_failed: bool = True
    allow_private_fetch: bool = False
    web_search: bool = False
    web_search_max_uses: int = 5
    idempotent_post_prefixes: list[str] = field(default_factory=list)
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_security: str = "starttls"
    smtp_username: str = ""
    smtp_from: str = ""
    imap_host: str = ""
    imap_port: int = 993
    imap_security: str = "ssl"
    imap_username: str = ""
    imap_sent_folder: str = "Sent"
    notify_stall_minutes: float = 30.0
    retention_days: float | None = None
    fallback_model: str = ""
    compaction_threshold: float = 0.8
    prompt_cache_ttl: str = "auto"
    batch_window_s: float = 10.0
    batch_poll_s: float = 30.0
    batch_doubt_s: float = 600.0
    palette: str = "system"
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    shared_paths: list[str] = field(default_factory=list)
    otel_endpoint: str = ""
    otel_include_content: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, db_path: Path) -> Settings:
        """Read the settings next to ``db_path`` (defaults when there are none)."""
        path = settings_path(db_path)
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read settings {path}: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidInputError(
                f"cannot read settings {path}: expected a JSON object, found {type(data).__name__}"
            )
        hints = typing.get_type_hints(cls)
        known = {f.name for f in fields(cls)}
        for k, v in data.items():
            if k in known and not _fits(v, hints[k]):
                raise InvalidInputError(
                    f"settings {path}: {k} = {json.dumps(v)[:60]} is not a valid "
                    f"{str(hints[k]).replace('typing.', '')}; fix or delete the file"
                )
        settings = cls(**{k: v for k, v in data.items() if k in known})
        if settings.palette not in PALETTES:  # only looks: not worth refusing to start
            log.warning(
                "settings %s: palette %r is not one of %s; using system",
                path,
                settings.palette,
                ", ".join(PALETTES),
            )
            settings.palette = "system"
        return settings

    def save(self, db_path: Path) -> None:
        """Write the settings next to ``db_path`` (private file)."""
        path = settings_path(db_path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(self), f, indent=2)
        os.replace(tmp, path)

    def engine_settings(self) -> dict[str, Any]:
        """The subset the engine and tools read."""
        return {
            "approval_deadline_s": self.approval_deadline_s,
            "approval_default": self.approval_default,
            "approval_rules": {"ask_unsafe": self.ask_unsafe, "ask_overwrite": self.ask_overwrite},
            "allow_private_fetch": self.allow_private_fetch,
            "web_search": self.web_search,
            "web_search_max_uses": self.web_search_max_uses,
            "idempotent_post_prefixes": list(self.idempotent_post_prefixes),
            "prompt_cache_ttl": self.prompt_cache_ttl,
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name.startswith(_MAIL)},
            **self.extra,
        }


_MAIL = ("smtp_", "imap_")


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value read from the settings file fits a field's type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is list:
        return isinstance(value, list) and (not args or all(_fits(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True


def settings_path(db_path: Path) -> Path:
    """Where the settings of the database at ``db_path`` live."""
    return db_path.parent / "settings.json"


def log_dir(db_path: Path) -> Path:
    """Folder for worker logs, beside the database."""
    path = db_path.parent / "logs"
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


# --------------------------------------------------------------------------- editable settings


@dataclass(frozen=True)
class SettingInfo:
    """What an analyst may edit of one setting, and how (the app's Settings dialog, ``config``).

    Attributes:
        name: the :class:`Settings` field.
        kind: how its value is written: ``usd``, ``count``, ``duration``, ``bool``,
            ``choice``, ``url`` or ``model``.
        meaning: one line saying what it does.
        applies: when it takes effect: ``new_runs`` (runs started from then on), ``at_once``
            (running workers too, before their next model call), ``worker_start`` (workers
            read it when they start) or ``app_start`` (the desktop app reads it when it
            starts).
        choices: the values a ``choice`` takes.
        maximum: the largest value a ``usd`` or ``count`` takes (the dialog's range).
        none: what no value means (``no limit``), for settings that may have none; 0 and
            ``none`` then mean it.
    """

    name: str
    kind: str
    meaning: str
    applies: str
    choices: tuple[str, ...] = ()
    maximum: float | None = None
    none: str = ""


EDITABLE: tuple[SettingInfo, ...] = (
    SettingInfo(
        "default_model",
        "model",
        "model of new runs (demo or a current Claude model: `desktop-agent models`)",
        "new_runs",
    ),
    SettingInfo(
        "default_max_cost_usd",
        "usd",
        "cost budget of new runs, in dollars",
        "new_runs",
        maximum=10_000.0,
        none="no limit",
    ),
    SettingInfo(
        "default_max_steps",
        "count",
        "step budget of new runs (model and tool calls)",
        "new_runs",
        maximum=1_000_000,
        none="no limit",
    ),
    SettingInfo(
        "default_max_time_s",
        "duration",
        "time budget of new runs (time worked, e.g. 2h, 3d)",
        "new_runs",
        none="no limit",
    ),
    SettingInfo(
        "monthly_spend_cap_usd",
        "usd",
        "what all runs together may spend in a calendar month, in dollars",
        "at_once",
        maximum=1_000_000.0,
        none="no cap",
    ),
    SettingInfo(
        "ask_unsafe",
        "bool",
        "ask before every tool whose effect cannot be undone",
        "worker_start",
    ),
    SettingInfo(
        "ask_overwrite",
        "bool",
        "ask before a write that overwrites different content",
        "worker_start",
    ),
    SettingInfo(
        "approval_deadline_s",
        "duration",
        "how long an approval waits before its default applies (none: until you decide)",
        "worker_start",
        none="none",
    ),
    SettingInfo(
        "approval_default",
        "choice",
        "what an approval does at its deadline",
        "worker_start",
        choices=("reject", "approve"),
    ),
    SettingInfo(
        "durability",
        "choice",
        "SQLite commits: FULL survives a power cut, NORMAL is faster (not on PostgreSQL)",
        "worker_start",
        choices=("FULL", "NORMAL"),
    ),
    SettingInfo(
        "close_action",
        "choice",
        "what closing the app's window does: keep it in the tray, or quit",
        "app_start",
        choices=("tray", "quit"),
    ),
    SettingInfo(
        "notify_needs_user",
        "bool",
        "the app notifies when a run needs you (approval, question, budget)",
        "app_start",
    ),
    SettingInfo("notify_finished", "bool", "the app notifies when a run finishes", "app_start"),
    SettingInfo("notify_failed", "bool", "the app notifies when a run fails", "app_start"),
    SettingInfo(
        "webhook_url",
        "url",
        "an http(s) address that receives the notifications as JSON (empty: none)",
        "worker_start",
        none="none",
    ),
    SettingInfo(
        "palette",
        "choice",
        "the app's colours: follow the desktop, light or dark",
        "app_start",
        choices=PALETTES,
    ),
)
"""The settings the desktop app lets the analyst edit (its Settings dialog and palette menu),
in the dialog's order; ``desktop-agent config`` edits the same ones, validated alike."""

EDITABLE_BY_NAME = {info.name: info for info in EDITABLE}

_NONE_WORDS = ("none", "off", "no", "0", "")
"""Words for no value (no limit, no cap, no deadline) where a setting may have none."""
_TRUE_WORDS = ("yes", "true", "on", "1", "y")
_FALSE_WORDS = ("no", "false", "off", "0", "n")


def expected(info: SettingInfo) -> str:
    """What a value of ``info`` must be, in words (for errors and help)."""
    none = ""
    if info.none:
        none = ", or none" + (f" ({info.none})" if info.none != "none" else "")
    if info.kind == "usd":
        most = f"{info.maximum:,.0f}"
        return f"an amount of dollars above 0 and at most {most} (e.g. 5 or 12.50){none}"
    if info.kind == "count":
        return f"a whole number from 1 to {info.maximum:,.0f}{none}"
    if info.kind == "duration":
        return f"a duration such as 90s, 30m, 2h, 1h30m or 3d{none}"
    if info.kind == "bool":
        return "yes or no (also true/false, on/off)"
    if info.kind == "url":
        return f"an http:// or https:// address{none}"
    if info.kind == "choice":
        return "one of " + ", ".join(info.choices)
    return "a model id (demo or a Claude model listed by `desktop-agent models`)"


def parse_setting(info: SettingInfo, text: str) -> Any:
    """The value ``text`` stands for as ``info``'s field holds it, checked as the app checks it.

    Raises:
        InvalidInputError: the text is not a valid value; the message says what is expected.
    """
    raw = text.strip()
    if info.none and info.kind != "bool" and raw.lower() in _NONE_WORDS:
        return "" if info.kind == "url" else None
    value = _PARSERS[info.kind](info, raw)
    if value is None:
        raise InvalidInputError(f"{info.name}: {text!r} is not valid; expected {expected(info)}")
    return value


def _number(info: SettingInfo, raw: str) -> float | int | None:
    try:
        number = float(raw.lower().removeprefix("$").replace(",", "").replace("_", ""))
    except ValueError:
        return None
    if not math.isfinite(number) or number <= 0:
        return None
    if info.maximum is not None and number > info.maximum:
        return None
    if info.kind == "count":
        return int(number) if number == int(number) else None
    return round(number, 2)


def _duration(_info: SettingInfo, raw: str) -> float | None:
    from desktop_agent.domain.units import parse_duration

    try:
        return parse_duration(raw)
    except InvalidInputError:
        return None


def _bool(_info: SettingInfo, raw: str) -> bool | None:
    low = raw.lower()
    return True if low in _TRUE_WORDS else False if low in _FALSE_WORDS else None


def _url(_info: SettingInfo, raw: str) -> str | None:
    ok = raw.startswith(("http://", "https://")) and not any(c.isspace() for c in raw)
    return raw if ok and len(raw) > len("https://") else None


def _choice(info: SettingInfo, raw: str) -> str | None:
    return next((c for c in info.choices if c.lower() == raw.lower()), None)


def _model(_info: SettingInfo, raw: str) -> str | None:
    return raw if raw and not any(c.isspace() for c in raw) else None


_PARSERS: dict[str, Callable[[SettingInfo, str], Any]] = {
    "usd": _number,
    "count": _number,
    "duration": _duration,
    "bool": _bool,
    "url": _url,
    "choice": _choice,
    "model": _model,
}


def show_setting(info: SettingInfo, value: Any) -> str:
    """A setting's value as ``config get`` shows it (and ``parse_setting`` reads it back).

    A webhook's address shows its scheme and host only: chat webhooks carry their secret in
    the path.
    """
    from desktop_agent.domain.units import format_duration

    if value is None or value == "":
        return info.none or "none"
    if info.kind == "usd":
        return f"{float(value):.2f}"
    if info.kind == "duration":
        return format_duration(float(value))
    if info.kind == "bool":
        return "yes" if value else "no"
    if info.kind == "url":
        scheme, _, rest = str(value).partition("://")
        host = rest.split("/", 1)[0]
        return f"{scheme}://{host}/…" if "/" in rest.strip("/") else f"{scheme}://{host}"
    return str(value)
