"""Retention and upkeep: archive finished runs to a compressed file, size, VACUUM.

An archive is a gzip-compressed JSON-lines file, one line per run: the run's row, its
steps, approvals and commands, with JSON columns decoded. The file is written to a
temporary name, flushed to disk and renamed before any row is deleted, so a crash loses
nothing (at worst a run is archived twice, into two files). The API key is never stored
in the database; anything that looks like one is redacted from archives all the same.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from desktop_agent.domain.errors import InvalidInputError, StorageError
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import loads
from desktop_agent.persistence.scheduling_rows import SYNC_ITEMS, TERMINAL

_JSON_COLUMNS = {
    "runs": ("spec", "budget"),
    "steps": ("input", "output", "salvaged"),
    "approvals": ("arguments", "decided_arguments"),
    "commands": ("payload",),
    "run_events": ("data",),
}
_KEY_LIKE = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
ARCHIVE_FORMAT = "desktop-agent-archive-1"
CHUNK = 200
"""Runs per read-and-delete round, to bound memory."""


@dataclass(frozen=True)
class ArchiveResult:
    """What an archive pass did.

    Attributes:
        path: the archive file written, or None when nothing was old enough.
        run_ids: the runs archived and removed.
    """

    path: Path | None
    run_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DbInfo:
    """Where the database is and how big.

    Attributes:
        location: file path, or the URL without password.
        file_bytes: size of the main file (SQLite).
        wal_bytes: size of the write-ahead log (SQLite).
        free_bytes: unused pages that VACUUM would give back (SQLite).
        revision: schema revision.
        rows: row count per table.
        runs_by_status: run count per status.
    """

    location: str
    file_bytes: int
    wal_bytes: int
    free_bytes: int
    revision: str | None
    rows: dict[str, int]
    runs_by_status: dict[str, int]


def redact(value: Any) -> Any:
    """``value`` with every string that looks like an Anthropic API key replaced."""
    if isinstance(value, str):
        return _KEY_LIKE.sub("[redacted]", value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


class Archiver:
    """Archives finished runs of one database into a folder.

    Args:
        db: the database.
        folder: where archive files go (created private if missing).
        clock: time source for file names and bookkeeping.
    """

    def __init__(self, db: Database, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.folder = folder
        self.now = clock

    def archive(self, before: float, *, out: Path | None = None) -> ArchiveResult:
        """Archive and remove every run that finished before ``before``."""
        ids = self._candidates(before)
        if not ids:
            return ArchiveResult(None)
        path = out or self._new_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot write the archive {path}: {exc.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as raw:
                with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
                    for start in range(0, len(ids), CHUNK):
                        for record in self._records(ids[start : start + CHUNK]):
                            line = json.dumps(redact(record), ensure_ascii=False, default=str)
                            gz.write(line.encode() + b"\n")
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise StorageError(f"cannot write the archive {path}: {exc.strerror}") from None
        _fsync_dir(path.parent)
        for start in range(0, len(ids), CHUNK):
            self._delete(ids[start : start + CHUNK])
        return ArchiveResult(path, ids)

    def _new_path(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.now()))
        return self.folder / f"runs-{stamp}-{uuid.uuid4().hex[:6]}.jsonl.gz"

    def _candidates(self, before: float) -> list[str]:
        sql = sa.text(
            f"SELECT id FROM runs WHERE status IN {TERMINAL} "
            "AND coalesce(finished_at, updated_at) < :before ORDER BY created_at"
        )
        with self.db.read() as conn:
            return [str(r[0]) for r in conn.execute(sql, {"before": before})]

    def _records(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        def table(conn: Connection, name: str, key: str, order: str) -> dict[str, list[Any]]:
            out: dict[str, list[Any]] = {}
            sql = sa.text(f"SELECT * FROM {name} WHERE {key} IN :ids ORDER BY {order}")
            sql = sql.bindparams(sa.bindparam("ids", expanding=True))
            for row in conn.execute(sql, {"ids": list(ids)}).mappings():
                item = _decoded(name, row)
                out.setdefault(str(item[key]), []).append(item)
            return out

        with self.db.read() as conn:
            runs = table(conn, "runs", "id", "created_at")
            steps = table(conn, "steps", "run_id", "run_id, seq")
            approvals = table(conn, "approvals", "run_id", "run_id, created_at")
            commands = table(conn, "commands", "run_id", "run_id, id")
            events = table(conn, "run_events", "run_id", "run_id, id")
        return [
            {
                "format": ARCHIVE_FORMAT,
                "run": runs[run_id][0],
                "steps": steps.get(run_id, []),
                "approvals": approvals.get(run_id, []),
                "commands": commands.get(run_id, []),
                "events": events.get(run_id, []),
            }
            for run_id in ids
            if run_id in runs
        ]

    def _delete(self, ids: Sequence[str]) -> None:
        try:
            with self.db.write() as conn:
                # Batch items keep their final status once their run is gone.
                conn.execute(sa.text(SYNC_ITEMS), {"now": self.now()})
                for name, key in (
                    ("run_alerts", "run_id"),
                    ("run_events", "run_id"),
                    ("commands", "run_id"),
                    ("approvals", "run_id"),
                    ("snapshots", "run_id"),
                    ("steps", "run_id"),
                    ("runs", "id"),
                ):
                    sql = sa.text(f"DELETE FROM {name} WHERE {key} IN :ids")
                    conn.execute(
                        sql.bindparams(sa.bindparam("ids", expanding=True)), {"ids": list(ids)}
                    )
        except OperationalError as exc:
            raise StorageError(f"cannot remove archived runs: {exc.orig}") from None


def _decoded(table: str, row: Any) -> dict[str, Any]:
    item = dict(row)
    for col in _JSON_COLUMNS.get(table, ()):
        if isinstance(item.get(col), str):
            with contextlib.suppress(ValueError):
                item[col] = loads(item[col])
    return item


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_archive(path: Path) -> list[dict[str, Any]]:
    """Every record of an archive file (for tests and for looking back)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- upkeep


