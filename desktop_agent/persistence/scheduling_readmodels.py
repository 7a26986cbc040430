"""Reads shaped for the desktop app's schedules, batches and watched-folders views.

Like :mod:`~desktop_agent.persistence.readmodels`: functions over a
:class:`~desktop_agent.persistence.db.Database`, each one read transaction, returning domain
objects and plain values to the client's views.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, Table, func, select

from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import BatchItem, BatchProgress, ItemStatus
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.readmodels import CHUNK
from desktop_agent.persistence.scheduling_rows import (
    RUN_STATUS,
    item_from_row,
    items_with_runs,
    progress_of,
)
from desktop_agent.persistence.tables import (
    batch_items,
    batches,
    run_alerts,
    runs,
    schedules,
    seen_files,
    watches,
)


def _count(table: Table, *where: ColumnElement[bool]) -> ScalarSelect[Any]:
    return select(func.count()).select_from(table).where(*where).scalar_subquery()


def _max(column: ColumnElement[Any]) -> ScalarSelect[Any]:
    return select(func.max(column)).scalar_subquery()


def _sum(column: ColumnElement[Any]) -> ScalarSelect[Any]:
    return select(func.coalesce(func.sum(column), 0)).scalar_subquery()


_TOKEN = select(
    _count(runs),
    _max(runs.c.updated_at),
    _count(schedules),
    _sum(schedules.c.version),
    _max(schedules.c.updated_at),
    _count(watches),
    _sum(watches.c.version),
    _count(seen_files),
    _count(batches),
    _count(batch_items, batch_items.c.status == str(ItemStatus.PENDING)),
    _count(run_alerts, run_alerts.c.cleared_at.is_(None)),
    _max(run_alerts.c.raised_at),
    _max(run_alerts.c.cleared_at),
)
"""Counts, versions and newest times of everything the scheduling views show."""

_PROGRESS = (
    select(batch_items.c.batch_id, batch_items.c.status, RUN_STATUS, func.count())
    .join_from(batch_items, runs, runs.c.id == batch_items.c.run_id, isouter=True)
    .group_by(batch_items.c.batch_id, batch_items.c.status, runs.c.status)
)
"""Items by batch, item status and run status."""

RUN_MESSAGE = runs.c.status_message.label("run_message")

_SEEN = select(
    seen_files.c.watch_id,
    func.count(),
    func.count(seen_files.c.run_id),
    func.max(seen_files.c.seen_at),
).group_by(seen_files.c.watch_id)


def scheduling_token(db: Database) -> tuple[Any, ...]:
    """A value that changes whenever anything the scheduling views show changes."""
    with db.read() as conn:
        return tuple(conn.execute(_TOKEN).one())


def batch_progress_all(db: Database) -> dict[str, BatchProgress]:
    """The progress of every batch that has items, in one query."""
    with db.read() as conn:
        rows = conn.execute(_PROGRESS).all()
    counts: dict[str, dict[ItemStatus, int]] = {}
    for batch_id, status, run_status, n in rows:
        item = ItemStatus(status)
        if run_status is not None:
            item = ItemStatus.of_run(RunStatus(run_status))
        by = counts.setdefault(str(batch_id), {s: 0 for s in ItemStatus})
        by[item] += int(n)
    return {batch_id: progress_of(by) for batch_id, by in counts.items()}


def items_with_messages(db: Database, batch_id: str) -> list[tuple[BatchItem, str]]:
    """The batch's items in order, each with its run's status message (empty: none)."""
    stmt = (
        items_with_runs(RUN_MESSAGE)
        .where(batch_items.c.batch_id == batch_id)
        .order_by(batch_items.c.idx)
    )
    with db.read() as conn:
        rows = conn.execute(stmt).mappings().all()
    return [(item_from_row(r), str(r[RUN_MESSAGE] or "")) for r in rows]


def run_statuses(db: Database, run_ids: Iterable[str]) -> dict[str, RunStatus]:
    """The status of each of these runs that still exists."""
    ids = sorted(set(run_ids))
    out: dict[str, RunStatus] = {}
    for start in range(0, len(ids), CHUNK):
        stmt = select(runs.c.id, runs.c.status).where(runs.c.id.in_(ids[start : start + CHUNK]))
        with db.read() as conn:
            out.update({str(i): RunStatus(s) for i, s in conn.execute(stmt).all()})
    return out


def watch_counts(db: Database) -> dict[str, tuple[int, int, float | None]]:
    """Per watch: files seen, files that started a run, and when the newest was seen."""
    with db.read() as conn:
        rows = conn.execute(_SEEN).all()
    return {str(w): (int(n), int(started), last) for w, n, started, last in rows}
