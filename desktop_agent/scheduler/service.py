"""The scheduler service: APScheduler jobs rebuilt from the database, inside the worker.

Every durable time lives in the database (wake times of waiting runs, which include
approval deadlines and rate-limit waits; schedule definitions with their last handled
firing; folder watches). At start the service builds a job per time from there in a
:class:`~apscheduler.jobstores.memory.MemoryJobStore`; nothing of APScheduler's is ever
persisted. Jobs are added with ``misfire_grace_time=None`` and ``coalesce=True``: a time
that passed while no worker ran has its job's first run time in the past, and APScheduler
runs it once, at once, instead of dropping it after the default one-second grace.

Jobs take plain ids and re-read the database when they fire. What is due is decided from
the database and the worker's clock (:class:`~desktop_agent.engine.ports.Clock`), not from
APScheduler's: its jobs only say when to look. That is what makes the service testable
with a fake clock. Job times are translated from the clock's time to real time when they
are registered; when the clock moves forward relative to real time (a fake clock advanced
by a test, ``DESKTOP_AGENT_CLOCK_OFFSET``), the next sync registers them again, and a job
that fires before its time (the clock moved the other way) is registered again by itself.

A wake-up job only nudges the worker, which claims due runs from the database; the worker's
own database poll remains the safety net for anything the jobs miss.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.domain.scheduling import FireKind, FolderWatch, Schedule, StuckRun
from desktop_agent.engine.ports import Clock
from desktop_agent.scheduler import timing
from desktop_agent.scheduler.ports import SchedulerPort

log = logging.getLogger(__name__)

JOB_DEFAULTS = {"misfire_grace_time": None, "coalesce": True, "max_instances": 1}
"""Fire a job that fell due while nothing ran once, at start, instead of dropping it."""


@dataclass(frozen=True)
class SchedulerConfig:
    """Tunables of the scheduler service.

    Attributes:
        sync_s: how often schedule and watch definitions (changed by the GUI or CLI) and
            the clock are checked, and new or retried batch items started.
        housekeeping_s: how often batches and queued firings are pumped, stuck runs
            looked for and retention applied (batches are also pumped after each
            activation).
        stuck_after_s: a running run without journal progress for this long is flagged
            (None: never).
        retention_s: runs finished longer ago than this are archived and removed
            (None: never).
        retention_every_s: how often retention runs at most.
        max_wake_jobs: wake-up jobs kept at once (the earliest); the worker's poll
            covers the others.
        tolerance_s: clock movement, or job time difference, ignored by a sync.
        threads: threads that run jobs.
    """

    sync_s: float = 2.0
    housekeeping_s: float = 30.0
    stuck_after_s: float | None = 1800.0
    retention_s: float | None = None
    retention_every_s: float = 3600.0
    max_wake_jobs: int = 10_000
    tolerance_s: float = 1.0
    threads: int = 2


def _real(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


class SchedulerService:
    """Keeps APScheduler jobs in line with the database's durable times.

    Args:
        port: the database, as the scheduler sees it.
        clock: the worker's clock; decides what is due.
        nudge: wakes the worker so that it polls at once.
        config: tunables.
        on_stuck: called once for each run newly flagged as stuck.
    """

    def __init__(
        self,
        port: SchedulerPort,
        clock: Clock,
        *,
        nudge: Callable[[], None],
        config: SchedulerConfig | None = None,
        on_stuck: Callable[[StuckRun], None] | None = None,
    ) -> None:
        self.port = port
        self.clock = clock
        self.nudge = nudge
        self.config = config or SchedulerConfig()
        self.on_stuck = on_stuck
        self._sched: BackgroundScheduler | None = None
        self._lock = threading.RLock()
        self._jobs: dict[str, tuple[Hashable, float]] = {}
        self._offset = 0.0
        self._token: str | None = None
        self._busy = 0
        # APScheduler calls _on_event while holding its job-store lock, and our syncing
        # calls APScheduler while holding self._lock: the counter gets its own lock so that
        # the two never wait for each other (a deadlock seen at shutdown).
        self._busy_lock = threading.Lock()
        self._last_retention: float | None = None
        self._rounds_lock = threading.Lock()
        self.rounds: dict[str, int] = {"sync": 0, "housekeeping": 0, "scan": 0}
        """How many sync, housekeeping and folder-scan jobs have finished (failed ones too).

        Read-only: waiting for a count to move on shows that the service has looked at the
        database again since (a clock moved, a folder changed), where sleeping would not.
        """

    def _finished(self, kind: str) -> None:
        with self._rounds_lock:
            self.rounds[kind] += 1

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> SchedulerService:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the service has been started and not stopped."""
        return self._sched is not None

    def start(self) -> None:
        """Build every job from the database, then let APScheduler run them."""
        sched = BackgroundScheduler(
            jobstores={"default": MemoryJobStore()},
            executors={"default": ThreadPoolExecutor(self.config.threads)},
            job_defaults=JOB_DEFAULTS,
            timezone=UTC,
            daemon=True,
        )
        sched.add_listener(
            self._on_event,
            EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED,
        )
        sched.start(paused=True)
        self._sched = sched
        now = time.time()
        self._add(
            "housekeeping",
            self._housekeeping,
            IntervalTrigger(seconds=self.config.housekeeping_s, timezone=UTC),
            next_run=now,
        )
        self._add(
            "sync",
            self._sync,
            IntervalTrigger(seconds=self.config.sync_s, timezone=UTC),
            next_run=now + self.config.sync_s,
        )
        try:
            self.resync()
        except DesktopAgentError as exc:
            log.warning("scheduler: could not read the database at start (%s); will retry", exc)
        # Batch items and queued firings waiting for room start before the worker's first
        # poll (a worker that exits when idle would otherwise miss them).
        self._pump()
        sched.resume()
        log.info("scheduler started with %d jobs", len(sched.get_jobs()))

    def stop(self) -> None:
        """Stop firing jobs; waits for the ones running."""
        sched, self._sched = self._sched, None
        if sched is not None:
            sched.shutdown(wait=True)
        with self._lock:
            self._jobs.clear()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no job is due and none is running (tests; a start that must settle)."""
        deadline = time.monotonic() + timeout
        calm = 0
        while time.monotonic() < deadline:
            calm = calm + 1 if self._idle() else 0
            if calm >= 3:
                return True
            time.sleep(0.02)
        return False

    def _idle(self) -> bool:
        sched = self._sched
        if sched is None:
            return True
        now = datetime.now(UTC)
        due = any(
            job.next_run_time is not None and job.next_run_time <= now for job in sched.get_jobs()
        )
        with self._busy_lock:
            return not due and self._busy == 0

    def _on_event(self, event: JobEvent) -> None:
        with self._busy_lock:
            self._busy += 1 if event.code == EVENT_JOB_SUBMITTED else -1

    def job(self, job_id: str) -> Job | None:
        """The registered APScheduler job (for tests and diagnostics)."""
        return self._sched.get_job(job_id) if self._sched else None

    def job_ids(self) -> list[str]:
        """Ids of the registered jobs (for tests and diagnostics)."""
        sched = self._sched
        return sorted(job.id for job in sched.get_jobs()) if sched else []

    # ------------------------------------------------------------------ syncing

    def resync(self) -> None:
        """Rebuild the wake-up, schedule and watch jobs from the database."""
        if self._sched is None:
            return
        # The token first: a change made while the rest is read shows at the next sync.
        token = self.port.definitions_token()
        wakes = self.port.wake_times()
        schedules = self.port.schedules()
        watches = self.port.watches()
        with self._lock:
            self._offset = self.clock.now() - time.time()
            self._token = token
            self._sync_wakes(wakes)
            self._sync_definitions(schedules, watches)

    def run_changed(self, run_id: str) -> None:
        """An activation of ``run_id`` ended: set its wake-up again, start what waits for room."""
        if self._sched is None:
            return
        try:
            wake = self.port.wake_time(run_id)
            with self._lock:
                if wake is None:
                    self._drop(f"wake:{run_id}")
                else:
                    self._ensure_wake(run_id, wake)
            if self.port.pump(self.clock.now()):
                self.nudge()
        except DesktopAgentError as exc:
            log.warning("scheduler: after run %s: %s", run_id, exc)

    def _sync_wakes(self, wakes: Sequence[tuple[str, float]]) -> None:
        keep = sorted(wakes, key=lambda w: w[1])[: self.config.max_wake_jobs]
        wanted = {f"wake:{run_id}" for run_id, _ in keep}
        for job_id in [j for j in self._jobs if j.startswith("wake:") and j not in wanted]:
            self._drop(job_id)
        for run_id, wake in keep:
            self._ensure_wake(run_id, wake)

    def _ensure_wake(self, run_id: str, wake: float) -> None:
        self._ensure(
            f"wake:{run_id}", wake, lambda at: (self._on_wake, DateTrigger(_real(at)), [run_id])
        )

    def _sync_definitions(
        self, schedules: Sequence[Schedule], watches: Sequence[FolderWatch]
    ) -> None:
        wanted: set[str] = set()
        for schedule in schedules:
            if not schedule.paused:
                self._ensure_schedule(schedule)
                wanted.add(f"schedule:{schedule.id}")
        for watch in watches:
            if not watch.paused:
                self._ensure_watch(watch)
                wanted.add(f"watch:{watch.id}")
        stale = [j for j in self._jobs if j.startswith(("schedule:", "watch:")) and j not in wanted]
        for job_id in stale:
            self._drop(job_id)

    def _ensure_schedule(self, schedule: Schedule) -> None:
        job_id = f"schedule:{schedule.id}"
        try:
            due = timing.next_due(schedule)
            trigger = timing.trigger_for(schedule)
        except DesktopAgentError as exc:
            log.warning("scheduler: schedule %s cannot fire: %s", schedule.id, exc)
            self._drop(job_id)
            return
        if due is None:
            self._drop(job_id)
            return
        self._ensure(
            job_id,
            due,
            lambda _at: (self._on_schedule, trigger, [schedule.id]),
            signature=schedule.version,
        )

    def _ensure_watch(self, watch: FolderWatch) -> None:
        job_id = f"watch:{watch.id}"
        if job_id in self._jobs and self._jobs[job_id][0] == watch.version:
            return
        trigger = IntervalTrigger(seconds=max(0.1, watch.scan_s), timezone=UTC)
        # Scan at once: files that landed while no worker ran start their runs now.
        self._add(job_id, self._on_scan, trigger, args=[watch.id], next_run=time.time())
        self._jobs[job_id] = (watch.version, self.clock.now())

    def _ensure(
        self,
        job_id: str,
        at: float,
        make: Callable[[float], tuple[Callable[..., None], Any, list[str]]],
        signature: Hashable = None,
    ) -> None:
        """Register ``job_id`` for clock time ``at`` unless it already is, with this signature."""
        # Translate with the clock's offset now, not the last sync's: a job set again
        # because it fired before its time must land in the future.
        real = time.time() + (at - self.clock.now())
        old = self._jobs.get(job_id)
        if (
            old is not None
            and old[0] == signature
            and abs(old[1] - real) <= self.config.tolerance_s
        ):
            return
        func, trigger, args = make(real)
        self._add(job_id, func, trigger, args=args, next_run=real)
        self._jobs[job_id] = (signature, real)

    def _add(
        self,
        job_id: str,
        func: Callable[..., None],
        trigger: Any,
        *,
        args: Sequence[str] = (),
        next_run: float,
    ) -> None:
        if self._sched is None:
            return
        self._sched.add_job(
            func,
            trigger,
            args=list(args),
            id=job_id,
            name=job_id,
            replace_existing=True,
            next_run_time=_real(next_run),
            **JOB_DEFAULTS,
        )

    def _drop(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        if self._sched is not None:
            with contextlib.suppress(JobLookupError):
                self._sched.remove_job(job_id)

    # ------------------------------------------------------------------ jobs

    def _on_wake(self, run_id: str) -> None:
        with self._lock:
            self._jobs.pop(f"wake:{run_id}", None)
        self.nudge()
        with _logged(f"wake-up of run {run_id}"):
            wake = self.port.wake_time(run_id)
            if wake is not None and wake > self.clock.now():
                with self._lock:
                    self._ensure_wake(run_id, wake)

    def _on_schedule(self, schedule_id: str) -> None:
        with _logged(f"schedule {schedule_id}"):
            schedule = self._schedule(schedule_id)
            if schedule is None or schedule.paused:
                with self._lock:
                    self._drop(f"schedule:{schedule_id}")
                return
            now = self.clock.now()
            missed, fire_at = timing.due_firings(schedule, now)
            if fire_at is not None:
                result = self.port.fire_schedule(schedule, fire_at, missed, now)
                log.info("schedule %s: %s", schedule_id, result.message)
                if result.kind == FireKind.STARTED:
                    self.nudge()
            with self._lock:
                # APScheduler moved the job to its own next time: set ours again, from the
                # schedule as it is now. Read under the lock: read before it, a schedule
                # removed (or paused) meanwhile would be put back after the sync that
                # dropped it, and no later sync would see a change to drop it again.
                schedule = self._schedule(schedule_id)
                job_id = f"schedule:{schedule_id}"
                if schedule is None or schedule.paused:
                    # APScheduler keeps the job at its next time: remove it there too, or
                    # it stays registered with nothing tracking it.
                    self._drop(job_id)
                else:
                    self._jobs.pop(job_id, None)
                    self._ensure_schedule(schedule)

    def _schedule(self, schedule_id: str) -> Schedule | None:
        return next((s for s in self.port.schedules() if s.id == schedule_id), None)

    def _on_scan(self, watch_id: str) -> None:
        with _logged(f"folder watch {watch_id}"):
            if self.port.scan_watch(watch_id, self.clock.now()):
                self.nudge()
        self._finished("scan")

    def _housekeeping(self) -> None:
        now = self.clock.now()
        self._pump()
        if self.config.stuck_after_s is not None:
            with _logged("looking for stuck runs"):
                for stuck in self.port.flag_stuck(now, self.config.stuck_after_s):
                    log.warning("run %s: %s", stuck.run_id, stuck.message)
                    if self.on_stuck is not None:
                        self.on_stuck(stuck)
        retention = self.config.retention_s
        last = self._last_retention
        if retention is not None and (last is None or now - last >= self.config.retention_every_s):
            with _logged("archiving old runs"):
                archived = self.port.archive_finished(now - retention, now)
                if archived:
                    log.info("archived %d run(s) finished before the retention period", archived)
            self._last_retention = now
        self._finished("housekeeping")

    def _pump(self) -> None:
        with _logged("starting batch items and queued firings"):
            if self.port.pump(self.clock.now()):
                self.nudge()

    def _sync(self) -> None:
        with _logged("syncing with the database"):
            token = self.port.definitions_token()
            with self._lock:
                moved = (self.clock.now() - time.time()) - self._offset
                changed = token != self._token
            if changed or moved > self.config.tolerance_s:
                self.resync()
        # Retried batch items and new batches start within a sync, not a housekeeping round.
        self._pump()
        self._finished("sync")


@contextlib.contextmanager
def _logged(what: str) -> Any:
    """Log a job's failure in one line (a database hiccup), or with its traceback (a bug)."""
    try:
        yield
    except DesktopAgentError as exc:
        log.warning("scheduler: %s failed: %s", what, exc)
    except Exception:
        log.exception("scheduler: %s failed", what)
