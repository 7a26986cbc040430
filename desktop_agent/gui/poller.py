"""Live updates: poll the store's change token a few times a second, off the GUI thread.

One poll at a time: a tick that comes while a poll runs only marks that another is wanted.
A poll reads the change token; only when it moved are the changed runs, the pending
approvals and the selected run's new steps read. Results come back as signals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from desktop_agent.client.annotations import step_notes
from desktop_agent.client.api import Client
from desktop_agent.client.views import RunsDelta, RunsTracker, StepEntry, timeline_entries
from desktop_agent.domain import RunEvent
from desktop_agent.domain.tags import StepNote
from desktop_agent.gui.tasks import TaskRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepsBatch:
    """Steps read for the selected run.

    Attributes:
        run_id: the run.
        generation: selection counter when the read was asked for (stale batches are dropped).
        from_seq: first step read.
        entries: steps ``from_seq`` onwards.
        events: every event of the run (what happened outside its journal).
        notes: every note the analyst wrote on the run's steps.
    """

    run_id: str
    generation: int
    from_seq: int
    entries: tuple[StepEntry, ...]
    events: tuple[RunEvent, ...] = ()
    notes: tuple[StepNote, ...] = ()


class PollSource(Protocol):
    """More data read with every poll, for another view (e.g. schedules and batches)."""

    def prepare(self, force: bool) -> Callable[[], object]:
        """On the GUI thread: the read to run in the pool; it returns None for "no change"."""
        ...

    def deliver(self, result: object) -> None:
        """On the GUI thread: what the read returned (never None)."""
        ...


@dataclass(frozen=True)
class _PollResult:
    delta: RunsDelta | None
    steps: StepsBatch | None
    extras: tuple[tuple[PollSource, object], ...] = ()


class LivePoller(QObject):
    """Delivers what changed in the database to the GUI thread.

    Args:
        client: the client to read through.
        tasks: where reads run.
        resume_seq: gives the first step to read again for the selected run.
        interval_ms: poll period while the window is visible.
        hidden_interval_ms: poll period while hidden (tray notifications still need it).
        parent: owner.

    Signals:
        runs_changed: runs or approvals changed (a :class:`RunsDelta`).
        steps_loaded: steps of the selected run were read (a :class:`StepsBatch`).
        poll_failed: a poll raised (the message); polling goes on.
    """

    runs_changed = Signal(object)
    steps_loaded = Signal(object)
    poll_failed = Signal(str)

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        resume_seq: Callable[[], int],
        *,
        interval_ms: int = 250,
        hidden_interval_ms: int = 2000,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.client = client
        self.tasks = tasks
        self.tracker = RunsTracker(client)
        self._resume_seq = resume_seq
        self._interval = interval_ms
        self._hidden_interval = hidden_interval_ms
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._selected: str | None = None
        self._generation = 0
        self._in_flight = False
        self._again = False
        self._force = True
        self._steps_due = False
        self._sources: list[PollSource] = []
        self.polls = 0

    @property
    def selected(self) -> str | None:
        """The run whose steps are followed."""
        return self._selected

    @property
    def busy(self) -> bool:
        """Whether a poll is being read now."""
        return self._in_flight

    @property
    def generation(self) -> int:
        """Counter of selection changes."""
        return self._generation

    def add_source(self, source: PollSource) -> None:
        """Read ``source`` with every poll from now on (forced polls force it too)."""
        self._sources.append(source)

    def start(self) -> None:
        """Start polling (the first poll happens at once)."""
        self._timer.start()
        self.refresh()

    def stop(self) -> None:
        """Stop polling."""
        self._timer.stop()

    def set_visible(self, visible: bool) -> None:
        """Poll often while the window is visible, rarely while it is hidden."""
        self._timer.setInterval(self._interval if visible else self._hidden_interval)

    def select_run(self, run_id: str | None) -> None:
        """Follow the steps of ``run_id`` (None: no run)."""
        self._selected = run_id
        self._generation += 1
        self._steps_due = run_id is not None
        self.refresh()

    def reload_all(self) -> None:
        """Read every run anew at the next poll (now), not only those updated since the last.

        For a run that came back with its old times (unarchived): an incremental read
        would never see it.
        """
        self.tracker = RunsTracker(self.client)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Poll now, whether the change token moved or not."""
        self._force = True
        self._poll()

    @Slot()
    def _on_timer_timeout(self) -> None:
        self._poll()

    def _poll(self) -> None:
        if self._in_flight:
            self._again = True
            return
        self._in_flight = True
        self._again = False
        force, self._force = self._force, False
        run_id, generation = self._selected, self._generation
        steps_due, self._steps_due = self._steps_due, False
        from_seq = self._resume_seq() if run_id is not None else 1
        client, tracker = self.client, self.tracker
        reads = [(source, source.prepare(force)) for source in self._sources]

        def job() -> _PollResult:
            delta = tracker.poll(force=force)
            batch = None
            touched = delta is not None and any(r.run.id == run_id for r in delta.rows)
            if run_id is not None and (steps_due or touched):
                entries = tuple(timeline_entries(client, run_id, from_seq))
                events = tuple(client.events(run_id))
                notes = tuple(step_notes(client, run_id))  # a note moves the run: touched
                batch = StepsBatch(run_id, generation, from_seq, entries, events, notes)
            extras = tuple((source, read()) for source, read in reads)
            return _PollResult(delta, batch, extras)

        self.tasks.submit(job, self._on_job_done, self._on_job_failed)

    def _on_job_done(self, result: _PollResult) -> None:
        self._in_flight = False
        self.polls += 1
        if result.delta is not None:
            self.runs_changed.emit(result.delta)
        batch = result.steps
        if batch is not None:
            if batch.generation == self._generation:
                self.steps_loaded.emit(batch)
            else:
                self._steps_due = self._selected is not None
                self._again = True
        for source, value in result.extras:
            if value is not None:
                source.deliver(value)
        if self._again:
            self._poll()

    def _on_job_failed(self, exc: Exception) -> None:
        self._in_flight = False
        log.warning("poll failed: %s", exc)
        self.poll_failed.emit(str(exc))
        self._steps_due = self._selected is not None
