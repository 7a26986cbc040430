"""Budgets of every kind: the run waits with a spend report, then continues or stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage, WaitReason
from desktop_agent.engine.ports import ModelRequest
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel

PLAN = {"items": [{"text": "a", "done": True}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}


def budget_step(client: Client, run_id: str) -> dict[str, Any]:
    (step,) = [s for s in client.steps(run_id) if s.kind == StepKind.BUDGET]
    return dict(step.input)


def test_cost_is_checked_against_the_worst_case_then_extended(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        [
            Reply("plan", [("update_plan", PLAN)], cost=0.01),
            Reply("look", [("list_files", {})], cost=0.01),
            Reply("done", cost=0.01),
        ]
    )
    run = client.start_run(
        "Spend", model="claude-haiku-4-5", workspace=workspace, max_cost_usd=0.025
    )
    executor = make_executor(model)
    drain(client.store, executor)
    held = client.run(run.id)
    assert (held.status, held.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    # 0.02 spent; the next call could cost 0.01 more (worst case), which would pass 0.025.
    assert len(model.requests) == 2 and held.cost_usd == pytest.approx(0.02)
    assert "Budget reached: spent $0.02 of $0.03" in held.status_message
    report = budget_step(client, run.id)
    assert report["limit"] == "cost"
    assert report["next_call_worst_case_usd"] == pytest.approx(0.01)
    assert report["by_model"] == {"claude-haiku-4-5": pytest.approx(0.02)}
    assert [s["kind"] for s in report["by_step"]] == ["model_call", "model_call"]
    assert report["burn_rate_usd_per_hour"] > 0
    assert report["projected_cost_usd"] == pytest.approx(0.08)  # 1 of 4 plan items for $0.02
    client.extend_budget(run.id, cost_usd=1.0)
    drain(client.store, executor)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED and done.budget.max_cost_usd == pytest.approx(1.025)
    assert len(model.requests) == 3


def test_stopping_at_a_budget_leaves_a_partial_report(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        [Reply("Alpha looks promising.", [("update_plan", PLAN)], cost=0.03), Reply("never")]
    )
    run = client.start_run(
        "Spend", model="claude-haiku-4-5", workspace=workspace, max_cost_usd=0.035
    )
    executor = make_executor(model)
    drain(client.store, executor)
    assert client.run(run.id).wait_reason == WaitReason.BUDGET
    client.stop(run.id)
    drain(client.store, executor)
    ended = client.run(run.id)
    assert ended.status == RunStatus.STOPPED and "partial report" in ended.status_message
    assert len(model.requests) == 1
    report = (workspace / f"partial-report-{run.id}.md").read_text()
    assert "Alpha looks promising." in report and "- [x] a" in report and "- [ ] b" in report
    steps = client.steps(run.id)
    assert steps[-1].kind == StepKind.REPORT and steps[-1].status == StepStatus.COMPLETED
    assert steps[-1].output["path"] == f"partial-report-{run.id}.md"
    assert "Alpha looks promising." in steps[-1].output["report"]
    budget = [s for s in steps if s.kind == StepKind.BUDGET]
    assert budget[0].status == StepStatus.FAILED  # the wait is closed, not left open


def test_tokens_are_checked_after_each_call(client: Client, make_executor: MakeExecutor) -> None:
    model = ScriptedModel(
        [
            Reply("one", [("list_files", {})], usage=Usage(100, 20)),
            Reply("two", [("list_files", {})], usage=Usage(100, 20)),
            Reply("done", usage=Usage(100, 20)),
        ]
    )
    run = client.start_run("Tokens", model="claude-haiku-4-5", max_tokens_budget=200)
    executor = make_executor(model)
    drain(client.store, executor)
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.BUDGET and "240 of 200 tokens" in held.status_message
    assert len(model.requests) == 2
    client.extend_budget(run.id, tokens=1000)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED


def _slow_model(clock: FakeClock, replies: list[Reply], seconds: float) -> ScriptedModel:
    """Each call takes ``seconds`` of (fake) time."""
    state = {"i": 0}

    def decide(_req: ModelRequest) -> Reply:
        clock.advance(seconds)
        state["i"] += 1
        return replies[min(state["i"], len(replies)) - 1]

    return ScriptedModel(decide)


@pytest.mark.parametrize("count_waiting", [False, True])
def test_time_spent_waiting_on_the_analyst_does_not_count(
    client: Client, make_executor: MakeExecutor, workspace: Path, count_waiting: bool
) -> None:
    clock = FakeClock()
    model = _slow_model(clock, [Reply("look", [("list_files", {})]), Reply("done")], 20)
    run = client.start_run(
        "Time",
        model="claude-haiku-4-5",
        workspace=workspace,
        max_time_s=100,
        approval_overrides={"list_files": "ask"},
        count_waiting_time=count_waiting,
    )
    executor = make_executor(model, clock=clock)
    drain(client.store, executor, clock=clock)
    (approval,) = client.approvals()
    clock.advance(3600)  # the analyst takes an hour to answer
    client.approve(approval.id)
    drain(client.store, executor, clock=clock)
    ended = client.run(run.id)
    if count_waiting:
        assert ended.wait_reason == WaitReason.BUDGET
        assert budget_step(client, run.id)["limit"] == "time"
        client.extend_budget(run.id, time_s=7200)
        drain(client.store, executor, clock=clock)
        assert client.run(run.id).status == RunStatus.COMPLETED
    else:
        assert ended.status == RunStatus.COMPLETED, ended.status_message
        assert ended.active_seconds == pytest.approx(40, abs=1)


def test_the_runs_own_timer_waits_count_towards_time(
    client: Client, make_executor: MakeExecutor
) -> None:
    clock = FakeClock()
    model = _slow_model(clock, [Reply("pause", [("wait", {"seconds": 55})]), Reply("done")], 10)
    run = client.start_run("Wait", model="claude-haiku-4-5", max_time_s=60)
    executor = make_executor(model, clock=clock)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).wait_reason == WaitReason.TIMER
    clock.advance(55)
    drain(client.store, executor, clock=clock)
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.BUDGET, held.status_message
    assert "worked 1m05s of 1m" in held.status_message
    client.extend_budget(run.id, time_s=600)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.COMPLETED


def test_time_worked_within_one_activation_adds_up(
    client: Client, make_executor: MakeExecutor
) -> None:
    # Five calls of 15 s each, with no wait in between: the 60 s limit is reached during the
    # fifth call, in the same activation, not only once the run happens to suspend.
    looks = [Reply(f"look {i}", [("list_files", {})]) for i in range(8)]
    clock = FakeClock()
    model = _slow_model(clock, [*looks, Reply("done")], 15)
    run = client.start_run("Busy", model="claude-haiku-4-5", max_time_s=60)
    executor = make_executor(model, clock=clock)
    drain(client.store, executor, clock=clock)
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.BUDGET, held.status_message
    assert budget_step(client, run.id)["limit"] == "time"
    assert len(model.requests) == 4  # 60 s worked after four calls: the fifth is not made
    assert held.active_seconds == pytest.approx(60, abs=1)
