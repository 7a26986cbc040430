"""The control plane: commands queued, applied once; approvals asked, decided once.

DESIGN.md §1: the GUI and CLI never call engine code, they write rows (commands, decisions)
that the worker applies at the run's next step boundary.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from desktop_agent.domain import ApprovalState, CommandKind, RunStatus, StepKind, WaitReason
from desktop_agent.domain.errors import InvalidStateError, LeaseLost, NotFoundError
from desktop_agent.engine.ports import RunPatch
from desktop_agent.persistence.decisions import Decision
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory
from tests.store.runs import LEASE_S, T0, approval, claimed, intent, new_run


def _asking(store: SqlStore, run_id: str = "run-1", seq: int = 1) -> str:
    """A run whose step ``seq`` asks for an approval, waiting for it; the approval's id."""
    asked = approval(run_id, seq)
    store.commit(
        run_id,
        intents=[intent(seq, kind=StepKind.APPROVAL, name="send_email")],
        approvals=[asked],
        patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.APPROVAL),
    )
    return asked.id


def test_commands_queue_in_order_until_the_worker_applies_them(
    store_factory: StoreFactory,
) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    new_run(store)
    new_run(store, "run-2", created_at=T0 + 1)
    ids = [
        store.add_command("run-1", CommandKind.PAUSE),
        store.add_command("run-1", CommandKind.STEER, {"text": "look at 2026"}),
        store.add_command("run-1", CommandKind.RESUME),
        store.add_command("run-1", CommandKind.CANCEL),
        store.add_command("run-2", CommandKind.PAUSE),
    ]
    assert ids == sorted(ids) and len(set(ids)) == 5

    pending = store.pending_commands("run-1")
    assert [(c.id, c.kind, c.payload) for c in pending] == [
        (ids[0], CommandKind.PAUSE, None),
        (ids[1], CommandKind.STEER, {"text": "look at 2026"}),
        (ids[2], CommandKind.RESUME, None),
        (ids[3], CommandKind.CANCEL, None),
    ]
    assert all(c.applied_at is None and c.created_at == T0 for c in pending)
    assert store.pending_command_kinds() == {
        "run-1": {"pause", "steer", "resume", "cancel"},
        "run-2": {"pause"},
    }
    assert store.pending_cancels() == {"run-1"}

    clock.advance(3.0)
    store.commit("run-1", applied_commands=[(ids[0], "paused"), (ids[3], "cancelled")])
    assert [c.id for c in store.pending_commands("run-1")] == [ids[1], ids[2]]
    done = store.get_command(ids[3])
    assert (done.applied_at, done.result) == (T0 + 3.0, "cancelled")
    assert store.pending_cancels() == set()
    with pytest.raises(NotFoundError):
        store.get_command(max(ids) + 100)


def test_commands_applied_by_a_worker_that_lost_the_run_stay_pending(store: SqlStore) -> None:
    new_run(store)
    a = claimed(store, "run-1", "worker-a")
    cmd = store.add_command("run-1", CommandKind.CANCEL)
    claimed(store, "run-1", "worker-b", T0 + LEASE_S + 1)
    with pytest.raises(LeaseLost):
        store.commit(
            "run-1",
            applied_commands=[(cmd, "cancelled")],
            patch=RunPatch(status=RunStatus.CANCELLED),
            lease=a,
        )
    assert [c.id for c in store.pending_commands("run-1")] == [cmd]
    assert store.get_run("run-1").status == RunStatus.QUEUED


def test_a_note_to_a_waiting_run_wakes_no_worker_but_a_pause_does(store: SqlStore) -> None:
    new_run(store)
    _asking(store)
    assert not store.wants_worker("run-1")
    assert store.runnable_runs(T0) == []

    store.add_command("run-1", CommandKind.STEER, {"text": "also check 2026"})
    assert not store.wants_worker("run-1")
    assert store.runnable_runs(T0) == []

    store.add_command("run-1", CommandKind.PAUSE)
    assert store.wants_worker("run-1")
    assert store.runnable_runs(T0) == ["run-1"]


def test_approvals_are_read_back_and_decided_in_place(store_factory: StoreFactory) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    new_run(store)
    approval_id = _asking(store, seq=1)
    asked = store.get_approval(approval_id)
    assert asked == approval("run-1", 1)
    assert store.get_approvals("run-1", 1) == [asked]
    assert store.get_approvals("run-1", 2) == []
    assert store.list_run_approvals("run-1") == [asked]
    assert store.list_approvals() == [asked]  # pending, across runs

    clock.advance(4.0)
    decided = replace(
        asked,
        state=ApprovalState.EDITED,
        decided_arguments={"to": "cfo@example.org", "subject": "Q3"},
        decision_note="not the whole board",
        decided_at=clock.now(),
    )
    store.commit("run-1", approvals=[decided], patch=RunPatch(status=RunStatus.RUNNING))

    assert store.get_approval(approval_id) == decided
    assert store.list_run_approvals("run-1") == [decided]  # updated, not added
    assert store.list_approvals() == []
    assert store.list_approvals(ApprovalState.EDITED) == [decided]
    assert store.list_approvals(None) == [decided]
    with pytest.raises(NotFoundError):
        store.get_approval("no-such-approval")


