"""The engine's side of fencing, with a worker in a thread on a real database.

A test tool looks at the run's lease in the database at the moment its effect starts, and
at its point of no return: the lease must outlast the effect's timeout there, even though
the worker's own lease is only one second. Another test tool finds, right before its
point of no return, that another worker took the run: it must not act, and the worker
must stop without writing to the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import JSON, EffectClass, RunEventKind, RunStatus
from desktop_agent.engine.ports import ToolContext, ToolResult
from desktop_agent.tools.registry import ToolRegistry
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.fakes import QuietTool, ScriptedModel, call_once

TIMEOUT_S = 20.0


class LeaseProbe(QuietTool):
    """A test tool that reads the run's lease in the database as it acts."""

    name = "lease_probe"
    description = "Look at the lease."
    effect = EffectClass.IDEMPOTENT

    def __init__(self, client: Client, before_last_check: Callable[[str], None]) -> None:
        self.client = client
        self.before_last_check = before_last_check
        self.seen: list[tuple[str, float]] = []
        self.acted = 0

    def _left(self, run_id: str) -> float:
        expires = self.client.run(run_id).lease_expires_at
        assert expires is not None
        return expires - time.time()

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float:
        return TIMEOUT_S

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        self.seen.append(("start", self._left(ctx.run_id)))
        self.before_last_check(ctx.run_id)
        ctx.check_lease()
        self.seen.append(("last check", self._left(ctx.run_id)))
        self.acted += 1
        return ToolResult("done")


def _run(client: Client, make_executor: MakeExecutor, probe: LeaseProbe) -> str:
    client._tools.add(probe)
    run_id = client.start_run("probe the lease", model="demo", tools=["lease_probe"]).id
    executor = make_executor(
        ScriptedModel(call_once("lease_probe", saying="Looking.", then="Done.")),
        tools=ToolRegistry([probe]),
    )
    config = WorkerConfig(max_runs=1, until_idle=True, poll_s=0.01, lease_s=1.0)
    Worker(client.store, executor, config).run()
    return run_id


def test_an_effect_starts_only_on_a_lease_that_outlasts_its_timeout(
    client: Client, make_executor: MakeExecutor
) -> None:
    probe = LeaseProbe(client, lambda _run_id: None)
    run_id = _run(client, make_executor, probe)

    assert client.run(run_id).status == RunStatus.COMPLETED
    assert [what for what, _ in probe.seen] == ["start", "last check"]
    for what, left in probe.seen:  # the worker's lease is 1 s; the effect may take 20 s
        assert left > TIMEOUT_S, (what, left)


def test_an_effect_whose_run_was_taken_over_before_its_last_check_does_not_act(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    def take_over(run_id: str) -> None:
        # As if this worker froze here: its lease ran out and worker B claimed the run.
        run = client.run(run_id)
        assert run.lease_owner is not None
        lease = client.store.claim_run(run_id, "worker-b", time.time(), 30.0, [run.lease_owner])
        assert lease is not None and lease.epoch == 2

    probe = LeaseProbe(client, take_over)
    run_id = _run(client, make_executor, probe)

    assert probe.acted == 0
    run = client.run(run_id)
    assert (run.status, run.lease_owner, run.lease_epoch) == (RunStatus.RUNNING, "worker-b", 2)
    step = client.steps(run_id)[-1]
    assert (step.name, str(step.status)) == ("lease_probe", "started")  # left for B
    (event,) = client.events(run_id)
    assert event.kind == RunEventKind.ABANDONED_EFFECT and event.seq == step.seq
    assert "gave up lease_probe (step 2) before doing it" in event.message
