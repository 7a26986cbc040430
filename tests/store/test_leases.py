"""Claims, leases and fencing (DESIGN.md §1, §3 "Fencing").

A run is claimed by one worker at a time; every claim takes a lease epoch larger than any
before it, and every journal write of a worker is conditional on still holding the run at
that epoch, checked in the same transaction. A worker that lost the run (frozen past its
lease, say) gets :class:`LeaseLost` and writes nothing; its heartbeat renews only the
leases it still holds and names the ones it lost.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from desktop_agent.domain import (
    ApprovalState,
    CommandKind,
    Lease,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WorkerInfo,
)
from desktop_agent.domain.errors import LeaseLost
from desktop_agent.engine.ports import RunPatch, Snapshot, StepOutcome
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory
from tests.store.runs import LEASE_S, T0, approval, claimed, intent, new_run


def _taken_over(store: SqlStore) -> tuple[Lease, Lease]:
    """run-1 claimed by A, which wrote intents 1 and 2, then claimed by B after A's expiry."""
    new_run(store)
    a = claimed(store, "run-1", "worker-a")
    store.commit(
        "run-1",
        intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo"), intent(2)],
        approvals=[approval("run-1", 2)],
        lease=a,
    )
    assert store.claim_run("run-1", "worker-b", T0 + 1, LEASE_S) is None  # A's lease holds
    b = claimed(store, "run-1", "worker-b", T0 + LEASE_S + 1)
    return a, b


def _everything(store: SqlStore, run_id: str) -> tuple[object, ...]:
    """All a write could change about the run, through the public reads."""
    return (
        store.get_run(run_id),
        tuple(store.load_steps(run_id)),
        store.load_snapshot(run_id),
        tuple(store.pending_commands(run_id)),
        tuple(store.list_run_approvals(run_id)),
        tuple(store.run_events(run_id)),
    )


def test_one_of_several_concurrent_claimants_wins(store_factory: StoreFactory) -> None:
    new_run(store_factory.handle.store)
    handles = [store_factory.open() for _ in range(4)]
    start = threading.Barrier(len(handles))
    leases: dict[str, Lease | None] = {}
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        try:
            start.wait()
            leases[f"w{i}"] = handles[i].store.claim_run("run-1", f"w{i}", T0, LEASE_S)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    winners = {owner: lease for owner, lease in leases.items() if lease is not None}
    assert len(leases) == 4 and len(winners) == 1, leases
    ((owner, lease),) = winners.items()
    assert lease == Lease(owner, 1)
    run = store_factory.handle.store.get_run("run-1")
    assert (run.lease_owner, run.lease_epoch, run.lease_expires_at) == (owner, 1, T0 + LEASE_S)


def test_every_claim_takes_a_larger_epoch(store: SqlStore) -> None:
    new_run(store)
    epochs = [claimed(store, "run-1", "a").epoch]
    assert store.claim_run("run-1", "b", T0 + 1, LEASE_S) is None  # held: no claim, no epoch
    store.release_run("run-1", "a")
    epochs.append(claimed(store, "run-1", "b", T0 + 2).epoch)  # released
    epochs.append(claimed(store, "run-1", "a", T0 + 2 + LEASE_S + 1).epoch)  # expired
    lease = store.claim_run("run-1", "c", T0 + LEASE_S + 4, LEASE_S, dead_owners=["a"])
    assert lease is not None  # held, but by a dead worker
    epochs.append(lease.epoch)
    assert epochs == [1, 2, 3, 4]
    assert store.get_run("run-1").lease_epoch == 4


def test_a_worker_that_lost_the_run_writes_nothing(store: SqlStore) -> None:
    a, _b = _taken_over(store)
    cmd = store.add_command("run-1", CommandKind.PAUSE)
    before = _everything(store, "run-1")

    with pytest.raises(LeaseLost):
        store.commit(
            "run-1",
            outcome=StepOutcome(1, StepStatus.COMPLETED, {}, usage=Usage(9, 9), cost_usd=1.0),
            intents=[intent(3)],
            patch=RunPatch(status=RunStatus.NEEDS_ATTENTION, status_message="late"),
            snapshot=Snapshot(1, {"late": True}),
            applied_commands=[(cmd, "paused")],
            approvals=[replace(approval("run-1", 2), state=ApprovalState.APPROVED)],
            lease=a,
        )
    with pytest.raises(LeaseLost):
        store.restart_step("run-1", 1, salvaged="half", lease=a)
    with pytest.raises(LeaseLost):
        store.save_partial("run-1", 1, "late text", Usage(10, 5), 1.0, lease=a)
    assert not store.park_for_storage("run-1", "disk full", T0 + 99, a)
    assert not store.renew_lease("run-1", a, T0 + 999)

    assert _everything(store, "run-1") == before


