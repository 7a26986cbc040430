"""One thread for the trailing saves of every streaming model call of the process.

A streaming call saves its partial answer at most once per interval
(:class:`~desktop_agent.engine.model_calls.PartialStreamer`); what streams inside the
interval is saved when it ends, even if nothing follows, by a *trailing save*. Those are
made here, by a single thread shared by all calls, so that the threads of a process stay
bounded by its runs whatever they stream: :data:`FLUSHER`.

The scheduler holds the due trailing saves in a heap of ``(due time, key)``, one entry per
key (per streamer) at most. Its thread is started on demand, when a save is scheduled and
none runs; it waits on a condition for the earliest due time (woken when an earlier one is
added, or when its entries are cancelled), calls that key's action, and ends by itself as
soon as nothing is pending, so an idle process holds no thread of it.

The one thread makes the due saves one after the other: a slow save (a database lock, a
slow disk) delays the trailing saves of other calls due meanwhile, never drops them.
:meth:`TrailingFlusher.cancel` waits for the action of its own key only, never for
another's under way.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

THREAD_NAME = "partial-flush"
"""The name of the flusher's thread (tests and diagnostics find it by this name)."""
ENDING_NAME = "partial-flush (ending)"
"""The name a flusher thread takes once it serves no more and only returns: a new one may
be started beside it before the system has let it finish."""


class TrailingFlusher:
    """A scheduler of trailing saves served by one thread, started on demand.

    Keys are compared by identity; each has one pending action at most. An action runs on
    the flusher's thread with no lock of the flusher held, so it may schedule its key
    again; whatever it raises is logged and dropped (an action keeps its own failures).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, object]] = []  # (due, order, key)
        self._actions: dict[object, Callable[[], None]] = {}  # the pending, by key
        self._order = itertools.count()  # ties of due times: first scheduled, first run
        self._running: object | None = None  # the key whose action runs now
        self._thread: threading.Thread | None = None  # the thread serving the heap
        self._ended: list[threading.Thread] = []  # threads done or told to end: joined later

    def schedule(self, key: object, delay: float, action: Callable[[], None]) -> bool:
        """Run ``action`` on the flusher's thread in ``delay`` seconds (monotonic time).

        If ``key`` has a pending action already, the earlier due time is kept with the
        new action. False if no thread could be started: nothing is scheduled then.
        """
        with self._cond:
            due = time.monotonic() + max(0.0, delay)
            for pending_due, _, pending in self._heap:
                if pending is key:
                    due = min(due, pending_due)
            self._remove(key)
            entry = (due, next(self._order), key)
            heapq.heappush(self._heap, entry)
            self._actions[key] = action
            if self._thread is None and not self._start():
                self._remove(key)
                return False
            if self._heap[0] is entry:
                self._cond.notify_all()  # an earlier due time than the thread waits for
            return True

    def cancel(self, key: object) -> None:
        """Drop ``key``'s pending action and wait for the one under way, if any.

        Waits for ``key``'s action only: never for another key's, however long that takes.
        When nothing is pending or running any more, the flusher's thread is ended and
        joined here, so that the caller leaves no thread behind.
        """
        me = threading.current_thread()
        with self._cond:
            self._remove(key)
            while self._running is key and self._thread is not me:
                self._cond.wait()
            if not self._heap and self._running is None and self._thread is not None:
                self._ended.append(self._thread)  # idle: it ends as soon as it wakes
                self._thread = None
                self._cond.notify_all()
            ended, self._ended = [t for t in self._ended if t is not me], []
        for thread in ended:  # each is done or returns at once: nothing of ours held
            thread.join()

    def pending(self) -> int:
        """How many actions wait for their due time."""
        with self._cond:
            return len(self._heap)

    def _remove(self, key: object) -> None:
        """Drop ``key``'s pending entry, if any (holding ``_cond``)."""
        if self._actions.pop(key, None) is not None:
            self._heap = [entry for entry in self._heap if entry[2] is not key]
            heapq.heapify(self._heap)

    def _start(self) -> bool:
        """Start the flusher's thread (holding ``_cond``); False if none can be had."""
        self._ended = [t for t in self._ended if t.is_alive()]
        thread = threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True)
        self._thread = thread
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had
            log.warning("no thread for trailing saves: %s", exc)
            self._thread = None
            return False
        return True

    def _serve(self) -> None:
        """The flusher's thread: run each action when due, until nothing is pending."""
        me = threading.current_thread()
        while (action := self._next(me)) is not None:
            try:
                action()
            except BaseException:  # an action keeps its own failures: this is a bug
                log.exception("a trailing save failed on the flusher's thread")
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _next(self, me: threading.Thread) -> Callable[[], None] | None:
        """Wait for the earliest due action and take it; None when the thread must end."""
        with self._cond:
            while self._thread is me:
                if not self._heap:
                    self._thread = None  # nothing pending: the thread ends
                    self._ended.append(me)
                    me.name = ENDING_NAME
                    return None
                due, _, key = self._heap[0]
                left = due - time.monotonic()
                if left <= 0:
                    heapq.heappop(self._heap)
                    self._running = key
                    return self._actions.pop(key)
                self._cond.wait(left)
            me.name = ENDING_NAME
            return None  # told to end by cancel


FLUSHER = TrailingFlusher()
"""The process's flusher of trailing saves."""
