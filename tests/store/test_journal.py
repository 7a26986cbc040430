"""The journal: intents before effects, outcomes after, one commit per record, keys per run.

DESIGN.md §3: a step is inserted as ``started`` with its idempotency key (``run_id:seq``)
and committed before its effect; its outcome (output, usage, cost) is a second commit. A
retry of the same step keeps its key (:meth:`restart_step` counts an attempt); a second
intent for a ``seq`` already in the journal is refused, and nothing of its commit is kept.
"""

from __future__ import annotations

import pytest

from desktop_agent.domain import EffectClass, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.domain.errors import NotFoundError
from desktop_agent.engine.ports import RunPatch, Snapshot, StepOutcome
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory
from tests.store.runs import T0, intent, new_run, refused


def test_intent_then_outcome_records_the_step_and_moves_the_run(
    store_factory: StoreFactory,
) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    new_run(store)
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])

    step = store.get_step("run-1", 1)
    assert (step.status, step.attempt, step.idempotency_key) == (
        StepStatus.STARTED,
        1,
        "run-1:1",
    )
    assert (step.kind, step.name, step.started_at, step.finished_at) == (
        StepKind.MODEL_CALL,
        "demo",
        T0,
        None,
    )
    assert step.output is None and step.input == {"arguments": {"path": "src-1.md"}}
    assert store.get_run("run-1").last_seq == 1

    clock.advance(2.0)
    answer = {"content": [{"type": "text", "text": "Alpha grew 4%."}], "stop_reason": "end_turn"}
    store.commit(
        "run-1",
        outcome=StepOutcome(
            1, StepStatus.COMPLETED, answer, usage=Usage(100, 20, 5, 7), cost_usd=0.25
        ),
    )
    step = store.get_step("run-1", 1)
    assert (step.status, step.output, step.usage, step.cost_usd) == (
        StepStatus.COMPLETED,
        answer,
        Usage(100, 20, 5, 7),
        0.25,
    )
    assert (step.finished_at, step.duration_s) == (T0 + 2.0, 2.0)
    run = store.get_run("run-1")
    assert (run.last_seq, run.cost_usd, run.usage) == (1, 0.25, Usage(100, 20, 5, 7))


def test_a_failed_outcome_keeps_its_error(store: SqlStore) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1, name="web_fetch")])
    store.commit(
        "run-1",
        outcome=StepOutcome(1, StepStatus.FAILED, {"is_error": True}, error="connection reset"),
    )
    step = store.get_step("run-1", 1)
    assert (step.status, step.error, step.output) == (
        StepStatus.FAILED,
        "connection reset",
        {"is_error": True},
    )
    assert step.finished_at is not None


def test_an_outcome_the_next_intents_a_patch_and_a_snapshot_are_one_commit(
    store: SqlStore,
) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])
    store.commit(
        "run-1",
        outcome=StepOutcome(1, StepStatus.COMPLETED, {"content": []}, cost_usd=0.5),
        intents=[intent(2), intent(3, name="web_fetch")],
        patch=RunPatch(status=RunStatus.RUNNING, started_at=T0, status_message="reading"),
        snapshot=Snapshot(1, {"turns": 1}),
    )
    steps = store.load_steps("run-1")
    assert [(s.seq, s.status, s.name) for s in steps] == [
        (1, StepStatus.COMPLETED, "demo"),
        (2, StepStatus.STARTED, "read_file"),
        (3, StepStatus.STARTED, "web_fetch"),
    ]
    run = store.get_run("run-1")
    assert (run.status, run.started_at, run.status_message) == (RunStatus.RUNNING, T0, "reading")
    assert (run.last_seq, run.cost_usd) == (3, 0.5)
    assert store.load_snapshot("run-1") == Snapshot(1, {"turns": 1})


def test_a_second_intent_for_a_seq_is_refused_and_its_commit_leaves_nothing(
    store: SqlStore,
) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1)])
    first = store.load_steps("run-1")

    refused(
        lambda: store.commit(
            "run-1",
            intents=[intent(2), intent(1, name="write_file", effect=EffectClass.IDEMPOTENT)],
            patch=RunPatch(status=RunStatus.RUNNING, status_message="should not stay"),
            snapshot=Snapshot(2, {"turns": 2}),
        ),
        "a second intent for step 1",
    )

    assert store.load_steps("run-1") == first
    run = store.get_run("run-1")
    assert (run.status, run.status_message, run.last_seq) == (RunStatus.QUEUED, "", 1)
    assert store.load_snapshot("run-1") is None
    # The key is unique per run, not across runs: another run has its own step 1.
    new_run(store, "run-2")
    store.commit("run-2", intents=[intent(1)])
    assert store.get_step("run-2", 1).idempotency_key == "run-2:1"


