"""One way for the suite to wait: poll a condition until it holds, or fail saying what.

Tests must pass on a loaded machine, so nothing here measures how long something took:
the timeout only bounds a wait for something that must happen, and it is generous. To show
that something did *not* happen, wait for a positive event that comes after it (a worker
gone idle, a scan counter that moved, a later step recorded), never for a fixed time.

Every wait of the suite goes through :func:`wait_for` (``tests/unit/test_one_way_to_wait.py``
keeps test modules from growing polling loops of their own). Besides the two general
waits, the waits several modules share live here: a run reaching a status
(:func:`wait_status`), a worker serving the database (:func:`wait_worker`), a run's lease
run out (:func:`wait_lease_expired`), and the general wait serving Qt events between tries
(:func:`qt_wait_until`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from desktop_agent.client.api import WorkerStatus
    from desktop_agent.domain import Run, RunStatus, WorkerInfo

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
"""Long enough for a busy two-core machine; only a failing test ever waits this long."""


def wait_until(
    predicate: Callable[[], object],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
    *,
    poll: float = 0.02,
    last: Callable[[], object] | None = None,
    pause: Callable[[float], object] = time.sleep,
) -> None:
    """Poll ``predicate`` until it returns something true; fail after ``timeout`` seconds.

    Args:
        predicate: called repeatedly; an exception from it propagates at once.
        timeout: how long to keep trying before failing the test.
        what: said in the failure ("run 12 completed").
        poll: the pause between two tries.
        last: called once on failure: the state last seen, said in the failure (without
            it the failure shows the predicate's last answer).
        pause: how to spend ``poll`` seconds between two tries (see :func:`qt_wait_until`).

    Raises:
        AssertionError: the condition did not hold within ``timeout``.
    """
    wait_for(predicate, timeout, what, poll=poll, last=last, pause=pause)


def wait_for(
    produce: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
    *,
    poll: float = 0.02,
    last: Callable[[], object] | None = None,
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Poll ``produce`` until it returns something true, and return that value.

    The arguments are those of :func:`wait_until`.

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
            seen = last() if last is not None else repr(value)
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {name}; last seen: {seen}"
            )
        pause(poll)


class EventLoop(Protocol):
    """What :func:`qt_wait_until` needs of pytest-qt's ``qtbot``."""

    def wait(self, ms: int) -> None:
        """Serve Qt events for ``ms`` milliseconds."""


def qt_wait_until(
    qtbot: EventLoop,
    predicate: Callable[[], object],
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
    *,
    last: Callable[[], object] | None = None,
) -> None:
    """:func:`wait_until` for what the GUI's event loop makes true: serves Qt events between tries.

    A plain sleep would block the very events (a background task's result, a poll's
    timer) the condition waits for.
    """
    wait_until(
        predicate, timeout, what, poll=0.02, last=last, pause=lambda s: qtbot.wait(round(s * 1000))
    )


class RunSource(Protocol):
    """Anything that reads a run by id: a :class:`~desktop_agent.client.api.Client`, a lab."""

    def run(self, run_id: str) -> Run:
        """The run as stored now."""
        ...


def describe_run(run: Run | None) -> str:
    """A run's state in one line, for failure messages."""
    if run is None:
        return "nothing read yet"
    said = f"status {run.status}"
    if run.wait_reason is not None:
        said += f" ({run.wait_reason})"
    if run.lease_owner is not None:
        said += f", lease of {run.lease_owner} until {run.lease_expires_at}"
    if run.status_message:
        said += f": {run.status_message}"
    return said


def wait_status(
    runs: RunSource,
    run_id: str,
    *statuses: RunStatus,
    timeout: float = DEFAULT_TIMEOUT_S,
    what: str = "",
) -> Run:
    """Wait until run ``run_id`` is in one of ``statuses``; return the run as then read.

    Raises:
        AssertionError: it was not within ``timeout`` (the failure says its last state).
    """
    assert statuses, "wait for at least one status"
    seen: list[Run] = []

    def reached() -> Run | None:
        run = runs.run(run_id)
        seen[:] = [run]
        return run if run.status in statuses else None

    wanted = " or ".join(str(s) for s in statuses)
    return wait_for(
        reached,
        timeout,
        what or f"run {run_id} to be {wanted}",
        last=lambda: describe_run(seen[0] if seen else None),
    )


def wait_lease_expired(runs: RunSource, run_id: str, timeout: float = DEFAULT_TIMEOUT_S) -> Run:
    """Wait until the lease on run ``run_id`` has run out (a frozen or killed holder's).

    Returns the run as then read: still leased, but to nobody any more.
    """
    seen: list[Run] = []

    def expired() -> Run | None:
        run = runs.run(run_id)
        seen[:] = [run]
        gone = run.lease_expires_at is not None and run.lease_expires_at < time.time()
        return run if gone else None

    return wait_for(
        expired,
        timeout,
        f"the lease on run {run_id} to expire",
        last=lambda: describe_run(seen[0] if seen else None),
    )


class WorkerSource(Protocol):
    """Anything that says whether a worker serves the database: a client."""

    def worker_status(self) -> WorkerStatus:
        """The newest live worker, else the last one seen."""
        ...


def wait_worker(
    client: WorkerSource,
    pid: int | None = None,
    *,
    proc: subprocess.Popen[bytes] | None = None,
    log: Callable[[], str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> WorkerInfo:
    """Wait until a live worker serves the database (registered, heartbeat fresh).

    Args:
        client: where to look.
        pid: the worker's process id (any live worker if None; ``proc``'s if given).
        proc: a worker child: the wait fails at once should it exit first.
        log: the worker's log, said in the failure.
        timeout: how long to keep trying.

    Returns:
        The worker as registered (it has started its scheduler by then).
    """
    wanted = proc.pid if pid is None and proc is not None else pid
    seen: list[WorkerStatus] = []

    def registered() -> WorkerInfo | None:
        if proc is not None and proc.poll() is not None:
            said = log() if log is not None else ""
            raise AssertionError(f"worker {proc.pid} exited ({proc.returncode}) first:\n{said}")
        status = client.worker_status()
        seen[:] = [status]
        info = status.worker
        if status.alive and info is not None and wanted in (None, info.pid):
            return info
        return None

    def last() -> str:
        said = seen[0].describe() if seen else "nothing read yet"
        return f"{said}\n{log()}" if log is not None else said

    name = f"worker {wanted}" if wanted is not None else "a worker"
    return wait_for(registered, timeout, f"{name} to serve the database", last=last)