def test_a_lost_worker_colliding_with_the_new_owners_step_learns_it_lost_the_run(
    store: SqlStore,
) -> None:
    """The fence decides before anything else: not a key conflict with the new owner's step."""
    a, b = _taken_over(store)
    store.commit(
        "run-1", outcome=StepOutcome(2, StepStatus.COMPLETED, {}), intents=[intent(3)], lease=b
    )
    before = _everything(store, "run-1")

    with pytest.raises(LeaseLost):
        store.commit(
            "run-1", outcome=StepOutcome(2, StepStatus.FAILED, {}), intents=[intent(3)], lease=a
        )

    assert _everything(store, "run-1") == before


def test_the_new_owner_and_the_analyst_still_write(store: SqlStore) -> None:
    _a, b = _taken_over(store)
    assert store.restart_step("run-1", 1, salvaged=None, lease=b) == 2
    store.save_partial("run-1", 1, "fresh", Usage(3, 1), 0.001, lease=b)
    store.commit("run-1", outcome=StepOutcome(1, StepStatus.COMPLETED, {}), lease=b)
    store.commit("run-1", patch=RunPatch(status_message="a note"))  # no lease: the analyst
    assert store.get_step("run-1", 1).status == StepStatus.COMPLETED
    assert store.get_run("run-1").status_message == "a note"


def test_a_renewal_lengthens_a_held_lease_and_never_shortens_it(store: SqlStore) -> None:
    new_run(store)
    lease = claimed(store, "run-1", "worker-a")
    assert store.renew_lease("run-1", lease, T0 + 500)
    assert store.get_run("run-1").lease_expires_at == T0 + 500
    assert store.renew_lease("run-1", lease, T0 + 100)  # still held; kept at its longest
    assert store.get_run("run-1").lease_expires_at == T0 + 500
    store.release_run("run-1", "worker-a")
    assert not store.renew_lease("run-1", lease, T0 + 900)  # released: not renewed
    assert store.get_run("run-1").lease_owner is None


def test_a_heartbeat_renews_the_leases_held_and_reports_the_lost_ones(store: SqlStore) -> None:
    store.register_worker(WorkerInfo("worker-a", "host", 11, T0, T0), proc_started_at=T0 - 1)
    _a, _b = _taken_over(store)  # run-1: A's claim at epoch 1, B's at epoch 2
    new_run(store, "run-2", created_at=T0 + 1)
    mine = claimed(store, "run-2", "worker-a", T0 + LEASE_S + 2)
    new_run(store, "run-3", created_at=T0 + 2)
    claimed(store, "run-3", "worker-a", T0 + LEASE_S + 2)
    store.release_run("run-3", "worker-a")
    reclaimed = claimed(store, "run-3", "worker-a", T0 + LEASE_S + 3)  # a later activation
    b_expiry = store.get_run("run-1").lease_expires_at

    now = T0 + LEASE_S + 5
    lost = store.heartbeat(
        "worker-a", now, LEASE_S, {"run-1": 1, "run-2": mine.epoch, "run-3": reclaimed.epoch - 1}
    )

    assert lost == {"run-1", "run-3"}
    taken = store.get_run("run-1")
    assert (taken.lease_owner, taken.lease_epoch, taken.lease_expires_at) == (
        "worker-b",
        2,
        b_expiry,
    )
    assert store.get_run("run-2").lease_expires_at == now + LEASE_S
    assert store.get_run("run-3").lease_expires_at == T0 + LEASE_S + 3 + LEASE_S  # untouched
    ((info, _started),) = store.list_workers()
    assert (info.id, info.heartbeat_at) == ("worker-a", now)


def test_leases_are_given_back_by_their_owner_or_a_stopping_worker(store: SqlStore) -> None:
    store.register_worker(WorkerInfo("worker-a", "host", 11, T0, T0), proc_started_at=T0)
    new_run(store, "run-1")
    new_run(store, "run-2", created_at=T0 + 1)
    claimed(store, "run-1", "worker-a")
    claimed(store, "run-2", "worker-a")
    store.release_run("run-1", "worker-b")  # not B's to give back
    assert store.get_run("run-1").lease_owner == "worker-a"
    assert store.lease_owners() == {"worker-a"}

    store.stop_worker("worker-a", T0 + 5)

    assert store.lease_owners() == set()
    assert [store.get_run(r).lease_owner for r in ("run-1", "run-2")] == [None, None]
    assert store.list_workers() == []
    ((info, _),) = store.list_workers(include_stopped=True)
    assert info.stopped_at == T0 + 5


