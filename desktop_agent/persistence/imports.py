"""Runs brought in from another installation, kept read-only as archived runs.

An imported run never enters the journal tables: a worker claims runs from those, so a
run that is not there can never be claimed, resumed or changed here. Its record goes into
an archive file of its own in ``archives/`` (the format :mod:`.archive` writes and
:func:`.archive.find_archived` reads), and its text into the search index, marked
archived like any run retention moved out.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy import Table, delete, select
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError

from desktop_agent.domain.errors import InvalidInputError, StorageError
from desktop_agent.persistence import forks, search
from desktop_agent.persistence.archive import Archiver, find_archived
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.files import fsync_dir
from desktop_agent.persistence.tables import (
    approvals,
    commands,
    run_events,
    runs,
    search_runs,
    step_notes,
    steps,
)

_JSON_COLUMNS: dict[Table, tuple[str, ...]] = {
    runs: ("spec", "budget"),
    steps: ("input", "output", "salvaged"),
    approvals: ("arguments", "decided_arguments"),
    commands: ("payload",),
    run_events: ("data",),
}
_ROWS: tuple[tuple[Table, str], ...] = (
    (runs, "run"),
    (steps, "steps"),
    (approvals, "approvals"),
    (run_events, "events"),
    (step_notes, "notes"),
)
"""What the index reads of a record, in an order the foreign keys allow."""


def run_record(db: Database, run_id: str) -> dict[str, Any]:
    """The run's record in the archive's shape (row, steps, approvals, commands, events).

    Read through the archiver itself, so an exported run and an archived one are the
    same record; nothing is removed.
    """
    records = Archiver(db, Path())._records([run_id])
    if not records:
        raise StorageError(f"run {run_id} is not in the database")
    record = records[0]
    at = int(record["run"].get("forked_at_seq") or 0)
    if record["run"].get("forked_from") and at > 0:
        # A fork's first steps are its parent's rows (read, not copied): a record that
        # leaves the database carries them as its own, and stands alone.
        with db.read() as conn:
            segments, _found = forks.lineage(conn, run_id)
            stmt = select(steps).where(forks.journal_where(segments), steps.c.seq <= at)
            rows = conn.execute(stmt.order_by(steps.c.seq)).mappings()
            shared = [_decoded(steps, row) for row in rows]
        for row in shared:
            row["run_id"] = run_id
        record["steps"] = shared + [r for r in record["steps"] if int(r["seq"]) > at]
        record["run"]["forked_at_seq"] = 0
        record["shared_steps_copied"] = at
    return record


def _decoded(table: Table, row: Any) -> dict[str, Any]:
    item = dict(row)
    for col in _JSON_COLUMNS.get(table, ()):
        if isinstance(item.get(col), str):
            with contextlib.suppress(ValueError):
                item[col] = json.loads(item[col])
    return item


def where_known(db: Database, archives: Path, run_id: str) -> str | None:
    """Where this installation already has ``run_id``: ``"database"``, ``"archive"`` or None."""
    with db.read() as conn:
        if conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first():
            return "database"
        if search.available(db):
            indexed = select(search_runs.c.run_id).where(search_runs.c.run_id == run_id)
            if conn.execute(indexed).first():
                return "archive"
    found = find_archived(archives, run_id)
    return "archive" if found is not None and found.run_id == run_id else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write one record as an archive file (temporary name, flushed, renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
                gz.write(json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n")
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StorageError(f"cannot write {path}: {exc.strerror}") from None
    fsync_dir(path.parent)


def _encoded(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    columns = set(table.c.keys())
    item = {k: v for k, v in row.items() if k in columns}
    for col in _JSON_COLUMNS.get(table, ()):
        if item.get(col) is not None:
            item[col] = json.dumps(item[col], ensure_ascii=False)
    return item


def foreign_row(record: dict[str, Any]) -> str | None:
    """A row of ``record`` that is not a row of its own run (what and why), or None.

    Each step, approval and event must be a JSON object whose ``run_id`` is the run's own:
    a row of another run would stay in that run's journal once the index is built.
    """
    run_id = str(record["run"]["id"])
    for _table, key in _ROWS[1:]:
        rows = record.get(key) or []
        if not isinstance(rows, list):
            return f"its {key} are not a list"
        for row in rows:
            if not isinstance(row, dict):
                return f"one of its {key} is not a record"
            if str(row.get("run_id")) != run_id:
                return f"one of its {key} belongs to run {str(row.get('run_id'))[:64]!r}"
    return None


def clashing_ids(db: Database, record: dict[str, Any]) -> list[tuple[str, str]]:
    """The record's approval ids this database already has, each with the run holding it."""
    wanted = [
        str(row["id"])
        for row in record.get("approvals") or []
        if isinstance(row, dict) and row.get("id") is not None
    ]
    found: list[tuple[str, str]] = []
    with db.read() as conn:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            stmt = select(approvals.c.id, approvals.c.run_id).where(approvals.c.id.in_(chunk))
            found += [(str(i), str(r)) for i, r in conn.execute(stmt)]
    return found


def index_archived(db: Database, record: dict[str, Any]) -> None:
    """Index an archived record for search, marked archived; the journal is left as it was.

    The record's rows go into the journal tables only inside the one transaction that
    indexes them and takes them out again, so no other connection ever sees them. A
    no-op on databases without the index. Events get ids of this database (theirs are
    another's numbering).

    Raises:
        InvalidInputError: a row clashes with one already here, or holds values of the
            wrong kind; the transaction is rolled back, nothing changed.
        StorageError: the database cannot be written.
    """
    if not search.available(db):
        return
    run_id = str(record["run"]["id"])
    try:
        with db.write() as conn:
            for table, key in _ROWS:
                rows = record.get(key) or []
                for row in [rows] if isinstance(rows, dict) else rows:
                    item = _encoded(table, row)
                    if table in (run_events, step_notes):
                        item.pop("id", None)
                    conn.execute(table.insert().values(**item))
            search.catch_up_runs(conn, [run_id])
            search.mark_archived(conn, [run_id])
            for table, _key in reversed(_ROWS):
                column = table.c.id if table is runs else table.c.run_id
                conn.execute(delete(table).where(column == run_id))
    except OperationalError as exc:
        raise StorageError(f"cannot index run {run_id} for search: {exc.orig}") from None
    except IntegrityError as exc:
        raise InvalidInputError(
            f"run {run_id} clashes with what this database holds ({exc.orig}); nothing imported"
        ) from None
    except StatementError as exc:
        raise InvalidInputError(
            f"run {run_id}'s record holds values of the wrong kind ({exc.orig}); nothing imported"
        ) from None


def archived_id(db: Database, archives: Path, prefix: str) -> str | None:
    """The id of the archived (or imported) run ``prefix`` names, if one does.

    The search index answers first (it marks archived runs); the archive files only when
    the index has no such run, so a plain unknown id costs one read of the folder.
    """
    if not prefix:
        return None
    if search.available(db):
        stmt = (
            select(search_runs.c.run_id)
            .where(search_runs.c.run_id.startswith(prefix, autoescape=True))
            .where(search_runs.c.archived.is_(True))
            .limit(2)
        )
        with db.read() as conn:
            ids = [str(i) for i in conn.execute(stmt).scalars()]
        if len(ids) == 1:
            return ids[0]
    with contextlib.suppress(InvalidInputError):
        found = find_archived(archives, prefix)
        return found.run_id if found is not None else None
    return None