def test_a_step_recorded_whole_is_finished_in_its_one_commit(store_factory: StoreFactory) -> None:
    store = store_factory.handle.store
    new_run(store)
    store.commit(
        "run-1",
        intents=[
            intent(1, status=StepStatus.COMPLETED, output={"content": "alpha", "is_error": False})
        ],
    )
    step = store.get_step("run-1", 1)
    assert (step.status, step.output, step.finished_at) == (
        StepStatus.COMPLETED,
        {"content": "alpha", "is_error": False},
        store_factory.clock.now(),
    )


def test_steps_load_in_order_from_a_seq(store: SqlStore) -> None:
    new_run(store)
    for seq in range(1, 6):
        store.commit("run-1", intents=[intent(seq)])
    assert [s.seq for s in store.load_steps("run-1")] == [1, 2, 3, 4, 5]
    assert [s.seq for s in store.load_steps("run-1", 3)] == [3, 4, 5]
    assert store.load_steps("run-1", 6) == []
    assert store.get_step("run-1", 4).input == {"arguments": {"path": "src-4.md"}}
    with pytest.raises(NotFoundError):
        store.get_step("run-1", 9)


def test_the_newest_snapshot_replaces_the_older_one(store: SqlStore) -> None:
    new_run(store)
    assert store.load_snapshot("run-1") is None
    store.commit("run-1", intents=[intent(1)], snapshot=Snapshot(1, {"notes": ["a"]}))
    store.commit("run-1", intents=[intent(2)], snapshot=Snapshot(2, {"notes": ["a", "b"]}))
    assert store.load_snapshot("run-1") == Snapshot(2, {"notes": ["a", "b"]})


def test_a_restarted_step_keeps_its_key_and_what_its_attempt_streamed_and_spent(
    store: SqlStore,
) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])
    store.save_partial("run-1", 1, "Half a", Usage(50, 3), 0.01)
    store.save_partial("run-1", 1, "Half a thought", Usage(50, 8), 0.02)
    step = store.get_step("run-1", 1)
    assert (step.partial_text, step.usage, step.cost_usd) == ("Half a thought", Usage(50, 8), 0.02)
    # Saved while streaming, not yet counted: the outcome or a restart counts it, once.
    assert store.get_run("run-1").cost_usd == 0.0

    assert store.restart_step("run-1", 1, salvaged="Half a thought") == 2
    step = store.get_step("run-1", 1)
    assert (step.status, step.attempt, step.idempotency_key) == (StepStatus.STARTED, 2, "run-1:1")
    assert (step.partial_text, step.salvaged) == ("", ("Half a thought",))
    assert (step.salvaged_usage, step.salvaged_cost_usd) == (Usage(50, 8), 0.02)
    assert (step.usage, step.cost_usd) == (Usage(), 0.0)
    run = store.get_run("run-1")
    assert (run.cost_usd, run.usage) == (0.02, Usage(50, 8))

    store.commit(
        "run-1",
        outcome=StepOutcome(1, StepStatus.COMPLETED, {}, usage=Usage(60, 30), cost_usd=0.05),
    )
    run = store.get_run("run-1")
    assert run.cost_usd == pytest.approx(0.07)
    assert run.usage == Usage(110, 38)
    assert store.restart_step("run-1", 1, salvaged=None) == 3  # each attempt is counted


def test_a_partial_save_never_touches_a_finished_step(store: SqlStore) -> None:
    new_run(store)
    store.commit("run-1", intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")])
    store.commit(
        "run-1", outcome=StepOutcome(1, StepStatus.COMPLETED, {"done": True}, cost_usd=0.1)
    )
    before = store.get_step("run-1", 1)
    store.save_partial("run-1", 1, "late text", Usage(999, 999), 9.0)
    assert store.get_step("run-1", 1) == before
    with pytest.raises(NotFoundError):
        store.restart_step("run-1", 7, salvaged=None)


def test_an_effect_is_in_the_ledger_when_its_intent_commit_returns(
    store_factory: StoreFactory,
) -> None:
    ledger = store_factory.ledger()
    if ledger is None:
        pytest.skip("this store keeps no effect ledger beside its database")
    store = store_factory.handle.store
    new_run(store)
    store.commit("run-1", intents=[intent(1)])  # read-only: may run again, not ledgered
    store.commit("run-1", intents=[intent(2, name="send_email", effect=EffectClass.UNSAFE)])
    refused(
        lambda: store.commit(
            "run-1", intents=[intent(2, name="http_post", effect=EffectClass.IDEMPOTENT)]
        ),
        "a second intent for step 2",
    )
    store.restart_step("run-1", 2, salvaged=None)

    contents = ledger.read()
    assert contents is not None
    assert [(e.key, e.tool, e.effect, e.attempt) for e in contents.entries] == [
        ("run-1:2", "send_email", "unsafe", 1),
        ("run-1:2", "send_email", "unsafe", 2),
    ]
