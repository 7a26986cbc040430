"""What a forecast reads and keeps, on every store implementation (SQLite and PostgreSQL).

The history read (completed runs of one model, newest first, a template's own, forks left
out), the model calls' count and time per run, and the forecast kept with a run, which the
run's list of events leaves out.
"""

from __future__ import annotations

from desktop_agent.domain import AgentSpec, Run, RunEventKind, RunStatus, StepKind, StepStatus
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.persistence import forecasts
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory

SONNET = AgentSpec(model="claude-sonnet-5-5", system_prompt='Say "model":"claude-opus-5-5" 100%_')


def _ended(
    factory: StoreFactory,
    run_id: str,
    *,
    spec: AgentSpec = SONNET,
    status: RunStatus = RunStatus.COMPLETED,
    cost: float = 0.5,
    calls: int = 1,
    schedule_id: str | None = None,
    parent_id: str | None = None,
    forked_at_seq: int | None = None,
) -> None:
    """A run that made ``calls`` model calls of 10 s each and ended 100 s after it started."""
    store: SqlStore = factory.handle.store
    clock = factory.clock
    clock.advance(60)
    store.create_run(
        Run(
            id=run_id,
            goal="g",
            status=RunStatus.QUEUED,
            spec=spec,
            workspace="/w",
            created_at=clock.now(),
            definition_hash=spec.definition_hash,
            schedule_id=schedule_id,
            parent_id=parent_id,
            forked_from="parent" if forked_at_seq is not None else None,
            forked_at_seq=forked_at_seq,
        )
    )
    store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING, started_at=clock.now()))
    for seq in range(1, calls + 1):
        store.commit(run_id, intents=[StepIntent(seq, StepKind.MODEL_CALL, spec.model, {})])
        clock.advance(10)
        spent = cost if seq == 1 else 0.0
        store.commit(run_id, outcome=StepOutcome(seq, StepStatus.COMPLETED, {}, cost_usd=spent))
    clock.advance(100 - 10 * calls)
    store.commit(run_id, patch=RunPatch(status=status, finished_at=clock.now()))


def test_completed_runs_of_a_model_newest_first(store_factory: StoreFactory) -> None:
    opus = AgentSpec(model="claude-opus-5-5", system_prompt="x")
    _ended(store_factory, "old", cost=0.25)
    _ended(store_factory, "opus", spec=opus)  # its id is in Sonnet's prompt: not matched
    _ended(store_factory, "failed", status=RunStatus.FAILED)
    _ended(store_factory, "fork", forked_at_seq=3)  # shares its parent's steps
    _ended(store_factory, "again", forked_at_seq=0, cost=0.75)  # a whole "run again"
    _ended(store_factory, "scheduled", schedule_id="sch-1", cost=1.0)
    _ended(store_factory, "batched", parent_id="bat-1", cost=2.0)
    db = store_factory.handle.store.db

    found = forecasts.completed_runs(db, "claude-sonnet-5-5")
    assert [p.run_id for p in found] == ["batched", "scheduled", "again", "old"]
    assert [p.cost_usd for p in found] == [2.0, 1.0, 0.75, 0.25]
    assert all(p.finished_at - p.started_at == 100 for p in found if p.finished_at and p.started_at)
    assert forecasts.completed_runs(db, "claude-sonnet-5-5", limit=2)[1].run_id == "scheduled"
    assert [p.run_id for p in forecasts.completed_runs(db, "claude-opus-5-5")] == ["opus"]
    newest = forecasts.completed_runs(db, "claude-sonnet-5-5", window=4)
    assert [p.run_id for p in newest] == ["batched", "scheduled", "again"]  # not "old"
    mine = forecasts.completed_runs(db, "claude-sonnet-5-5", template="sch-1")
    assert [p.run_id for p in mine] == ["scheduled"]
    assert [p.run_id for p in forecasts.completed_runs(db, SONNET.model, template="bat-1")] == [
        "batched"
    ]


def test_model_call_times_per_run(store_factory: StoreFactory) -> None:
    _ended(store_factory, "a", calls=3)
    _ended(store_factory, "b", calls=1)
    _ended(store_factory, "c", calls=0)
    db = store_factory.handle.store.db
    assert forecasts.model_call_times(db, ["a", "b", "c"]) == {"a": (3, 30.0), "b": (1, 10.0)}


def test_the_kept_forecast_is_not_among_the_runs_events(store_factory: StoreFactory) -> None:
    _ended(store_factory, "r")
    store = store_factory.handle.store
    forecasts.record_forecast(store.db, "r", "from 3 runs", {"basis": "history"})
    store.record_event("r", RunEventKind.LATE_EFFECT, "sent anyway")
    assert [e.kind for e in store.run_events("r")] == [RunEventKind.LATE_EFFECT]
    assert forecasts.recorded_forecast(store.db, "r") == {"basis": "history"}
    assert forecasts.recorded_forecast(store.db, "none") is None
