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
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Table, delete, func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from desktop_agent.domain.errors import InvalidInputError, StorageError
from desktop_agent.persistence import search
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.files import fsync_dir
from desktop_agent.persistence.mapping import loads
from desktop_agent.persistence.redaction import redact
from desktop_agent.persistence.scheduling_rows import TERMINAL, sync_items
from desktop_agent.persistence.tables import (
    approvals,
    batch_items,
    commands,
    run_alerts,
    run_events,
    run_tags,
    runs,
    schedules,
    snapshots,
    step_notes,
    steps,
    watches,
)

_JSON_COLUMNS: dict[Table, tuple[str, ...]] = {
    runs: (runs.c.spec.key, runs.c.budget.key),
    steps: (steps.c.input.key, steps.c.output.key, steps.c.salvaged.key),
    approvals: (approvals.c.arguments.key, approvals.c.decided_arguments.key),
    commands: (commands.c.payload.key,),
    run_events: (run_events.c.data.key,),
}
"""Columns holding JSON text, decoded in the archive."""

_OF_RUNS: tuple[Column[str], ...] = (
    step_notes.c.run_id,
    run_tags.c.run_id,
    run_alerts.c.run_id,
    run_events.c.run_id,
    commands.c.run_id,
    approvals.c.run_id,
    snapshots.c.run_id,
    steps.c.run_id,
    runs.c.id,
)
"""What an archived run removes, in an order the foreign keys allow."""

_COUNTED = (runs, steps, approvals, commands, schedules, batch_items, watches)
"""Tables whose row counts :func:`db_info` reports."""
ARCHIVE_FORMAT = "desktop-agent-archive-1"
CHUNK = 200
"""Runs per read-and-delete round, to bound memory."""


