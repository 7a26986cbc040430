"""Wiring of the scheduler into the worker: its port over the database.

:class:`DbSchedulerPort` implements the scheduler's port with the SQL stores and the file
system (runs' workspaces, watched folders, archives). :func:`attach_scheduler` gives a
worker its :class:`~desktop_agent.scheduler.service.SchedulerService`: the service nudges
the worker when a wake-up falls due, and hears about each activation's end. APScheduler is
imported then, not with this module.

The clock seam (``DESKTOP_AGENT_CLOCK_OFFSET``) lives in :mod:`desktop_agent.worker.clock`
(its names are still offered here).
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from desktop_agent.config import Settings
from desktop_agent.domain import Run
from desktop_agent.domain.scheduling import (
    FireResult,
    FolderWatch,
    RunTemplate,
    Schedule,
    StuckRun,
)
from desktop_agent.engine.ports import Clock
from desktop_agent.persistence.archive import Archiver
from desktop_agent.persistence.schedules import ScheduleStore
from desktop_agent.persistence.store import SqlStore
from desktop_agent.scheduler.folders import folder_files
from desktop_agent.worker.clock import CLOCK_OFFSET_ENV, OffsetClock, clock_from_env
from desktop_agent.worker.worker import Worker

if TYPE_CHECKING:  # APScheduler is imported when the service is attached, not at import
    from desktop_agent.scheduler.service import SchedulerConfig, SchedulerService

__all__ = [
    "CLOCK_OFFSET_ENV",
    "SETTLE_S",
    "DbSchedulerPort",
    "OffsetClock",
    "attach_scheduler",
    "clock_from_env",
    "data_dir_of",
    "scheduler_config",
]

log = logging.getLogger(__name__)

SETTLE_S = 1.0
"""A file modified more recently than this may still be being written: the next scan."""


def data_dir_of(store: SqlStore) -> Path:
    """The data folder of the database (default workspaces, archives).

    A PostgreSQL database has one too: the local folder that stands for it (see
    ``config.server_folder``). Only a database opened from a bare URL has none, and then
    the folder is the current one, which the caller should avoid.
    """
    settings = store.db.settings
    if settings.folder is not None:
        return settings.folder
    path = settings.sqlite_path
    return path.parent if path is not None else Path.cwd()


def scheduler_config(settings: Settings) -> SchedulerConfig:
    """The service's tunables from the user's settings."""
    from desktop_agent.scheduler.service import SchedulerConfig

    stall = settings.notify_stall_minutes
    days = settings.retention_days
    return SchedulerConfig(
        stuck_after_s=stall * 60.0 if stall and stall > 0 else None,
        retention_s=days * 86400.0 if days and days > 0 else None,
    )


class DbSchedulerPort:
    """The scheduler's port over the database and the file system.

    Args:
        store: the worker's store (runs).
        clock: the worker's clock.
        data_dir: folder of default workspaces (``workspaces/RUN``) and ``archives/``.
    """

    def __init__(self, store: SqlStore, clock: Clock, data_dir: Path) -> None:
        self.clock = clock
        self.store = store
        self.schedules_db = ScheduleStore(store.db, clock.now)
        self.data_dir = data_dir
        self.archiver = Archiver(store.db, data_dir / "archives", clock.now)

    # ------------------------------------------------------------------ reads

    def wake_times(self) -> list[tuple[str, float]]:
        """(run id, wake time) of every waiting run that has one."""
        return self.store.waiting_wake_times()

    def wake_time(self, run_id: str) -> float | None:
        """The run's wake time if it waits with one."""
        return self.schedules_db.wake_time(run_id)

    def schedules(self) -> list[Schedule]:
        """Every schedule."""
        return self.schedules_db.list_schedules()

    def watches(self) -> list[FolderWatch]:
        """Every folder watch."""
        return self.schedules_db.list_watches()

    def definitions_token(self) -> str:
        """Changes whenever a schedule or watch does."""
        return self.schedules_db.definitions_token()

    # ------------------------------------------------------------------ effects

    def make_run(
        self,
        template: RunTemplate,
        *,
        goal: str | None = None,
        parent_id: str | None = None,
        schedule_id: str | None = None,
        source_file: str | None = None,
    ) -> Run:
        """A new queued run from ``template``, its workspace ready.

        A run with a fresh workspace gets a copy of its source file (a watched folder's
        new file, a batch's file), so that the agent can read it and its outputs never
        land in the watched folder.
        """
        run_id = uuid.uuid4().hex[:10]
        if template.workspace:
            workspace = Path(template.workspace)
        else:
            workspace = self.data_dir / "workspaces" / run_id
        workspace.mkdir(parents=True, exist_ok=True)
        if source_file and not template.workspace:
            src = Path(source_file)
            try:
                shutil.copy2(src, workspace / src.name)
            except OSError as exc:
                log.warning("run %s: cannot copy %s into its workspace: %s", run_id, src, exc)
        return template.make_run(
            run_id,
            self.clock.now(),
            str(workspace),
            goal=goal if goal is not None else template.render_goal(),
            parent_id=parent_id,
            schedule_id=schedule_id,
        )

    def fire_schedule(
        self, schedule: Schedule, fire_at: float, missed: int, now: float
    ) -> FireResult:
        """Handle one (coalesced) firing of ``schedule``."""
        return self.schedules_db.fire_schedule(schedule, fire_at, missed, now, self.make_run)

    def scan_watch(self, watch_id: str, now: float) -> list[str]:
        """Start a run for each new file of the watched folder."""
        watch = next((w for w in self.watches() if w.id == watch_id), None)
        if watch is None or watch.paused:
            return []
        seen = self.schedules_db.seen_files(watch.id)
        started = []
        for key in folder_files(Path(watch.folder), watch.pattern, settle_s=SETTLE_S, by_time=True):
            if key in seen:
                continue
            run_id = self.schedules_db.start_for_file(watch, key, self.make_run, now)
            if run_id is not None:
                log.info("watch %s: %s started run %s", watch.id, key.path, run_id)
                started.append(run_id)
        return started

    def pump(self, now: float) -> list[str]:
        """Start the next batch items and queued schedule firings."""
        return self.schedules_db.pump(self.make_run, now)

    def flag_stuck(self, now: float, after_s: float) -> Sequence[StuckRun]:
        """Flag running runs without journal progress; the newly flagged."""
        return self.schedules_db.flag_stuck(now, after_s)

    def archive_finished(self, before: float, now: float) -> int:
        """Archive and remove runs finished before ``before``."""
        return len(self.archiver.archive(before).run_ids)


def attach_scheduler(
    worker: Worker,
    settings: Settings,
    *,
    config: SchedulerConfig | None = None,
    on_stuck: Callable[[StuckRun], None] | None = None,
) -> SchedulerService:
    """Give ``worker`` a scheduler service (started and stopped by the caller).

    The service nudges the worker when a wake-up falls due and hears, through the
    worker's ``on_activation_end``, about every activation's end.
    """
    from desktop_agent.scheduler.service import SchedulerService

    port = DbSchedulerPort(worker.store, worker.clock, data_dir_of(worker.store))
    service = SchedulerService(
        port,
        worker.clock,
        nudge=worker.nudge,
        config=config or scheduler_config(settings),
        on_stuck=on_stuck,
    )
    previous = worker.on_activation_end

    def activation_ended(run_id: str) -> None:
        service.run_changed(run_id)
        if previous is not None:
            previous(run_id)

    worker.on_activation_end = activation_ended
    return service
