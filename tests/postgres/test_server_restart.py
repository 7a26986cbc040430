"""A worker's store keeps writing across a restart of the PostgreSQL server.

The pool hands out connections without a round trip of its own (no ``pool_pre_ping``):
a connection the server ended is seen on its socket when taken from the pool, discarded,
and replaced by a new one (``persistence/db.py``). These tests restart a server of their
own (never the one the other tests share) between two journal commits of the same store,
and check that the second one goes through and that nothing is lost or written twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from desktop_agent.domain import Lease, RunStatus, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, Snapshot, StepOutcome
from desktop_agent.persistence import db as db_module
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.store import SqlStore
from tests.helpers import postgres
from tests.store.runs import claimed, intent, new_run

pytestmark = pytest.mark.skipif(postgres.unavailable() is not None, reason="no PostgreSQL")


@pytest.fixture
def server() -> Iterator[postgres.PgServer]:
    """A server of this test's own, which it may stop and start."""
    own = postgres.start_server()
    try:
        yield own
    finally:
        own.close()


def _step(store: SqlStore, seq: int, lease: Lease) -> None:
    """The outcome of step ``seq`` (costing 0.5) and the intent of the next, fenced."""
    store.commit(
        "run-1",
        outcome=StepOutcome(
            seq, StepStatus.COMPLETED, {"n": seq}, usage=Usage(10, 1), cost_usd=0.5
        ),
        intents=[intent(seq + 1)],
        patch=RunPatch(add_active_seconds=1.0),
        snapshot=Snapshot(seq=seq, state={"seq": seq}),
        lease=lease,
    )


def _running(store: SqlStore) -> Lease:
    """Run ``run-1``, claimed by ``worker-a``, its first intent written: its lease."""
    new_run(store)
    lease = claimed(store, "run-1", "worker-a")
    store.commit("run-1", intents=[intent(1)], patch=RunPatch(status=RunStatus.RUNNING))
    return lease


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_commit_after_a_server_restart_reconnects_and_writes_once(
    server: postgres.PgServer, mode: str
) -> None:
    db = Database(DbSettings(server.url(server.create_database())))
    try:
        store = SqlStore(db)
        lease = _running(store)
        _step(store, 1, lease)

        server.stop(mode)  # "immediate" is a crash: the server recovers from its WAL
        server.start()

        _step(store, 2, lease)  # no error: the dead connection is replaced quietly
        _step(store, 3, lease)

        steps = store.load_steps("run-1")
        assert [s.seq for s in steps] == [1, 2, 3, 4]
        assert [s.status for s in steps] == [StepStatus.COMPLETED] * 3 + [StepStatus.STARTED]
        run = store.get_run("run-1")
        assert run.last_seq == 4
        assert run.cost_usd == pytest.approx(1.5)  # three outcomes, each counted once
        assert run.active_seconds == pytest.approx(3.0)
        snapshot = store.load_snapshot("run-1")
        assert snapshot is not None and snapshot.seq == 3
    finally:
        db.dispose()


def test_a_connection_idle_for_long_is_pinged_and_replaced_when_dead(
    server: postgres.PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the socket cannot tell is left to a ping, for connections idle for long."""
    monkeypatch.setattr(db_module, "PING_AFTER_IDLE_S", 0.0)
    db = Database(DbSettings(server.url(server.create_database())))
    try:
        store = SqlStore(db)
        lease = _running(store)
        _step(store, 1, lease)  # pinged at every checkout now: still one step each
        server.stop("fast")
        server.start()
        _step(store, 2, lease)
        assert [s.seq for s in store.load_steps("run-1")] == [1, 2, 3]
        assert store.get_run("run-1").cost_usd == pytest.approx(1.0)
    finally:
        db.dispose()
