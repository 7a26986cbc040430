"""Stuck runs are flagged and told once; a dead worker's runs go to the next worker."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from desktop_agent.client.api import Client
from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass, RunStatus, WorkerInfo
from desktop_agent.domain.scheduling import StuckRun
from desktop_agent.engine.ports import ToolContext, ToolResult
from desktop_agent.scheduler.service import SchedulerConfig
from desktop_agent.tools.registry import ToolRegistry, builtin_tools
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_status
from tests.scheduler.conftest import RigFactory, wait_until

HAIKU = "claude-haiku-4-5"


class HangingTool:
    """A read-only tool that blocks until the test lets it go (a hung download)."""

    name = "fetch_slowly"
    version = "1"
    description = "Fetch something very slowly."
    input_schema: Mapping[str, JSON] = {"type": "object", "properties": {}}
    effect = EffectClass.READ_ONLY
    approval = ApprovalPolicy.ALWAYS

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        self.entered.set()
        self.release.wait(30)
        return ToolResult("fetched")

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        return None


def test_a_run_without_progress_is_flagged_and_told_once(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    tool = HangingTool()
    tools = ToolRegistry([*builtin_tools(), tool])
    client._tools = tools
    told: list[StuckRun] = []
    model = ScriptedModel([Reply("fetching", [("fetch_slowly", {})]), Reply("done")])
    run = client.start_run("fetch", model=HAIKU, tools=["fetch_slowly"])
    config = SchedulerConfig(sync_s=0.1, housekeeping_s=0.1, stuck_after_s=30 * 60)
    rig = make_rig(model, tools=tools, config=config, on_stuck=told.append)
    try:
        assert tool.entered.wait(10)
        clock.advance(29 * 60)
        rig.settle(worker=False)
        assert told == [] and rig.sched.stuck_runs() == []
        clock.advance(61)
        wait_until(lambda: len(told) == 1, what="the stuck notification")
        rig.settle(worker=False)
        (stuck,) = told
        assert stuck.run_id == run.id and "no progress for 30 min" in stuck.message
        assert [s.run_id for s in rig.sched.stuck_runs()] == [run.id]
        clock.advance(3600)
        rig.settle(worker=False)
        assert len(told) == 1  # told once, not every round
        assert rig.status(run.id) == RunStatus.RUNNING
    finally:
        tool.release.set()
    wait_status(rig.client, run.id, RunStatus.COMPLETED)
    wait_until(lambda: rig.sched.stuck_runs() == [], what="the flag to clear")
    assert len(told) == 1


def test_runs_of_a_worker_whose_lease_expired_are_recovered_by_the_next(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    now = clock.now()
    run = client.start_run("orphan", model=HAIKU)
    gone = WorkerInfo("elsewhere:4242:abcdef", "elsewhere", 4242, now - 60, now)
    client.store.register_worker(gone, 0.0)
    assert client.store.claim_run(run.id, gone.id, now, 30.0)
    rig = make_rig(ScriptedModel([Reply("done")]), poll_s=0.05)
    rig.settle()
    assert client.run(run.id).lease_owner == gone.id  # its lease still holds
    assert client.run(run.id).status == RunStatus.QUEUED

    clock.advance(31)  # the lease expires: the run is free for the next worker
    wait_status(rig.client, run.id, RunStatus.COMPLETED)
    # The worker lets go of the lease after the activation ends (on its next poll).
    wait_until(lambda: client.run(run.id).lease_owner is None, what="the lease released")
    assert [i.id for i, _ in client.store.list_workers()].count(gone.id) == 1

    clock.advance(91)  # three leases without a heartbeat: the worker is dead
    wait_until(
        lambda: gone.id not in [i.id for i, _ in client.store.list_workers()],
        what="the dead worker marked stopped",
    )
