"""Backups of the database, for the CLI: list them, make one, put one back.

Unlike :class:`~desktop_agent.client.api.Client`, nothing here opens the database the usual
way (no migration, no connection pool), so that these still work when it is damaged: that
is when a restore is needed. Files are handled by :mod:`desktop_agent.persistence.backup`.
"""

from __future__ import annotations

import socket
from pathlib import Path

from desktop_agent.domain.errors import InvalidStateError
from desktop_agent.persistence import backup
from desktop_agent.persistence.backup import BackupInfo, Restored
from desktop_agent.persistence.ledger import ledger_path
from desktop_agent.procs import process_alive

__all__ = [
    "BackupInfo",
    "Restored",
    "backups",
    "check_no_worker",
    "effect_ledger",
    "make_backup",
    "restore",
]


def backups(db_path: Path) -> list[BackupInfo]:
    """The automatic and manual backups of ``db_path``, newest first."""
    return backup.list_backups(db_path)


def make_backup(db_path: Path) -> BackupInfo:
    """Back the database up now (a manual backup, kept like the automatic ones)."""
    return backup.make_backup(db_path, reason="manual")


def effect_ledger(db_path: Path) -> Path:
    """The effect ledger beside the database (what a restore reconciles the backup with)."""
    return ledger_path(db_path)


def check_no_worker(db_path: Path) -> None:
    """Refuse (InvalidStateError) when a live worker on this machine uses the database."""
    users = _live_workers(db_path)
    if users:
        raise InvalidStateError(
            f"a worker (pid {', '.join(map(str, users))}) is using the database: "
            "stop it (and the app) before restoring"
        )


def restore(db_path: Path, chosen: Path | None = None) -> Restored:
    """Put a backup (``chosen``, or the newest sound one) in place of the database.

    Nothing must have the database open: call :func:`check_no_worker` first.

    Raises:
        StorageError: no usable backup, or the files cannot be moved.
    """
    return backup.restore(db_path, chosen)


def _live_workers(db_path: Path) -> list[int]:
    """Pids of live workers on this machine that the database knows of (best effort)."""
    here = socket.gethostname()
    return [
        pid
        for host, pid, started in backup.recorded_workers(db_path)
        if host == here and process_alive(pid, started)
    ]
