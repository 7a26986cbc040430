"""What the scheduler needs from the rest of the worker, as a protocol.

The scheduler is an adapter like the others: it does not import ``persistence``. The worker
implements :class:`SchedulerPort` over the database and hands it in. Every method takes the
time from the caller (the worker's clock), and every method that changes something decides
again, inside one transaction, whether it still applies: a firing seen twice (two
workers, a retry, a restart) has its effect once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from desktop_agent.domain.scheduling import FireResult, FolderWatch, Schedule, StuckRun


class SchedulerPort(Protocol):
    """Reads and effects the scheduler's jobs rely on."""

    def wake_times(self) -> list[tuple[str, float]]:
        """(run id, wake time) of every waiting run that has one."""
        ...

    def wake_time(self, run_id: str) -> float | None:
        """The run's wake time if it waits with one, else None."""
        ...

    def schedules(self) -> list[Schedule]:
        """Every schedule, paused ones included."""
        ...

    def watches(self) -> list[FolderWatch]:
        """Every folder watch, paused ones included."""
        ...

    def definitions_token(self) -> str:
        """A cheap value that changes whenever a schedule or a watch changes."""
        ...

    def fire_schedule(
        self, schedule: Schedule, fire_at: float, missed: int, now: float
    ) -> FireResult:
        """Handle the firing due at ``fire_at`` (and ``missed - 1`` earlier ones) at once.

        Applies the schedule's overlap policy and records ``fire_at`` as handled, in one
        transaction, unless the schedule changed since it was read (then: stale).
        """
        ...

    def scan_watch(self, watch_id: str, now: float) -> list[str]:
        """Start a run for each file of the watched folder not seen before; their ids."""
        ...

    def pump(self, now: float) -> list[str]:
        """Start what waits for room: next batch items, queued schedule firings; run ids."""
        ...

    def flag_stuck(self, now: float, after_s: float) -> Sequence[StuckRun]:
        """Flag running runs without journal progress for ``after_s``; the newly flagged."""
        ...

    def archive_finished(self, before: float, now: float) -> int:
        """Archive and remove runs finished before ``before``; how many."""
        ...
