"""The poller's source for the scheduling views: what to read, off the GUI thread.

:class:`SchedulingSource` plugs into the window's
:class:`~desktop_agent.gui.poller.LivePoller` and passes each new
:class:`~desktop_agent.client.scheduling_views.SchedulingState` on to
:class:`~desktop_agent.gui.views.scheduling.SchedulingViews`.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from desktop_agent.client.scheduling_views import SchedulingTracker


class SchedulingSource(QObject):
    """The poller's source for the scheduling views (see :class:`~.poller.PollSource`).

    Args:
        tracker: reads the state when it changed.
        parent: owner.

    Signals:
        state_read: a new :class:`SchedulingState`.
    """

    state_read = Signal(object)

    def __init__(self, tracker: SchedulingTracker, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tracker = tracker
        self.batch_id: str | None = None
        self._wanted = 0
        self._loaded = 0

    def select_batch(self, batch_id: str | None) -> None:
        """Read this batch's items from the next poll on (None: none)."""
        self.batch_id = batch_id
        self._wanted += 1

    def prepare(self, force: bool) -> Callable[[], object]:
        """The read for one poll (on the GUI thread; the read runs in the pool)."""
        tracker, batch_id, wanted = self.tracker, self.batch_id, self._wanted
        due = wanted != self._loaded and batch_id is not None

        def read() -> object:
            state = tracker.poll(force=force, batch_id=batch_id, items_due=due)
            return None if state is None else (wanted, state)

        return read

    def deliver(self, result: object) -> None:
        """Pass a read state on (on the GUI thread)."""
        assert isinstance(result, tuple)
        wanted, state = result
        self._loaded = max(self._loaded, int(wanted))
        self.state_read.emit(state)
