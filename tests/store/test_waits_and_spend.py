"""What the run row carries between activations: waits, parks, budgets, spend, events.

Waits and wake times, parks after errors and storage faults, budgets, money and time spent,
and events outside the journal.

A waiting or paused run holds no thread and no process (DESIGN.md §3): it is rows plus a
wake time, so the wake time must be in the row, found by the worker's poll when it is due
and not before.
"""

from __future__ import annotations

import pytest

from desktop_agent.domain import (
    AgentSpec,
    Budget,
    CommandKind,
    RunEventKind,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import LeaseLost
from desktop_agent.engine.ports import RunPatch, StepOutcome
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory
from tests.store.runs import LEASE_S, T0, claimed, intent, new_run


def test_a_timer_wait_is_kept_and_found_when_due(store_factory: StoreFactory) -> None:
    store, schedules = store_factory.handle.store, store_factory.handle.schedules
    new_run(store)
    wake = T0 + 3600
    store.commit(
        "run-1",
        intents=[intent(1, kind=StepKind.SLEEP, name="sleep")],
        patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.TIMER, wake_at=wake),
    )
    run = store.get_run("run-1")
    assert (run.status, run.wait_reason, run.wake_at) == (
        RunStatus.WAITING,
        WaitReason.TIMER,
        wake,
    )
    assert store.waiting_wake_times() == [("run-1", wake)]
    assert schedules.wake_time("run-1") == wake
    assert store.wants_worker("run-1")  # someone must keep the wake time
    assert store.runnable_runs(wake - 1) == []
    assert store.runnable_runs(wake) == ["run-1"]

    store.commit("run-1", patch=RunPatch(status=RunStatus.RUNNING))  # woken: the wait ends
    run = store.get_run("run-1")
    assert (run.status, run.wait_reason, run.wake_at) == (RunStatus.RUNNING, None, None)
    assert store.waiting_wake_times() == []
    assert schedules.wake_time("run-1") is None


def test_a_wait_without_a_wake_time_wakes_nothing_and_clears_alone(store: SqlStore) -> None:
    new_run(store)
    store.commit(
        "run-1", patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.HUMAN_INPUT)
    )
    assert store.get_run("run-1").wait_reason == WaitReason.HUMAN_INPUT
    assert not store.wants_worker("run-1")
    assert store.runnable_runs(T0 + 10**6) == []
    assert store.waiting_wake_times() == []

    store.commit("run-1", patch=RunPatch(clear_wait=True, status_message="answered"))
    run = store.get_run("run-1")
    assert (run.status, run.wait_reason, run.wake_at, run.status_message) == (
        RunStatus.WAITING,
        None,
        None,
        "answered",
    )


def test_an_error_parks_the_run_for_the_analyst_only_while_the_worker_holds_it(
    store: SqlStore,
) -> None:
    new_run(store)
    a = claimed(store, "run-1", "worker-a")
    store.commit("run-1", intents=[intent(1, name="send_email")], lease=a)
    park = RunPatch(
        status=RunStatus.NEEDS_ATTENTION, status_message="Error: in doubt", attention_seq=1
    )
    store.commit("run-1", patch=park, lease=a)
    run = store.get_run("run-1")
    assert (run.status, run.status_message, run.attention_seq) == (
        RunStatus.NEEDS_ATTENTION,
        "Error: in doubt",
        1,
    )
    assert not store.wants_worker("run-1")

    store.commit("run-1", patch=RunPatch(status=RunStatus.RUNNING, clear_attention=True), lease=a)
    assert store.get_run("run-1").attention_seq is None

    b = claimed(store, "run-1", "worker-b", T0 + LEASE_S + 1)
    with pytest.raises(LeaseLost):
        store.commit("run-1", patch=park, lease=a)
    run = store.get_run("run-1")
    assert (run.status, run.attention_seq, run.lease_owner) == (RunStatus.RUNNING, None, b.owner)


def test_a_storage_park_pauses_the_run_until_its_retry_time(store: SqlStore) -> None:
    new_run(store)
    lease = claimed(store, "run-1", "worker-a")
    retry = T0 + 30
    assert store.park_for_storage("run-1", "Paused: the disk is full.", retry, lease)
    run = store.get_run("run-1")
    assert (run.status, run.wake_at, run.wait_reason, run.status_message) == (
        RunStatus.PAUSED,
        retry,
        None,
        "Paused: the disk is full.",
    )
    assert store.storage_paused_due(retry - 1) == []
    assert store.storage_paused_due(retry) == ["run-1"]
    assert store.waiting_wake_times() == []  # not a wait: the worker's retry resumes it

    store.add_command("run-1", CommandKind.RESUME, {"why": "storage works again"})
    assert store.storage_paused_due(retry) == []  # the resume is queued: retried once

    new_run(store, "done", created_at=T0 + 1, status=RunStatus.COMPLETED)
    assert not store.park_for_storage("done", "Paused", retry)  # finished runs stay finished
    assert store.get_run("done").status == RunStatus.COMPLETED


