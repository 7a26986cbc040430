"""Row mapping and shared statements of the scheduling tables (see :mod:`.schedules`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy import ColumnElement, RowMapping, Select, Update, case, select, update

from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    BatchProgress,
    FolderWatch,
    ItemStatus,
    OverlapPolicy,
    RunTemplate,
    Schedule,
)
from desktop_agent.persistence.mapping import loads
from desktop_agent.persistence.tables import batch_items, batches, runs, schedules, watches

TERMINAL = tuple(str(s) for s in RunStatus if s.is_terminal)
"""Run statuses a run never leaves (a stopped run may be resumed: not one)."""

ENDED_OR_STOPPED = (*TERMINAL, str(RunStatus.STOPPED))
"""Run statuses whose batch item no longer takes one of the batch's slots."""

RUN_STATUS = runs.c.status.label("run_status")
"""The status of an item's run, beside the item's columns (see :func:`item_from_row`)."""

_ITEM_OF_RUN = case(
    {s: str(ItemStatus.of_run(RunStatus(s))) for s in ENDED_OR_STOPPED},
    value=runs.c.status,
    else_=str(ItemStatus.RUNNING),
)
"""The item status a run's status means, in SQL (as :meth:`ItemStatus.of_run`)."""


def sync_items(now: float, batch_id: str | None = None) -> Update:
    """Copy the state of item runs into the items (of one batch, or of all).

    Their end (so progress survives archiving the runs), a stop (the item no longer takes
    one of the batch's slots), and a resume after a stop (it takes one again).
    """
    item = batch_items.c
    changed = select(runs.c.id).where(runs.c.id == item.run_id, item.status != _ITEM_OF_RUN)
    stmt = (
        update(batch_items)
        .where(
            item.status.in_((str(ItemStatus.RUNNING), str(ItemStatus.STOPPED))),
            item.run_id.in_(changed),
        )
        .values(
            status=select(_ITEM_OF_RUN).where(runs.c.id == item.run_id).scalar_subquery(),
            updated_at=now,
        )
    )
    return stmt if batch_id is None else stmt.where(item.batch_id == batch_id)


class RunMaker(Protocol):
    """Builds a queued run from a template (choosing its id and preparing its workspace)."""

    def __call__(
        self,
        template: RunTemplate,
        *,
        goal: str | None = None,
        parent_id: str | None = None,
        schedule_id: str | None = None,
        source_file: str | None = None,
    ) -> Run:
        """A new run, not yet stored."""
        ...


# --------------------------------------------------------------------------- mapping


def schedule_from_row(r: RowMapping) -> Schedule:
    """Map a ``schedules`` row."""
    c = schedules.c
    return Schedule(
        id=r[c.id],
        name=r[c.name] or "",
        template=RunTemplate.from_json(loads(r[c.template])),
        cron=r[c.cron],
        every_s=r[c.every_s],
        timezone=r[c.timezone] or "",
        overlap=OverlapPolicy(r[c.overlap]),
        paused=bool(r[c.paused]),
        created_at=r[c.created_at],
        updated_at=r[c.updated_at],
        last_fire_at=r[c.last_fire_at],
        fire_count=r[c.fire_count],
        skipped=r[c.skipped],
        queued=r[c.queued],
        last_run_id=r[c.last_run_id],
        last_result=r[c.last_result] or "",
        version=r[c.version],
    )


def watch_from_row(r: RowMapping) -> FolderWatch:
    """Map a ``watches`` row."""
    c = watches.c
    return FolderWatch(
        id=r[c.id],
        folder=r[c.folder],
        pattern=r[c.pattern],
        template=RunTemplate.from_json(loads(r[c.template])),
        scan_s=r[c.scan_s],
        paused=bool(r[c.paused]),
        created_at=r[c.created_at],
        updated_at=r[c.updated_at],
        version=r[c.version],
    )


def batch_from_row(r: RowMapping) -> Batch:
    """Map a ``batches`` row."""
    c = batches.c
    return Batch(
        id=r[c.id],
        template=RunTemplate.from_json(loads(r[c.template])),
        source=r[c.source] or "",
        concurrency=r[c.concurrency],
        total=r[c.total],
        created_at=r[c.created_at],
        from_folder=bool(r[c.from_folder]),
    )


def item_from_row(r: RowMapping) -> BatchItem:
    """Map a ``batch_items`` row joined with its run's status (:data:`RUN_STATUS`)."""
    c = batch_items.c
    status = ItemStatus(r[c.status])
    if r[RUN_STATUS] is not None:
        status = ItemStatus.of_run(RunStatus(r[RUN_STATUS]))
    return BatchItem(
        batch_id=r[c.batch_id],
        idx=r[c.idx],
        item=r[c.item],
        status=status,
        run_id=r[c.run_id],
        attempts=r[c.attempts],
        updated_at=r[c.updated_at],
    )


def items_with_runs(*extra: ColumnElement[Any]) -> Select[Any]:
    """Select a batch's items with the status of their runs (and ``extra`` run columns)."""
    return select(batch_items, RUN_STATUS, *extra).join_from(
        batch_items, runs, runs.c.id == batch_items.c.run_id, isouter=True
    )


def progress_of(counts: Mapping[ItemStatus, int]) -> BatchProgress:
    """A batch's progress from the number of its items in each status."""
    return BatchProgress(
        total=sum(counts.values()),
        completed=counts.get(ItemStatus.COMPLETED, 0),
        failed=counts.get(ItemStatus.FAILED, 0),
        cancelled=counts.get(ItemStatus.CANCELLED, 0),
        running=counts.get(ItemStatus.RUNNING, 0),
        pending=counts.get(ItemStatus.PENDING, 0),
        stopped=counts.get(ItemStatus.STOPPED, 0),
    )
