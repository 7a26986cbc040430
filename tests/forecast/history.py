"""Past runs of known cost and duration, written through the store as a worker writes them.

Each run is made with a definition the client prepared (its model and effort, economy mode
or streamed), claimed, given model calls of known length (the first one carries the run's
whole cost, so that the run's total is exactly the figure asked for) and ended. A store
over the same database with a clock the test moves stamps every step, so durations are
exact and the newest run is the one written last.
"""

from __future__ import annotations

import dataclasses
import itertools

from desktop_agent.client.api import Client
from desktop_agent.domain import Run, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from tests.helpers.timed_journal import Clock, timed_store

_ids = itertools.count(1)


def past_run(
    client: Client,
    clock: Clock,
    *,
    model: str = "claude-sonnet-5-5",
    effort: str = "",
    economy: bool = False,
    cost: float,
    duration: float,
    calls: int = 2,
    call_s: float = 10.0,
    schedule_id: str | None = None,
    parent_id: str | None = None,
    status: RunStatus = RunStatus.COMPLETED,
) -> Run:
    """A run that ended ``status`` after ``duration`` seconds and spent ``cost`` dollars.

    It made ``calls`` model calls of ``call_s`` seconds each; the rest of the duration is
    spent after them (tools, waits). Runs written later are newer.
    """
    assert duration >= calls * call_s
    spec, budget = client.prepare_run(model=model, effort=effort, use_defaults=False)
    spec = dataclasses.replace(spec, economy=economy)
    clock.advance(60.0)
    run = Run(
        id=f"past-{next(_ids):05d}",
        goal="A past run",
        status=RunStatus.QUEUED,
        spec=spec,
        workspace="/nowhere",
        budget=budget,
        created_at=clock.now,
        updated_at=clock.now,
        definition_hash=spec.definition_hash,
        schedule_id=schedule_id,
        parent_id=parent_id,
    )
    store = timed_store(client, clock)
    store.create_run(run)
    store.commit(run.id, patch=RunPatch(status=RunStatus.RUNNING, started_at=clock.now))
    for seq in range(1, calls + 1):
        store.commit(run.id, intents=[StepIntent(seq, StepKind.MODEL_CALL, model, {})])
        clock.advance(call_s)
        spent = cost if seq == 1 else 0.0
        outcome = StepOutcome(
            seq, StepStatus.COMPLETED, {"content": []}, usage=Usage(100, 10), cost_usd=spent
        )
        store.commit(run.id, outcome=outcome)
    clock.advance(duration - calls * call_s)
    store.commit(run.id, patch=RunPatch(status=status, finished_at=clock.now))
    return client.run(run.id)