def test_a_decision_is_recorded_once(store_factory: StoreFactory) -> None:
    handle = store_factory.handle
    store, decisions = handle.store, handle.decisions
    new_run(store)
    approval_id = _asking(store)

    (cmd,) = decisions.record([Decision(approval_id, CommandKind.APPROVE, {"reason": "fine"})])
    queued = store.get_command(cmd)
    assert (queued.kind, queued.payload) == (
        CommandKind.APPROVE,
        {"reason": "fine", "approval_id": approval_id},
    )
    assert decisions.queued_decision(approval_id, "run-1") == "approved"
    assert store.wants_worker("run-1")

    with pytest.raises(InvalidStateError, match="already approved"):
        decisions.record([Decision(approval_id, CommandKind.REJECT, {"reason": "no"})])
    assert [c.id for c in store.pending_commands("run-1")] == [cmd]

    # The worker applies it: the approval is decided, and stays decided.
    decided = replace(store.get_approval(approval_id), state=ApprovalState.APPROVED)
    store.commit("run-1", approvals=[decided], applied_commands=[(cmd, "approved")])
    assert decisions.queued_decision(approval_id, "run-1") is None
    with pytest.raises(InvalidStateError, match="already approved"):
        decisions.record([Decision(approval_id, CommandKind.APPROVE, {"reason": "again"})])
    assert store.pending_commands("run-1") == []


def test_decisions_of_a_batch_are_all_recorded_or_none(store_factory: StoreFactory) -> None:
    store, decisions = store_factory.handle.store, store_factory.handle.decisions
    new_run(store, "run-1")
    new_run(store, "run-2", created_at=T0 + 1)
    first = _asking(store, "run-1")
    second = _asking(store, "run-2")
    decisions.record([Decision(second, CommandKind.REJECT, {"reason": "wrong list"})])
    assert decisions.queued_decision(second, "run-2") == "rejected"

    with pytest.raises(InvalidStateError):
        decisions.record(
            [
                Decision(first, CommandKind.APPROVE, {"reason": ""}),
                Decision(second, CommandKind.APPROVE, {"reason": ""}),
            ]
        )
    assert store.pending_commands("run-1") == []  # the first was not recorded either
    with pytest.raises(NotFoundError):
        decisions.record([Decision("no-such-approval", CommandKind.APPROVE, {})])
    with pytest.raises(ValueError, match="only approve and reject"):
        decisions.record([Decision(first, CommandKind.PAUSE, {})])

    edited = {"reason": "", "arguments": {"to": "cfo@example.org"}}
    decisions.record([Decision(first, CommandKind.APPROVE, edited)])
    assert decisions.queued_decision(first, "run-1") == "edited and approved"


def test_of_concurrent_decisions_on_one_approval_one_is_recorded(
    store_factory: StoreFactory,
) -> None:
    new_run(store_factory.handle.store)
    approval_id = _asking(store_factory.handle.store)
    handles = [store_factory.open() for _ in range(4)]
    start = threading.Barrier(len(handles))
    outcomes: list[str] = []
    lock = threading.Lock()

    def decide(i: int) -> None:
        kind = CommandKind.APPROVE if i % 2 else CommandKind.REJECT
        start.wait()
        try:
            handles[i].decisions.record([Decision(approval_id, kind, {"reason": f"#{i}"})])
            result = "recorded"
        except InvalidStateError:
            result = "refused"
        except BaseException as exc:  # reported below, in the test's thread
            result = f"failed: {exc!r}"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(outcomes) == ["recorded", "refused", "refused", "refused"]
    assert len(store_factory.handle.store.pending_commands("run-1")) == 1


def test_a_run_that_needs_a_decision_keeps_answers_for_after_it(store: SqlStore) -> None:
    new_run(store, status=RunStatus.NEEDS_ATTENTION)
    for kind, payload in (
        (CommandKind.ANSWER, {"text": "cobalt"}),
        (CommandKind.EXTEND_BUDGET, {"cost_usd": 1.0}),
    ):
        store.add_command("run-1", kind, payload)
    assert store.runnable_runs(T0) == []  # nothing it could use before the decision
    store.add_command("run-1", CommandKind.RESOLVE, {"action": "accept"})
    assert store.runnable_runs(T0) == ["run-1"]  # the decision wakes it
