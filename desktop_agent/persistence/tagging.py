"""The analyst's annotations: tags on runs and notes on steps (migration 0013).

Neither is part of a run's journal: the engine never reads them, and no worker's commit
touches them. A change moves the run's ``updated_at`` in the same transaction, so the
app's poll (its change token, then the runs updated since) sees it, and search indexes
the run again (a note is a document of its own: see :mod:`.search`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from sqlalchemy import ColumnElement, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from desktop_agent.domain import Run
from desktop_agent.domain.errors import InvalidInputError, NotFoundError
from desktop_agent.domain.tags import TAGS_PER_RUN, StepNote
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.sqlbase import storage_error
from desktop_agent.persistence.tables import run_tags, runs, step_notes

CHUNK = 200
"""Runs per query where each run adds a parameter."""


def tags_of(db: Database, run_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The tags of each run that has some, sorted."""
    found: dict[str, list[str]] = {}
    ids = list(dict.fromkeys(run_ids))
    try:
        with db.read() as conn:
            for start in range(0, len(ids), CHUNK):
                stmt = (
                    select(run_tags.c.run_id, run_tags.c.tag)
                    .where(run_tags.c.run_id.in_(ids[start : start + CHUNK]))
                    .order_by(run_tags.c.run_id, run_tags.c.tag)
                )
                for run_id, tag in conn.execute(stmt):
                    found.setdefault(str(run_id), []).append(str(tag))
    except OperationalError as exc:
        raise storage_error(exc, db.busy_ms) from exc
    return {k: tuple(v) for k, v in found.items()}


def with_tags(db: Database, found: Sequence[Run]) -> list[Run]:
    """``found`` with each run's tags filled in (one read for them all)."""
    if not found:
        return []
    tags = tags_of(db, [r.id for r in found])
    return [dataclasses.replace(r, tags=tags[r.id]) if r.id in tags else r for r in found]


def having_tags(tags: Iterable[str]) -> ColumnElement[bool]:
    """A condition on ``runs``: the run carries every one of ``tags`` (lowercase)."""
    wanted = sorted(set(tags))
    carrying = (
        select(run_tags.c.run_id)
        .where(run_tags.c.tag.in_(wanted))
        .group_by(run_tags.c.run_id)
        .having(func.count(run_tags.c.tag) == len(wanted))
    )
    return runs.c.id.in_(carrying)


def change_tags(
    db: Database, run_id: str, add: Iterable[str], remove: Iterable[str], now: float
) -> tuple[str, ...]:
    """Add and remove tags of ``run_id`` in one transaction; its tags after.

    The tags are checked already (lowercase). The run's ``updated_at`` moves when
    anything changed.

    Raises:
        NotFoundError: no such run in the database.
        InvalidInputError: the run would carry more than :data:`TAGS_PER_RUN` tags.
    """
    adding, removing = set(add), set(remove)

    def txn(conn: Connection) -> tuple[str, ...]:
        if conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is None:
            raise NotFoundError(f"no run {run_id!r}")
        of_run = run_tags.c.run_id == run_id
        had = {str(t) for t in conn.execute(select(run_tags.c.tag).where(of_run)).scalars()}
        after = (had - removing) | adding
        if len(after) > TAGS_PER_RUN:
            raise InvalidInputError(
                f"run {run_id} would carry {len(after)} tags: at most {TAGS_PER_RUN}"
            )
        gone, new = sorted(had - after), sorted(after - had)
        if gone:
            conn.execute(delete(run_tags).where(of_run, run_tags.c.tag.in_(gone)))
        if new:
            conn.execute(insert(run_tags), [{"run_id": run_id, "tag": t} for t in new])
        if gone or new:
            conn.execute(update(runs).where(runs.c.id == run_id).values(updated_at=now))
        return tuple(sorted(after))

    try:
        with db.write() as conn:
            return txn(conn)
    except OperationalError as exc:
        raise storage_error(exc, db.busy_ms) from exc


def insert_tags(conn: Connection, run_id: str, tags: Iterable[str]) -> None:
    """Give a run being created its tags, inside the caller's transaction."""
    rows = [{"run_id": run_id, "tag": t} for t in sorted(set(tags))]
    if rows:
        conn.execute(insert(run_tags), rows)


def add_note(db: Database, run_id: str, seq: int, text: str, now: float) -> StepNote:
    """Write the analyst's note on step ``seq`` of ``run_id`` (text checked already).

    Raises:
        NotFoundError: no such run, or the run has no step ``seq`` yet.
    """

    def txn(conn: Connection) -> StepNote:
        last = conn.execute(select(runs.c.last_seq).where(runs.c.id == run_id)).scalar()
        if last is None:
            raise NotFoundError(f"no run {run_id!r}")
        if not 1 <= seq <= int(last):
            steps = f"steps 1 to {last}" if last else "no step yet"
            raise NotFoundError(f"run {run_id} has no step {seq} ({steps})")
        values = {"run_id": run_id, "seq": seq, "text": text, "created_at": now}
        key = conn.execute(insert(step_notes).values(values)).inserted_primary_key
        assert key is not None  # a single-row INSERT always has one
        conn.execute(update(runs).where(runs.c.id == run_id).values(updated_at=now))
        return StepNote(int(key[0]), run_id, seq, text, now)

    try:
        with db.write() as conn:
            return txn(conn)
    except OperationalError as exc:
        raise storage_error(exc, db.busy_ms) from exc


def notes_of(db: Database, run_id: str) -> list[StepNote]:
    """The notes on the run's steps, by step then in the order written."""
    stmt = (
        select(step_notes)
        .where(step_notes.c.run_id == run_id)
        .order_by(step_notes.c.seq, step_notes.c.id)
    )
    try:
        with db.read() as conn:
            rows = conn.execute(stmt).mappings().all()
    except OperationalError as exc:
        raise storage_error(exc, db.busy_ms) from exc
    return [
        StepNote(int(r["id"]), str(r["run_id"]), int(r["seq"]), str(r["text"]), r["created_at"])
        for r in rows
    ]
