"""Where things live and the user's settings.

The database defaults to the user's data folder; ``--db PATH`` or ``DESKTOP_AGENT_DB``
override it. Settings are a small JSON file next to the database, so that a data folder
(copied, or given with ``--db``) carries its own settings.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from desktop_agent.domain.errors import InvalidInputError

APP_NAME = "desktop-agent"
DB_ENV = "DESKTOP_AGENT_DB"
DB_FILE = "desktop-agent.db"


def default_data_dir() -> Path:
    """The user's data folder for desktop-agent."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def resolve_db_path(cli_value: str | None = None) -> Path:
    """``--db``, else ``DESKTOP_AGENT_DB``, else the data folder's database."""
    if cli_value:
        return Path(cli_value).expanduser().absolute()
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser().absolute()
    return default_data_dir() / DB_FILE


@dataclass
class Settings:
    """User settings, stored as ``settings.json`` beside the database.

    Attributes:
        default_model: model for new runs.
        default_max_cost_usd: default cost budget of new runs (None: unlimited).
        default_max_steps: default step budget.
        default_max_time_s: default time budget.
        durability: ``FULL`` or ``NORMAL`` (SQLite ``synchronous``).
        workers: runs executed at once by one worker.
        close_action: what closing the main window does: ``tray`` or ``quit``.
        approval_deadline_s: default deadline of approvals (None: none).
        approval_default: what an expired approval does: ``reject`` or ``approve``.
        ask_unsafe: ask before every tool with an unsafe effect.
        ask_overwrite: ask before a write that overwrites different content.
        webhook_url: where to POST notifications (empty: none).
        allow_private_fetch: let web_fetch reach private and loopback addresses.
        fallback_model: model used after repeated overload (empty: none).
        compaction_threshold: fraction of the context window that triggers compaction.
    """

    default_model: str = "demo"
    default_max_cost_usd: float | None = 5.0
    default_max_steps: int | None = 200
    default_max_time_s: float | None = None
    durability: str = "FULL"
    workers: int = 8
    close_action: str = "tray"
    approval_deadline_s: float | None = None
    approval_default: str = "reject"
    ask_unsafe: bool = True
    ask_overwrite: bool = True
    webhook_url: str = ""
    allow_private_fetch: bool = False
    fallback_model: str = ""
    compaction_threshold: float = 0.8
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
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

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
            **self.extra,
        }


def settings_path(db_path: Path) -> Path:
    """Where the settings of the database at ``db_path`` live."""
    return db_path.parent / "settings.json"


def log_dir(db_path: Path) -> Path:
    """Folder for worker logs, beside the database."""
    path = db_path.parent / "logs"
    with contextlib.suppress(OSError):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
