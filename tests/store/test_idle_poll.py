"""An idle worker's poll does not grow with the runs that wait.

A worker polls for runs to claim five times a second. With thousands of runs hibernated
at their approvals, the poll used to read every one of them (a scan of ``runs`` with a
subquery per row, in a write transaction): 8% of a core doing nothing at 10,000 runs.
Measured here without a clock: SQLite's virtual-machine steps (its progress handler,
called at every instruction) and the statements a poll sends, with 1,000 runs waiting
against 10. ``bench/idle_worker.py`` has the CPU figures.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, update

from desktop_agent.domain import CommandKind, RunStatus, WaitReason
from desktop_agent.engine.ports import CancelToken
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.tables import runs
from desktop_agent.worker.lease import RunLease
from desktop_agent.worker.quiet import ChangeProbe, ClaimGate
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import FakeClock
from tests.store.runs import LEASE_S, T0, new_run


def _hibernated_at_approvals(store: SqlStore, count: int, first: int = 0) -> list[str]:
    """``count`` runs hibernated at their approvals (no wake time, no lease)."""
    ids = [f"run-{i:05d}" for i in range(first, first + count)]
    for run_id in ids:
        new_run(store, run_id)
    with store.db.write() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.id.in_(ids))
            .values(status=str(RunStatus.WAITING), wait_reason=str(WaitReason.APPROVAL))
        )
    return ids


@contextmanager
def _counted(store: SqlStore) -> Iterator[dict[str, Any]]:
    """Count the statements sent and (SQLite) the virtual-machine steps they took."""
    seen: dict[str, Any] = {"statements": [], "steps": 0}
    handled: dict[int, Any] = {}

    def step() -> int:
        seen["steps"] += 1
        return 0

    def before(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen["statements"].append(statement.split(None, 1)[0].upper())
        raw: Any = conn.connection.dbapi_connection
        if isinstance(raw, sqlite3.Connection) and id(raw) not in handled:
            raw.set_progress_handler(step, 1)
            handled[id(raw)] = raw

    engines = {id(e): e for e in (store.db.reader, store.db.writer)}.values()
    for engine in engines:
        event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", before)
        for raw in handled.values():
            raw.set_progress_handler(None, 1)


def _poll(store: SqlStore) -> Callable[[], list[Any]]:
    return lambda: store.claim_runnable(
        "worker-a", T0 + 5, LEASE_S, limit=8, host="this-host", pools=("gpu",)
    )


def test_a_poll_with_nothing_to_claim_reads_no_more_with_1000_runs_waiting_than_10(
    store: SqlStore,
) -> None:
    if not store.db.is_sqlite:
        pytest.skip("virtual-machine steps are SQLite's")
    _hibernated_at_approvals(store, 10)
    poll = _poll(store)
    poll()  # connections opened, statements compiled
    with _counted(store) as few:
        assert poll() == []
    _hibernated_at_approvals(store, 990, first=10)
    poll()
    with _counted(store) as many:
        assert poll() == []
    # One statement, a read: no write transaction is opened to find nothing.
    assert few["statements"] == many["statements"]
    assert "UPDATE" not in many["statements"] and many["statements"].count("SELECT") == 1
    # Reading all 1,000 runs takes tens of thousands of steps; the poll takes the same
    # few hundred either way.
    assert many["steps"] <= few["steps"] * 1.2 + 50, (few["steps"], many["steps"])


def test_runs_with_work_are_still_found_among_the_waiting(store: SqlStore) -> None:
    waiting = _hibernated_at_approvals(store, 200)
    new_run(store, "queued", created_at=T0 + 1)
    store.add_command(waiting[7], CommandKind.APPROVE, {"approval": "a", "reason": ""})
    store.add_command(waiting[9], CommandKind.STEER, {"text": "a note waits"})
    with store.db.write() as conn:  # a wake time that came, and one still ahead
        conn.execute(update(runs).where(runs.c.id == waiting[11]).values(wake_at=T0 + 2))
        conn.execute(update(runs).where(runs.c.id == waiting[12]).values(wake_at=T0 + 60))
    claimed = {run_id for run_id, _ in _poll(store)()}
    assert claimed == {"queued", waiting[7], waiting[11]}
    assert store.next_due(T0 + 5) == pytest.approx(T0 + 5 + LEASE_S)  # the claims' leases
    for run_id in claimed:
        store.release_run(run_id, "worker-a")
    assert store.next_due(T0 + 5) == pytest.approx(T0 + 60)


class _Idle:
    """An engine that does nothing with the runs it is given (only claims are looked at)."""

    def execute(self, run_id: str, token: CancelToken, lease: RunLease) -> None:
        pass


def test_an_idle_worker_sends_no_claim_until_the_database_changes_or_a_wake_time_comes(
    store: SqlStore,
) -> None:
    path = store.db.settings.sqlite_path
    if path is None:
        pytest.skip("the change probe reads a SQLite file")
    waiting = _hibernated_at_approvals(store, 1000)
    clock = FakeClock()
    worker = Worker(store, _Idle(), WorkerConfig(poll_s=0.01), clock=clock)  # type: ignore[arg-type]
    worker.gate = ClaimGate(ChangeProbe.open(path), recheck_s=3600.0)
    try:
        with store.db.write() as conn:
            conn.execute(update(runs).where(runs.c.id == waiting[3]).values(wake_at=T0 + 50))
        worker.tick()  # finds nothing, learns the next wake time
        with _counted(store) as quiet:
            for _ in range(5):
                worker.tick()
        assert quiet["statements"] == []  # not one statement: nothing could have changed
        assert worker.gate.skipped == 5
        assert not worker._in_flight

        # A decision is written (by any connection but the probe's): the next poll claims.
        store.add_command(waiting[5], CommandKind.APPROVE, {"approval": "a", "reason": ""})
        worker.tick()
        assert set(worker._in_flight) == {waiting[5]}
        _finish(worker)

        # The wake time comes: claimed with no change in the database.
        clock.advance(50)
        worker.tick()
        assert waiting[3] in worker._in_flight
        _finish(worker)
    finally:
        worker.stop()
        worker._pool.shutdown(wait=True)
        worker.gate.close()


def _finish(worker: Worker) -> None:
    """Let the worker's activations end and be reaped (leases released)."""
    for fut, _token, _lease in list(worker._in_flight.values()):
        fut.result(timeout=30)
    worker._reap()