def db_info(db: Database) -> DbInfo:
    """Size, schema revision and row counts of the database."""
    tables = ("runs", "steps", "approvals", "commands", "schedules", "batch_items", "watches")
    with db.read() as conn:
        rows = {
            t: int(conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() or 0) for t in tables
        }
        by_status = {
            str(status): int(n)
            for status, n in conn.exec_driver_sql(
                "SELECT status, count(*) FROM runs GROUP BY status ORDER BY status"
            )
        }
        revision = db.current_revision(conn)
        free = 0
        if db.is_sqlite:
            page = int(conn.exec_driver_sql("PRAGMA page_size").scalar() or 0)
            free = page * int(conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
    path = db.settings.sqlite_path
    size = path.stat().st_size if path and path.exists() else 0
    wal = Path(str(path) + "-wal") if path else None
    wal_size = wal.stat().st_size if wal and wal.exists() else 0
    return DbInfo(db.describe(), size, wal_size, free, revision, rows, by_status)


def vacuum(db: Database) -> None:
    """Give free pages back to the file system and empty the write-ahead log (SQLite).

    Raises:
        InvalidInputError: the database is not SQLite (its server vacuums by itself).
        StorageError: another process holds the database.
    """
    if not db.is_sqlite:
        raise InvalidInputError("VACUUM here is for SQLite; the database server does its own")
    raw = db.writer.raw_connection()
    try:
        driver = raw.driver_connection
        assert driver is not None
        # VACUUM cannot run inside a transaction, and our writer connections begin one
        # implicitly: use the driver's connection, which is in autocommit mode.
        driver.execute("VACUUM")
        driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception as exc:  # the driver's own error type
        raise StorageError(f"VACUUM failed: {exc}") from None
    finally:
        raw.close()
