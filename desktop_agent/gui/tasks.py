"""Run blocking work (database reads, command writes, keyring calls) off the GUI thread.

A task is a plain function run on a private :class:`QThreadPool`; its result or error comes
back to the GUI thread through a queued signal, where the callbacks run. The function must
not touch any widget: it gets no Qt object and should return plain data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from desktop_agent.domain.errors import DesktopAgentError

log = logging.getLogger(__name__)

Done = Callable[[Any], None]
Failed = Callable[[Exception], None]


class _Relay(QObject):
    """Carries a task's outcome to the GUI thread.

    Signals:
        finished: the task returned (its result).
        failed: the task raised (the exception).
    """

    finished = Signal(object)
    failed = Signal(object)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self.fn = fn
        self.relay = relay
        self.setAutoDelete(True)

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:
            if not isinstance(exc, DesktopAgentError):
                log.exception("background task failed")
            self.relay.failed.emit(exc)
        else:
            self.relay.finished.emit(result)


class TaskRunner(QObject):
    """A small thread pool whose callbacks run on the GUI thread.

    Args:
        threads: worker threads; reads are short, so two are enough and keep the
            database (and the GIL) from being flooded.
        parent: owner of the runner.

    Signals:
        task_failed: a task without its own error callback raised (the exception).
    """

    task_failed = Signal(object)

    def __init__(self, threads: int = 2, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(threads)
        self._pool.setExpiryTimeout(5000)
        self._relays: set[_Relay] = set()
        self._closed = False

    def submit(
        self, fn: Callable[[], Any], on_done: Done | None = None, on_error: Failed | None = None
    ) -> None:
        """Run ``fn`` in the pool; then ``on_done(result)`` or ``on_error(exc)`` here."""
        if self._closed:
            return
        relay = _Relay()
        self._relays.add(relay)

        def finished(result: Any) -> None:
            self._relays.discard(relay)
            if on_done is not None and not self._closed:
                on_done(result)

        def failed(exc: Exception) -> None:
            self._relays.discard(relay)
            if self._closed:
                return
            if on_error is not None:
                on_error(exc)
            else:
                self.task_failed.emit(exc)

        relay.finished.connect(finished)
        relay.failed.connect(failed)
        self._pool.start(_Task(fn, relay))

    @property
    def busy(self) -> bool:
        """Whether tasks are queued or running."""
        return self._pool.activeThreadCount() > 0 or bool(self._relays)

    def wait(self, msecs: int = -1) -> bool:
        """Block until every task finished (tests and shutdown only)."""
        return self._pool.waitForDone(msecs)

    @Slot()
    def shutdown(self) -> None:
        """Drop queued tasks, wait for running ones, and stop calling back."""
        self._closed = True
        self._pool.clear()
        self._pool.waitForDone(10_000)
        self._relays.clear()