def test_runnable_runs_wait_for_an_expired_lease_or_a_dead_owner(store: SqlStore) -> None:
    new_run(store, "run-1", created_at=T0)
    new_run(store, "run-2", created_at=T0 + 1)
    new_run(store, "done", created_at=T0 + 2, status=RunStatus.COMPLETED)
    assert store.runnable_runs(T0) == ["run-1", "run-2"]  # oldest first; a finished run never

    claimed(store, "run-1", "worker-a")
    assert store.runnable_runs(T0 + 1) == ["run-2"]
    assert store.runnable_runs(T0 + 1, dead_owners=["worker-a"]) == ["run-1", "run-2"]
    assert store.runnable_runs(T0 + LEASE_S + 1) == ["run-1", "run-2"]
    assert store.runnable_runs(T0, limit=1) == ["run-2"]


def test_a_dead_worker_is_marked_once(store: SqlStore) -> None:
    store.register_worker(WorkerInfo("worker-a", "host", 11, T0, T0), proc_started_at=T0 - 3)
    ((info, started),) = store.list_workers()
    assert (info.host, info.pid, started) == ("host", 11, T0 - 3)
    store.mark_worker_dead("worker-a", T0 + 7)
    store.mark_worker_dead("worker-a", T0 + 9)  # found dead again by another worker
    ((info, _),) = store.list_workers(include_stopped=True)
    assert info.stopped_at == T0 + 7


def test_claiming_the_next_runs_takes_the_oldest_free_ones_and_skips_what_is_asked(
    store: SqlStore,
) -> None:
    for i in range(4):
        new_run(store, f"run-{i}", created_at=T0 + i)
    claimed(store, "run-0", "worker-a")  # held by another worker
    got = store.claim_runnable("worker-b", T0 + 1, LEASE_S, limit=2, skip=["run-1"])
    assert got == [("run-2", Lease("worker-b", 1)), ("run-3", Lease("worker-b", 1))]
    assert store.get_run("run-2").lease_owner == "worker-b"
    assert store.claim_runnable("worker-b", T0 + 1, LEASE_S, limit=5) == [
        ("run-1", Lease("worker-b", 1))
    ]
    assert store.claim_runnable("worker-c", T0 + 1, LEASE_S, limit=5) == []  # all held
    # A dead owner's runs are free again, at a larger epoch.
    again = store.claim_runnable("worker-c", T0 + 1, LEASE_S, ["worker-a"], limit=5)
    assert again == [("run-0", Lease("worker-c", 2))]


def test_workers_claiming_at_once_never_take_the_same_run(store_factory: StoreFactory) -> None:
    for i in range(24):
        new_run(store_factory.handle.store, f"run-{i:02}", created_at=T0 + i)
    handles = [store_factory.open() for _ in range(4)]
    start = threading.Barrier(len(handles))
    claims: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        try:
            start.wait()
            mine: list[str] = []
            while got := handles[i].store.claim_runnable(f"w{i}", T0 + 30, LEASE_S, limit=2):
                mine.extend(run_id for run_id, _lease in got)
            claims[f"w{i}"] = mine
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    taken = [run_id for mine in claims.values() for run_id in mine]
    assert sorted(taken) == [f"run-{i:02}" for i in range(24)]  # each run once, none left
    for owner, mine in claims.items():
        for run_id in mine:
            run = store_factory.handle.store.get_run(run_id)
            assert (run.lease_owner, run.lease_epoch) == (owner, 1)


def test_a_worker_claims_only_runs_placed_where_it_can_serve_them(store: SqlStore) -> None:
    from dataclasses import replace as with_

    template = new_run(store, "template", status=RunStatus.COMPLETED)  # nothing to claim
    places = {"r-any": "any", "r-a": "host:alpha", "r-b": "host:beta", "r-gpu": "pool:gpu"}
    for i, (run_id, placement) in enumerate(places.items()):
        store.create_run(
            with_(template, id=run_id, status=RunStatus.QUEUED, placement=placement,
                  created_at=T0 + i)
        )  # fmt: skip
    on_alpha = store.claim_runnable("w-alpha", T0 + 10, LEASE_S, limit=10, host="alpha")
    assert [r for r, _ in on_alpha] == ["r-any", "r-a"]
    on_beta = store.claim_runnable("w-beta", T0 + 10, LEASE_S, limit=10, host="beta", pools=["gpu"])
    assert [r for r, _ in on_beta] == ["r-b", "r-gpu"]
    assert store.get_run("r-gpu").placement == "pool:gpu"  # read back as written