@dataclass(frozen=True)
class ArchiveResult:
    """What an archive pass did.

    Attributes:
        path: the archive file written, or None when nothing was old enough.
        run_ids: the runs archived and removed.
        kept_for_forks: old enough runs kept because forks still read their steps.
    """

    path: Path | None
    run_ids: list[str] = field(default_factory=list)
    kept_for_forks: list[str] = field(default_factory=list)


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
        ids, kept = _without_fork_parents(self.db, self._candidates(before))
        if not ids:
            return ArchiveResult(None, kept_for_forks=kept)
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
        fsync_dir(path.parent)
        # Archived runs stay searchable: their text is indexed (in short transactions)
        # before their rows go, and whatever is left in the transaction that removes them.
        search.catch_up(self.db, ids)
        for start in range(0, len(ids), CHUNK):
            self._delete(ids[start : start + CHUNK])
        return ArchiveResult(path, ids, kept)

    def _new_path(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.now()))
        return self.folder / f"runs-{stamp}-{uuid.uuid4().hex[:6]}.jsonl.gz"

    def _candidates(self, before: float) -> list[str]:
        stmt = (
            select(runs.c.id)
            .where(
                runs.c.status.in_(TERMINAL),
                func.coalesce(runs.c.finished_at, runs.c.updated_at) < before,
            )
            .order_by(runs.c.created_at)
        )
        with self.db.read() as conn:
            return [str(i) for i in conn.execute(stmt).scalars()]

    def _records(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        def rows_of(
            conn: Connection, table: Table, key: Column[str], *order: Column[Any]
        ) -> dict[str, list[Any]]:
            out: dict[str, list[Any]] = {}
            stmt = select(table).where(key.in_(list(ids))).order_by(*order)
            for row in conn.execute(stmt).mappings():
                item = _decoded(table, row)
                out.setdefault(str(item[key.key]), []).append(item)
            return out

        with self.db.read() as conn:
            found = rows_of(conn, runs, runs.c.id, runs.c.created_at)
            step_rows = rows_of(conn, steps, steps.c.run_id, steps.c.run_id, steps.c.seq)
            approval_rows = rows_of(
                conn, approvals, approvals.c.run_id, approvals.c.run_id, approvals.c.created_at
            )
            command_rows = rows_of(
                conn, commands, commands.c.run_id, commands.c.run_id, commands.c.id
            )
            events = rows_of(
                conn, run_events, run_events.c.run_id, run_events.c.run_id, run_events.c.id
            )
            tags = rows_of(conn, run_tags, run_tags.c.run_id, run_tags.c.run_id, run_tags.c.tag)
            notes = rows_of(
                conn, step_notes, step_notes.c.run_id, step_notes.c.run_id, step_notes.c.id
            )
        return [
            {
                "format": ARCHIVE_FORMAT,
                "run": found[run_id][0],
                "steps": step_rows.get(run_id, []),
                "approvals": approval_rows.get(run_id, []),
                "commands": command_rows.get(run_id, []),
                "events": events.get(run_id, []),
                "tags": [row["tag"] for row in tags.get(run_id, [])],
                "notes": notes.get(run_id, []),
            }
            for run_id in ids
            if run_id in found
        ]

    def _delete(self, ids: Sequence[str]) -> None:
        try:
            with self.db.write() as conn:
                # Batch items keep their final status once their run is gone.
                conn.execute(sync_items(self.now()))
                if search.available(self.db):
                    search.catch_up_runs(conn, ids)
                    search.mark_archived(conn, ids)
                for key in _OF_RUNS:
                    conn.execute(delete(key.table).where(key.in_(list(ids))))
        except OperationalError as exc:
            raise StorageError(f"cannot remove archived runs: {exc.orig}") from None


def _without_fork_parents(db: Database, ids: list[str]) -> tuple[list[str], list[str]]:
    """``ids`` without the runs whose steps a fork kept in the database still reads.

    A fork reads its parent's first steps from the parent's rows (see
    :mod:`desktop_agent.persistence.forks`), so a parent stays while a fork of it stays;
    a kept parent that is itself a fork keeps its own parent in turn. A "run again"
    (``forked_at_seq`` 0) reads nothing of its original.
    """
    stmt = select(runs.c.id, runs.c.forked_from).where(
        runs.c.forked_from.is_not(None), runs.c.forked_at_seq > 0
    )
    with db.read() as conn:
        links = [(str(r.id), str(r.forked_from)) for r in conn.execute(stmt)]
    going = set(ids)
    changed = True
    while changed:
        changed = False
        for fork_id, parent in links:
            if fork_id not in going and parent in going:
                going.discard(parent)
                changed = True
    return [i for i in ids if i in going], [i for i in ids if i not in going]


def _decoded(table: Table, row: Any) -> dict[str, Any]:
    item = dict(row)
    for col in _JSON_COLUMNS.get(table, ()):
        if isinstance(item.get(col), str):
            with contextlib.suppress(ValueError):
                item[col] = loads(item[col])
    return item


def read_archive(path: Path) -> list[dict[str, Any]]:
    """Every record of an archive file (for tests and for looking back)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- upkeep


def db_info(db: Database) -> DbInfo:
    """Size, schema revision and row counts of the database."""
    by_status_query = (
        select(runs.c.status, func.count()).group_by(runs.c.status).order_by(runs.c.status)
    )
    with db.read() as conn:
        rows = {
            t.name: int(conn.execute(select(func.count()).select_from(t)).scalar() or 0)
            for t in _COUNTED
        }
        by_status = {str(status): int(n) for status, n in conn.execute(by_status_query)}
        revision = db.current_revision(conn)
        free = 0
        if db.is_sqlite:
            page = int(conn.execute(text("PRAGMA page_size")).scalar() or 0)
            free = page * int(conn.execute(text("PRAGMA freelist_count")).scalar() or 0)
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


# --------------------------------------------------------------------------- looking back

_RESTORED: tuple[tuple[Table, str], ...] = (
    (runs, "run"),
    (steps, "steps"),
    (approvals, "approvals"),
    (commands, "commands"),
    (run_events, "events"),
    (step_notes, "notes"),
)
"""What an archive record brings back, in an order the foreign keys allow (its ``tags``
too, a list of strings: see :func:`unarchive`)."""


@dataclass(frozen=True)
class ArchivedRun:
    """A run found in an archive file.

    Attributes:
        path: the archive file (the newest that holds the run).
        record: the run's record as archived (``run``, ``steps``, ``approvals``, ...).
    """

    path: Path
    record: dict[str, Any]

    @property
    def run_id(self) -> str:
        """The run's id."""
        return str(self.record["run"]["id"])


def find_archived(folder: Path, prefix: str) -> ArchivedRun | None:
    """The newest archived record of the run whose id is or starts with ``prefix``.

    Raises:
        InvalidInputError: ``prefix`` matches several archived runs.
    """
    if not prefix or not folder.is_dir():
        return None
    found: dict[str, ArchivedRun] = {}
    for path in sorted(folder.glob("runs-*.jsonl.gz"), reverse=True):  # newest first
        try:
            records = read_archive(path)
        except (OSError, ValueError, EOFError):
            continue  # a damaged archive: the others are still read
        for record in records:
            run_id = str(record.get("run", {}).get("id", ""))
            if run_id.startswith(prefix) and run_id not in found:
                # Through the redaction again: an older release's left half of wrapped keys.
                found[run_id] = ArchivedRun(path, redact(record))
    if prefix in found:
        return found[prefix]
    if len(found) > 1:
        raise InvalidInputError(
            f"{prefix!r} matches {len(found)} archived runs: give more of the id"
        )
    return next(iter(found.values()), None)


def _encoded(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """A record's row as the table stores it: its own columns, JSON as text."""
    columns = set(table.c.keys())
    item = {k: v for k, v in row.items() if k in columns}
    for col in _JSON_COLUMNS.get(table, ()):
        if item.get(col) is not None:
            item[col] = json.dumps(item[col], ensure_ascii=False)
    return item


def unarchive(db: Database, archived: ArchivedRun) -> None:
    """Put an archived run back into the database (the archive file is left as it is).

    Raises:
        InvalidInputError: the run is in the database already, or it was imported from
            another installation (it stays read-only here: nothing of it may run again).
    """
    run_id = archived.run_id
    imported = archived.record.get("imported")
    if imported:
        source = imported.get("from") if isinstance(imported, dict) else None
        raise InvalidInputError(
            f"run {run_id} was imported{f' from {source}' if source else ''}: it stays "
            "read-only here (show, search and export read it; it never runs again here)"
        )
    try:
        with db.write() as conn:
            if conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first():
                raise InvalidInputError(f"run {run_id} is in the database already")
            for table, key in _RESTORED:
                rows = archived.record.get(key) or []
                for row in [rows] if isinstance(rows, dict) else rows:
                    item = _encoded(table, row)
                    if table is step_notes:  # numbered anew: its old id may be taken since
                        item.pop("id", None)
                    if table in (commands, run_events):  # the same: a later run's may be
                        item.pop("id", None)
                    conn.execute(table.insert().values(**item))
            tags = archived.record.get("tags") or []
            if isinstance(tags, list) and tags:
                conn.execute(run_tags.insert(), [{"run_id": run_id, "tag": str(t)} for t in tags])
            if search.available(db):
                search.mark_unarchived(conn, [run_id])
    except OperationalError as exc:
        raise StorageError(f"cannot bring run {run_id} back: {exc.orig}") from None
