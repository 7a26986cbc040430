"""Where things live and the user's settings.

The database defaults to the user's data folder; ``--db PATH`` or ``DESKTOP_AGENT_DB``
override it. Settings are a small JSON file next to the database, so that a data folder
(copied, or given with ``--db``) carries its own settings.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
import hashlib
import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import PrivateAttr, ValidationError

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.settings import PALETTES as PALETTES
from desktop_agent.domain.settings import UNSAFE_DEFAULTS, field_names, secret_names
from desktop_agent.domain.settings import Settings as SettingsModel

APP_NAME = "desktop-agent"
DB_ENV = "DESKTOP_AGENT_DB"
DB_FILE = "desktop-agent.db"
URL_FILE = "database.url"
"""Beside where the database file would be: the PostgreSQL URL the folder stands for (the
same name as ``persistence.db.URL_FILE``, which reads it)."""

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


class Settings(SettingsModel):
    """The settings of one data folder: the typed model, plus where it is kept.

    Read with :meth:`load` (validated once, against
    :class:`desktop_agent.domain.settings.Settings`), written with :meth:`save`. The
    engine and the tools take the same object (they know it by its model's type).
    """

    _problems: list[str] = PrivateAttr(default_factory=list)
    _replaced: frozenset[str] = PrivateAttr(default=frozenset())
    _kept_at: Path | None = PrivateAttr(default=None)

    @property
    def problems(self) -> list[str]:
        """What was wrong in the file this was read from, one line each (empty: nothing).

        Each line names the setting, what was wrong, and the value used instead.
        """
        return list(self._problems)

    def replaced(self, name: str) -> bool:
        """Whether the file's value of setting ``name`` could not be used (see :meth:`load`)."""
        return name in self._replaced

    @property
    def kept_at(self) -> Path | None:
        """Where the bad file was kept aside, as it was, when it had problems."""
        return self._kept_at

    def problem_report(self) -> str:
        """The problems as the app, the CLI and the worker show them (empty: none)."""
        if not self._problems:
            return ""
        lines = [f"the settings file had {len(self._problems)} problem(s):"]
        lines += [f"  {p}" for p in self._problems]
        if self._kept_at is not None:
            lines.append(f"The file as it was is kept at {self._kept_at}.")
        lines.append(
            "Fix the values in the app's Settings or with `desktop-agent config set`; saving "
            "writes a valid file."
        )
        return "\n".join(lines)

    @classmethod
    def load(cls, db_path: Path) -> Settings:
        """Read the settings next to ``db_path`` (defaults when there are none).

        A file that is not JSON, or values that do not fit their setting, do not stop
        anything: the file is copied aside as it was (``settings.json.bad-<time>``, once
        per content), each bad value is replaced by its default (a spending cap by 0:
        see :data:`~desktop_agent.domain.settings.UNSAFE_DEFAULTS`), and
        :attr:`problems` says what was wrong. The file itself is left untouched until the
        settings are saved.

        Raises:
            InvalidInputError: the file exists but cannot be read at all (permissions).
        """
        path = settings_path(db_path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise InvalidInputError(f"cannot read settings {path}: {exc}") from None
        try:
            data = json.loads(raw)
            why = "" if isinstance(data, dict) else f"holds a JSON {type(data).__name__}"
        except ValueError as exc:
            data, why = None, f"is not valid JSON ({exc})"
        if why:
            settings = cls(**UNSAFE_DEFAULTS)
            caps = ", ".join(f"{k} at {v}" for k, v in UNSAFE_DEFAULTS.items())
            problems = [f"the file {why}: every setting is at its default ({caps})"]
            replaced = frozenset(field_names())
        else:
            settings, problems, names = _salvage(cls, data)
            replaced = frozenset(names)
        if problems:
            settings._problems = problems
            settings._replaced = replaced
            settings._kept_at = _keep_aside(path, raw)
        _report_once(path, raw, settings, secret_names(data) if isinstance(data, dict) else [])
        return settings

    def save(self, db_path: Path) -> None:
        """Write the settings next to ``db_path`` (private file, replaced atomically)."""
        path = settings_path(db_path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.model_dump(mode="json"), f, indent=2)
        os.replace(tmp, path)
        self._problems = []
        self._replaced = frozenset()
        self._kept_at = None


_REPORTED: set[tuple[str, str]] = set()
"""Files already reported by this process (path, content digest): a command or a worker
reads its settings several times, and says what is wrong with them once."""


def _report_once(path: Path, raw: bytes, settings: Settings, secrets: list[str]) -> None:
    if not settings.problems and not settings.unknown_names() and not secrets:
        return
    seen = (str(path), hashlib.sha256(raw).hexdigest())
    if seen in _REPORTED:
        return
    _REPORTED.add(seen)
    if settings.problems:
        log.warning("settings %s: %s", path, settings.problem_report())
    for name in settings.unknown_names():
        close = difflib.get_close_matches(name, field_names(), n=1)
        maybe = f" (did you mean {close[0]}?)" if close else ""
        log.warning("settings %s: %r is not a setting%s; it is kept, not used", path, name, maybe)
    for name in secrets:
        log.warning(
            "settings %s: %r looks like a secret: it is not used, and leaves the file when "
            "the settings are next saved; secrets belong in the OS keyring (README: "
            "Configuration, secrets)",
            path,
            name,
        )


def _salvage(cls: type[Settings], data: dict[str, Any]) -> tuple[Settings, list[str], set[str]]:
    """``data`` as settings with each value that does not fit replaced; what was, and which."""
    problems: list[str] = []
    replaced: set[str] = set()
    data = cls.lift_extra(data)
    for _ in range(len(data) + 1):
        try:
            return cls.model_validate(data), problems, replaced
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        bad = {str(e["loc"][0]) for e in errors if e["loc"]} - replaced
        if not bad:  # not a setting's error: nothing is known to be good
            break
        for name in sorted(bad):
            why = "; ".join(e["msg"] for e in errors if e["loc"] and str(e["loc"][0]) == name)
            value = json.dumps(data.pop(name, None), default=str)
            value = value if len(value) <= 60 else value[:57] + "..."
            if name in UNSAFE_DEFAULTS:
                data[name] = UNSAFE_DEFAULTS[name]
                used = f"{UNSAFE_DEFAULTS[name]} until it is fixed (nothing is spent)"
            else:
                default = cls.model_fields[name].get_default(call_default_factory=True)
                used = f"the default, {json.dumps(default)}"
            problems.append(f"{name} = {value}: {why}; using {used}")
            replaced.add(name)
    problems.append("the settings could not be read: every one is at its default")
    return cls(**UNSAFE_DEFAULTS), problems, set(field_names())


def _keep_aside(path: Path, raw: bytes) -> Path:
    """A copy of the bad file ``path`` beside it (the existing one if the same content)."""
    for old in sorted(path.parent.glob(f"{path.name}.bad-*")):
        with contextlib.suppress(OSError):
            if old.read_bytes() == raw:
                return old
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.bad-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.bad-{stamp}-{n}")
    try:
        fd = os.open(aside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except OSError as exc:  # the file itself stays untouched: nothing is lost
        log.warning("could not keep the bad settings file aside at %s: %s", aside, exc)
        return path
    return aside


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
        "claude_code_watch",
        "bool",
        "import Claude Code's new and grown sessions every half minute (workers do)",
        "at_once",
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
