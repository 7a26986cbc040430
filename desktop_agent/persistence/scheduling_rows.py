"""Row mapping and shared SQL of the scheduling tables (see :mod:`.schedules`)."""

from __future__ import annotations

from typing import Any, Protocol

from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    FolderWatch,
    ItemStatus,
    OverlapPolicy,
    RunTemplate,
    Schedule,
)
from desktop_agent.persistence.mapping import loads

TERMINAL = "('completed', 'failed', 'cancelled')"
"""Run statuses a run never leaves, as SQL (a stopped run may be resumed: not one)."""

ENDED_OR_STOPPED = "('completed', 'failed', 'cancelled', 'stopped')"
"""Run statuses whose batch item no longer takes one of the batch's slots, as SQL."""

_ITEM_OF_RUN = (
    "CASE r.status WHEN 'completed' THEN 'completed' WHEN 'failed' THEN 'failed' "
    "WHEN 'cancelled' THEN 'cancelled' WHEN 'stopped' THEN 'stopped' ELSE 'running' END"
)


SYNC_ITEMS = (
    f"UPDATE batch_items SET status = (SELECT {_ITEM_OF_RUN} FROM runs r "
    "WHERE r.id = batch_items.run_id), updated_at = :now "
    "WHERE status IN ('running', 'stopped') AND run_id IN (SELECT r.id FROM runs r "
    f"WHERE r.id = batch_items.run_id AND {_ITEM_OF_RUN} <> batch_items.status)"
)
"""Copy the state of item runs into the items: their end (so progress survives archiving
the runs), a stop (the item no longer takes one of the batch's slots), and a resume after
a stop (it takes one again)."""


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


def schedule_from_row(r: Any) -> Schedule:
    """Map a ``schedules`` row."""
    return Schedule(
        id=r["id"],
        name=r["name"] or "",
        template=RunTemplate.from_json(loads(r["template"])),
        cron=r["cron"],
        every_s=r["every_s"],
        timezone=r["timezone"] or "",
        overlap=OverlapPolicy(r["overlap"]),
        paused=bool(r["paused"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        last_fire_at=r["last_fire_at"],
        fire_count=r["fire_count"],
        skipped=r["skipped"],
        queued=r["queued"],
        last_run_id=r["last_run_id"],
        last_result=r["last_result"] or "",
        version=r["version"],
    )


def watch_from_row(r: Any) -> FolderWatch:
    """Map a ``watches`` row."""
    return FolderWatch(
        id=r["id"],
        folder=r["folder"],
        pattern=r["pattern"],
        template=RunTemplate.from_json(loads(r["template"])),
        scan_s=r["scan_s"],
        paused=bool(r["paused"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        version=r["version"],
    )


def batch_from_row(r: Any) -> Batch:
    """Map a ``batches`` row."""
    return Batch(
        id=r["id"],
        template=RunTemplate.from_json(loads(r["template"])),
        source=r["source"] or "",
        concurrency=r["concurrency"],
        total=r["total"],
        created_at=r["created_at"],
        from_folder=bool(r["from_folder"]),
    )


def item_from_row(r: Any) -> BatchItem:
    """Map a ``batch_items`` row joined with its run's status (``run_status``)."""
    status = ItemStatus(r["status"])
    if r["run_status"] is not None:
        status = ItemStatus.of_run(RunStatus(r["run_status"]))
    return BatchItem(
        batch_id=r["batch_id"],
        idx=r["idx"],
        item=r["item"],
        status=status,
        run_id=r["run_id"],
        attempts=r["attempts"],
        updated_at=r["updated_at"],
    )
