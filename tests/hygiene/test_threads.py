"""A test that leaves a thread running fails; one that stops its threads passes."""

from __future__ import annotations

import threading

from tests.hygiene.conftest import RunInner

RELEASE = threading.Event()
"""What the inner run's leaked thread waits for: set afterwards, so it ends with this test."""

LEAKS = """
import threading

from tests.hygiene.test_threads import RELEASE


def test_leaves_a_thread_running():
    thread = threading.Thread(target=RELEASE.wait, args=(60,), name="leaky-waiter")
    thread.start()
"""

CLEAN = """
import threading


def test_stops_its_thread_without_joining_it():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="tidy-waiter")
    thread.start()
    stop.set()  # the check joins it: finishing after the test, within the grace, is fine


def test_joins_its_thread():
    thread = threading.Thread(target=lambda: None, name="joined")
    thread.start()
    thread.join()
"""


def test_a_thread_left_running_fails_the_test_and_is_named(run_inner: RunInner) -> None:
    try:
        result = run_inner(LEAKS)
    finally:
        RELEASE.set()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_thread_running*",
            "*the test left threads running 5 s after it ended:*",
            "*thread 'leaky-waiter' (target threading.Event.wait, daemon=False)*",
        ]
    )


def test_threads_that_finish_are_not_leaks(run_inner: RunInner) -> None:
    run_inner(CLEAN).assert_outcomes(passed=2)


def test_an_exception_in_a_thread_fails_the_test_that_started_it(run_inner: RunInner) -> None:
    result = run_inner(
        """
import threading


def test_thread_raises():
    thread = threading.Thread(target=lambda: 1 / 0, name="doomed")
    thread.start()
    thread.join()
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*ZeroDivisionError: division by zero*", "*Exception in thread doomed*"]
    )
