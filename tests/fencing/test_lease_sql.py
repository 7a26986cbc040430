"""The fence in SQL: claims take growing epochs; writes and renewals hold only at the epoch.

Two workers, A and B, take turns on one run of a real SQLite database: A claims, its lease
runs out (the clock is given explicitly), B claims. Everything A then writes or renews
with its old claim must fail and change nothing; B's claim stays as it was.
"""

from __future__ import annotations

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import (
    Lease,
    RunEventKind,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.errors import LeaseLost
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.persistence.store import SqlStore
from desktop_agent.worker.lease import RunLease
from tests.helpers.fakes import FakeClock

T0 = 1_800_000_000.0
LEASE = 30.0


def _taken_over(client: Client) -> tuple[str, Lease, Lease]:
    """A run that A claimed, with A's intent for step 1, then B claimed after A's expiry."""
    store = client.store
    run_id = client.start_run("fenced", model="demo").id
    a = store.claim_run(run_id, "worker-a", T0, LEASE)
    assert a == Lease("worker-a", 1)
    intent = StepIntent(seq=1, kind=StepKind.MODEL_CALL, name="demo", input={})
    store.commit(run_id, intents=[intent], lease=a)
    assert store.claim_run(run_id, "worker-b", T0 + 1, LEASE) is None  # A's lease holds
    b = store.claim_run(run_id, "worker-b", T0 + LEASE + 1, LEASE)
    assert b == Lease("worker-b", 2)
    return run_id, a, b


def _snapshot(store: SqlStore, run_id: str) -> tuple[object, ...]:
    run = store.get_run(run_id)
    return (
        run.status,
        run.status_message,
        run.updated_at,
        run.last_seq,
        run.cost_usd,
        run.lease_owner,
        run.lease_expires_at,
        run.lease_epoch,
        tuple(store.load_steps(run_id)),
    )


def test_every_claim_takes_a_larger_epoch(client: Client) -> None:
    store = client.store
    run_id = client.start_run("claimed", model="demo").id
    assert client.run(run_id).lease_epoch == 0
    epochs = []
    for i, owner in enumerate(["a", "b", "a", "c"]):
        lease = store.claim_run(run_id, owner, T0 + i, LEASE)
        assert lease is not None and lease.owner == owner
        epochs.append(lease.epoch)
        store.release_run(run_id, owner)
    assert epochs == [1, 2, 3, 4]
    assert client.run(run_id).lease_epoch == 4


def test_a_worker_that_lost_the_run_writes_nothing(client: Client) -> None:
    store = client.store
    run_id, a, _b = _taken_over(client)
    before = _snapshot(store, run_id)

    outcome = StepOutcome(1, StepStatus.COMPLETED, {"content": []}, usage=Usage(10, 5), cost_usd=1)
    with pytest.raises(LeaseLost, match="taken over by another worker"):
        store.commit(
            run_id,
            outcome=outcome,
            intents=[StepIntent(seq=2, kind=StepKind.TOOL_CALL, name="x", input={})],
            patch=RunPatch(status=RunStatus.NEEDS_ATTENTION, status_message="Internal error"),
            lease=a,
        )
    with pytest.raises(LeaseLost):
        store.commit(run_id, outcome=outcome, lease=a)
    with pytest.raises(LeaseLost):
        store.restart_step(run_id, 1, salvaged="half", lease=a)
    with pytest.raises(LeaseLost):
        store.save_partial(run_id, 1, "late text", Usage(10, 5), 1.0, lease=a)
    assert not store.park_for_storage(run_id, "disk full", T0 + 99, a)
    assert not store.renew_lease(run_id, a, T0 + 999)
    assert _snapshot(store, run_id) == before


def test_the_new_owner_and_the_analyst_still_write(client: Client) -> None:
    store = client.store
    run_id, _a, b = _taken_over(client)
    store.restart_step(run_id, 1, salvaged=None, lease=b)
    store.commit(run_id, outcome=StepOutcome(1, StepStatus.COMPLETED, {}), lease=b)
    store.commit(run_id, patch=RunPatch(status_message="a note"))  # no lease: the analyst
    assert store.get_step(run_id, 1).status == StepStatus.COMPLETED
    assert store.renew_lease(run_id, b, T0 + 500)
    assert client.run(run_id).lease_expires_at == T0 + 500
    assert store.renew_lease(run_id, b, T0 + 100)  # never shortened
    assert client.run(run_id).lease_expires_at == T0 + 500


def test_a_heartbeat_does_not_renew_a_lease_the_worker_lost(client: Client) -> None:
    store = client.store
    run_id, _a, _b = _taken_over(client)
    mine = client.start_run("still A's", model="demo").id
    a2 = store.claim_run(mine, "worker-a", T0 + LEASE + 2, LEASE)
    assert a2 is not None
    b_expiry = client.run(run_id).lease_expires_at

    # A wakes up and beats for both runs it believes it holds.
    lost = store.heartbeat("worker-a", T0 + LEASE + 5, LEASE, {run_id: 1, mine: a2.epoch})

    assert lost == {run_id}
    taken = client.run(run_id)
    assert (taken.lease_owner, taken.lease_epoch, taken.lease_expires_at) == (
        "worker-b",
        2,
        b_expiry,
    )
    assert client.run(mine).lease_expires_at == T0 + 2 * LEASE + 5  # its own lease, renewed


def test_a_heartbeat_renews_only_at_the_epoch_it_claimed(client: Client) -> None:
    store = client.store
    run_id = client.start_run("re-claimed", model="demo").id
    store.claim_run(run_id, "worker-a", T0, LEASE)
    store.release_run(run_id, "worker-a")
    again = store.claim_run(run_id, "worker-a", T0 + 1, LEASE)  # a later activation
    assert again == Lease("worker-a", 2)

    assert store.heartbeat("worker-a", T0 + 10, LEASE, {run_id: 1}) == {run_id}
    assert client.run(run_id).lease_expires_at == T0 + 1 + LEASE  # untouched
    assert store.heartbeat("worker-a", T0 + 10, LEASE, {run_id: 2}) == set()
    assert client.run(run_id).lease_expires_at == T0 + 10 + LEASE


def test_a_run_lease_renews_before_an_effect_only_when_short(client: Client) -> None:
    store = client.store
    run_id = client.start_run("effects", model="demo").id
    clock = FakeClock(T0)
    claim = store.claim_run(run_id, "worker-a", T0, LEASE)
    assert claim is not None
    lease = RunLease(store, run_id, claim, T0 + LEASE, LEASE, clock)

    lease.ensure(5.0)  # 30 s left >= 5 + 15: no write
    assert client.run(run_id).lease_expires_at == T0 + LEASE
    lease.ensure(20.0)  # 30 s left < 20 + 15: renewed for the effect plus a lease
    assert client.run(run_id).lease_expires_at == T0 + 20 + LEASE
    clock.advance(10)
    lease.confirm(5.0)  # at the point of no return: always asks the database
    assert client.run(run_id).lease_expires_at == T0 + 20 + LEASE  # never shortened

    clock.advance(100)  # frozen past the lease; B claims
    assert store.claim_run(run_id, "worker-b", clock.now(), LEASE) is not None
    with pytest.raises(LeaseLost):
        lease.confirm(5.0)
    assert lease.lost
    with pytest.raises(LeaseLost):
        lease.ensure(0.0)
    assert client.run(run_id).lease_owner == "worker-b"


def test_events_are_listed_and_move_the_run_for_the_views(client: Client) -> None:
    store = client.store
    run_id = client.start_run("events", model="demo").id
    before = client.run(run_id).updated_at
    store.record_event(
        run_id, RunEventKind.ABANDONED_EFFECT, "gave up send_email", seq=2, data={"epoch": 1}
    )
    (event,) = client.events(run_id)
    assert (event.kind, event.seq, event.message, event.data) == (
        RunEventKind.ABANDONED_EFFECT,
        2,
        "gave up send_email",
        {"epoch": 1},
    )
    assert client.run(run_id).updated_at >= before
