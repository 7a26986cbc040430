"""Thousands of background tasks leave nothing behind: objects, threads, descriptors, None.

Every poll of the window is a task; an app left open for weeks runs millions. A relay
QObject per task with closures connected to it once leaked every one of them (a cycle
through C++ that Python's collector cannot see).
"""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter

import psutil
from pytestqt.qtbot import QtBot

from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.gui.tasks import TaskRunner

TASKS = 5000


def _census() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def test_thousands_of_tasks_leave_nothing_behind(qtbot: QtBot) -> None:
    runner = TaskRunner()
    results: list[int] = []
    failures: list[Exception] = []

    def batch(n: int) -> None:
        for i in range(n):
            if i % 10 == 0:
                runner.submit(_fail, results.append, failures.append)
            else:
                runner.submit(lambda i=i: i, results.append, failures.append)  # type: ignore[misc]
        qtbot.waitUntil(lambda: not runner.busy, timeout=60_000)

    try:
        batch(500)  # warm up: the pool's threads exist, caches are filled
        me = psutil.Process()
        before = _census()
        threads, fds, nones = threading.active_count(), me.num_fds(), sys.getrefcount(None)
        results.clear()
        failures.clear()
        batch(TASKS)
        assert len(results) + len(failures) == TASKS and len(failures) == TASKS // 10
        results.clear()
        failures.clear()
        grown = _census() - before
        # A leak per task shows as thousands of one type; a few dozen weakrefs are noise.
        assert max(grown.values(), default=0) < TASKS // 20, grown.most_common(5)
        assert threading.active_count() <= threads
        assert me.num_fds() <= fds + 2
        assert sys.getrefcount(None) >= nones - 200
        assert runner.pending == 0
    finally:
        runner.shutdown()


def _fail() -> int:
    # One of ours: not logged (a logged traceback would hold the task's frame, rightly).
    raise DesktopAgentError("a task that fails")


def test_tasks_cancelled_in_the_queue_do_not_hold_a_shutdown(qtbot: QtBot) -> None:
    """Closing with reads still queued: those never run, and waiting for them never ends.

    ``concurrent.futures.wait`` counts a future cancelled in the queue as not done (only one
    a pool thread has seen counts), so the window's shutdown waited its whole 10 s timeout.
    """
    runner = TaskRunner(threads=1)
    release = threading.Event()
    ran: list[str] = []

    def blocker() -> None:
        release.wait(30)
        ran.append("blocker")

    runner.submit(blocker)
    for i in range(3):
        runner.submit(lambda i=i: ran.append(f"queued {i}"))  # type: ignore[misc]
    runner._pool.shutdown(wait=False, cancel_futures=True)  # as shutdown() does first
    release.set()
    running = next(f for _, _, f in runner._pending.values() if not f.cancelled())
    running.result(30)
    assert runner.wait(0)  # nothing left that could still run
    assert ran == ["blocker"]
    runner.shutdown()
