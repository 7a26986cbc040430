"""One way for the suite to wait: poll a condition until it holds, or fail saying what.

Tests must pass on a loaded machine, so nothing here measures how long something took:
the timeout only bounds a wait for something that must happen, and it is generous. To show
that something did *not* happen, wait for a positive event that comes after it (a worker
gone idle, a scan counter that moved, a later step recorded), never for a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
"""Long enough for a busy two-core machine; only a failing test ever waits this long."""


def wait_until(
    predicate: Callable[[], object],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
    *,
    poll: float = 0.02,
) -> None:
    """Poll ``predicate`` until it returns something true; fail after ``timeout`` seconds.

    Args:
        predicate: called repeatedly; an exception from it propagates at once.
        timeout: how long to keep trying before failing the test.
        what: said in the failure ("run 12 completed").
        poll: the pause between two tries.

    Raises:
        AssertionError: the condition did not hold within ``timeout``.
    """
    wait_for(predicate, timeout, what, poll=poll)


def wait_for(
    produce: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
    *,
    poll: float = 0.02,
) -> T:
    """Poll ``produce`` until it returns something true, and return that value.

    Raises:
        AssertionError: nothing true came within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = produce()
        if value:
            return value
        if time.monotonic() > deadline:
            name = what or getattr(produce, "__name__", repr(produce))
            raise AssertionError(f"timed out after {timeout:g} s waiting for {name}")
        time.sleep(poll)