def test_spend_is_counted_once_across_outcomes_salvage_and_late_events(
    store: SqlStore,
) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])
    store.commit(
        "run-1",
        outcome=StepOutcome(1, StepStatus.COMPLETED, {}, usage=Usage(100, 10, 50, 0), cost_usd=0.3),
        intents=[intent(2, kind=StepKind.MODEL_CALL, name="demo")],
        patch=RunPatch(add_active_seconds=1.5),
    )
    store.save_partial("run-1", 2, "partial", Usage(200, 5, 0, 50), 0.2)
    store.restart_step("run-1", 2, salvaged="partial")  # the crashed attempt was paid for
    store.commit(
        "run-1",
        outcome=StepOutcome(2, StepStatus.COMPLETED, {}, usage=Usage(200, 40, 0, 50), cost_usd=0.4),
        patch=RunPatch(add_active_seconds=2.0),
    )
    store.record_event(
        "run-1",
        RunEventKind.LATE_EFFECT,
        "a worker that lost the run paid for a model call",
        seq=2,
        add_usage=Usage(10, 1),
        add_cost_usd=0.05,
    )
    run = store.get_run("run-1")
    assert run.cost_usd == pytest.approx(0.3 + 0.2 + 0.4 + 0.05)
    assert run.usage == Usage(100 + 200 + 200 + 10, 10 + 5 + 40 + 1, 50, 50 + 50)
    assert run.active_seconds == pytest.approx(3.5)
    steps = store.load_steps("run-1")
    total = sum(s.cost_usd + s.salvaged_cost_usd for s in steps)
    assert total == pytest.approx(0.3 + 0.2 + 0.4)  # the event's spend is in no step


def test_a_budget_is_replaced_whole_and_the_spend_stays(store: SqlStore) -> None:
    new_run(store, budget=Budget(max_cost_usd=1.0, max_steps=10))
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])
    store.commit("run-1", outcome=StepOutcome(1, StepStatus.COMPLETED, {}, cost_usd=0.9))
    extended = Budget(max_cost_usd=1.0, max_steps=10).extended(cost_usd=2.0, steps=5)
    store.commit(
        "run-1",
        patch=RunPatch(status=RunStatus.RUNNING, budget=extended.to_json(), clear_wait=True),
    )
    run = store.get_run("run-1")
    assert run.budget == Budget(max_cost_usd=3.0, max_steps=15)
    assert (run.cost_usd, run.last_seq) == (0.9, 1)


def test_a_new_definition_changes_the_runs_hash(store: SqlStore) -> None:
    run = new_run(store)
    spec = AgentSpec(model="claude-haiku-4-5", system_prompt="Be brief.")
    store.commit("run-1", patch=RunPatch(spec=spec.to_json()))
    changed = store.get_run("run-1")
    assert changed.spec == spec
    assert changed.definition_hash == spec.definition_hash != run.definition_hash


def test_events_are_kept_in_order_and_change_no_journal(store_factory: StoreFactory) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    new_run(store)
    store.commit("run-1", intents=[intent(1, name="send_email")])
    before = store.get_run("run-1")
    steps = store.load_steps("run-1")
    clock.advance(5.0)

    store.record_event(
        "run-1", RunEventKind.ABANDONED_EFFECT, "gave up send_email", seq=1, data={"epoch": 1}
    )
    store.record_event("run-1", RunEventKind.LATE_EFFECT, "sent anyway")

    first, second = store.run_events("run-1")
    assert (first.kind, first.message, first.seq, first.data, first.created_at) == (
        RunEventKind.ABANDONED_EFFECT,
        "gave up send_email",
        1,
        {"epoch": 1},
        T0 + 5.0,
    )
    assert (second.kind, second.seq, second.data) == (RunEventKind.LATE_EFFECT, None, None)
    assert first.id < second.id
    assert store.load_steps("run-1") == steps
    after = store.get_run("run-1")
    assert (after.status, after.last_seq, after.cost_usd) == (
        before.status,
        before.last_seq,
        before.cost_usd,
    )
    assert after.updated_at == T0 + 5.0  # the views read the run again
    new_run(store, "run-2", created_at=T0 + 1)
    assert store.run_events("run-2") == []


def test_the_change_token_moves_with_every_write_the_views_show(
    store_factory: StoreFactory,
) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    tokens = [store.change_token()]

    def changed() -> bool:
        clock.advance(0.1)
        tokens.append(store.change_token())
        return tokens[-1] != tokens[-2]

    new_run(store)
    assert changed(), "a new run"
    store.commit("run-1", intents=[intent(1)])
    assert changed(), "a new step"
    store.commit("run-1", intents=[intent(2)])
    assert changed(), "a second step within the same second"
    store.add_command("run-1", CommandKind.PAUSE)
    assert changed(), "a command"
    store.record_event("run-1", RunEventKind.LATE_EFFECT, "sent anyway")
    assert changed(), "an event"
    assert not changed(), "nothing"
