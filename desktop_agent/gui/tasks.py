"""Run blocking work (database reads, command writes, keyring calls) off the GUI thread.

A task is a plain function run on a private thread pool; its result or error comes back to
the GUI thread through a queued signal, where the callbacks run. The function must not touch
any widget: it gets no Qt object and should return plain data.

The pool is Python's :class:`~concurrent.futures.ThreadPoolExecutor`, not a ``QThreadPool``
of ``QRunnable`` wrappers: a Python subclass of a Qt object per task keeps a wrapper that
Qt, not Python, decides when to free, and an app that polls every second for weeks must
leave nothing per task behind. The executor's threads also live as long as the runner, so
the process does not create and end a thread after every idle pause.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

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


def _run(fn: Callable[[], Any], key: int, relay: _Relay) -> None:
    """Run one task on a pool thread and hand its outcome to the GUI thread."""
    try:
        outcome = (key, True, fn())
    except Exception as exc:
        if not isinstance(exc, DesktopAgentError):
            log.exception("background task failed")
        outcome = (key, False, exc)
    try:
        relay.settled.emit(outcome)
    except RuntimeError:  # the window is gone: nobody is left to call back
        log.debug("task %d settled after its runner was deleted", key)


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
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, "gui-task")
        self._relay = _Relay(self)
        self._relay.settled.connect(self._on_relay_settled)
        self._pending: dict[int, tuple[Done | None, Failed | None, Future[None]]] = {}
        """Callbacks and future of each task until its outcome is delivered (GUI thread only)."""
        self._keys = itertools.count()
        self._closed = False

    def submit(
        self, fn: Callable[[], Any], on_done: Done | None = None, on_error: Failed | None = None
    ) -> None:
        """Run ``fn`` in the pool; then ``on_done(result)`` or ``on_error(exc)`` here."""
        if self._closed:
            return
        key = next(self._keys)
        # The outcome comes back through the event loop, so never before this returns.
        self._pending[key] = (on_done, on_error, self._pool.submit(_run, fn, key, self._relay))

    @Slot(object)
    def _on_relay_settled(self, outcome: tuple[int, bool, Any]) -> None:
        key, ok, value = outcome
        callbacks = self._pending.pop(key, None)
        if callbacks is None or self._closed:
            return
        on_done, on_error, _ = callbacks
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
        """Whether tasks are queued or running (a task is pending until it is delivered)."""
        return bool(self._pending)

    def wait(self, msecs: int = -1) -> bool:
        """Block until every task finished (tests and shutdown only); False on timeout."""
        # A task cancelled in the queue (shutdown) never runs: concurrent.futures.wait would
        # count it as not done until the timeout (it only counts a cancelled future that a
        # pool thread has seen), which held every close with queued reads for 10 s.
        futures = [f for _, _, f in self._pending.values() if not f.cancelled()]
        timeout = None if msecs < 0 else msecs / 1000
        _, left = concurrent.futures.wait(futures, timeout)
        return not left

    @Slot()
    def shutdown(self) -> None:
        """Drop queued tasks, wait for running ones, and stop calling back."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.wait(10_000)
        self._pending.clear()
