"""Run blocking work (database reads, command writes, keyring calls) off the GUI thread.

A task is a plain function run on a private :class:`QThreadPool`; its result or error comes
back to the GUI thread through a queued signal, where the callbacks run. The function must
not touch any widget: it gets no Qt object and should return plain data.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from desktop_agent.domain.errors import DesktopAgentError

log = logging.getLogger(__name__)

Done = Callable[[Any], None]
Failed = Callable[[Exception], None]


class _Relay(QObject):
    """Carries every task's outcome to the GUI thread (one per runner, never one per task).

    A QObject per task, with closures connected to its signals, is a cycle through C++
    that Python's collector cannot see: each task then leaked its relay, its callbacks and
    whatever they held, thousands an hour while the window polls.

    Signals:
        settled: a task ended: ``(key, ok, result or exception)``.
    """

    settled = Signal(object)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], key: int, relay: _Relay) -> None:
        super().__init__()
        self.fn = fn
        self.key = key
        self.relay = relay
        self.setAutoDelete(True)

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:
            if not isinstance(exc, DesktopAgentError):
                log.exception("background task failed")
            self.relay.settled.emit((self.key, False, exc))
        else:
            self.relay.settled.emit((self.key, True, result))
        self.fn = _done  # drop the closure now; Qt deletes the runnable when it likes


def _done() -> None:
    """What a finished task's function is replaced with."""


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
        self._relay = _Relay(self)
        self._relay.settled.connect(self._on_relay_settled)
        self._pending: dict[int, tuple[Done | None, Failed | None]] = {}
        self._keys = itertools.count()
        self._closed = False

    def submit(
        self, fn: Callable[[], Any], on_done: Done | None = None, on_error: Failed | None = None
    ) -> None:
        """Run ``fn`` in the pool; then ``on_done(result)`` or ``on_error(exc)`` here."""
        if self._closed:
            return
        key = next(self._keys)
        self._pending[key] = (on_done, on_error)
        self._pool.start(_Task(fn, key, self._relay))

    @Slot(object)
    def _on_relay_settled(self, outcome: tuple[int, bool, Any]) -> None:
        key, ok, value = outcome
        callbacks = self._pending.pop(key, None)
        if callbacks is None or self._closed:
            return
        on_done, on_error = callbacks
        if ok:
            if on_done is not None:
                on_done(value)
        elif on_error is not None:
            on_error(value)
        else:
            self.task_failed.emit(value)

    @property
    def pending(self) -> int:
        """Tasks submitted whose callbacks have not run yet."""
        return len(self._pending)

    @property
    def busy(self) -> bool:
        """Whether tasks are queued or running."""
        return self._pool.activeThreadCount() > 0 or bool(self._pending)

    def wait(self, msecs: int = -1) -> bool:
        """Block until every task finished (tests and shutdown only)."""
        return self._pool.waitForDone(msecs)

    @Slot()
    def shutdown(self) -> None:
        """Drop queued tasks, wait for running ones, and stop calling back."""
        self._closed = True
        self._pool.clear()
        self._pool.waitForDone(10_000)
        self._pending.clear()
