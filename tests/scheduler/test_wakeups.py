"""Wake-ups: timers, rate-limit waits and approval deadlines, woken by the scheduler's jobs.

The worker's database poll is slowed to 30 s in these tests: a run that wakes within a
few seconds of its time was woken by an APScheduler job nudging the worker.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.domain.errors import RateLimitedError
from desktop_agent.engine.ports import ModelRequest
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_status
from tests.scheduler.conftest import RigFactory, answered, goal_number, wait_until

HAIKU = "claude-haiku-4-5"


def held_threads() -> list[str]:
    """Names of the live threads, leaving out the worker's scheduled-backup thread.

    That thread comes and goes on its own schedule (a fresh database is backed up at once,
    and the check runs once a minute of the test's clock); it holds no run.
    """
    return [t.name for t in threading.enumerate() if t.name != "backup"]


def test_500_runs_waiting_on_timers_hold_no_thread_and_each_wakes_at_its_time(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    base = clock.now()

    def wake_of(k: int) -> float:
        return base + 60.0 * (k + 1)

    def script(req: ModelRequest) -> Reply:
        if answered(req.messages):
            return Reply("awake")
        return Reply("sleeping", [("wait", {"until": wake_of(goal_number(req.messages))})])

    model = ScriptedModel(script)
    ids = [client.start_run(f"timer {k}", model=HAIKU, tools=["wait"]).id for k in range(500)]
    threads_before = len(held_threads())
    rig = make_rig(model, max_runs=8)
    # Worker pool (8), its loop, APScheduler's loop and its two job threads.
    bound = threads_before + 8 + 1 + 1 + 2

    def statuses() -> list[RunStatus]:
        by_id = rig.statuses()
        return [by_id[i] for i in ids]

    wait_until(lambda: statuses().count(RunStatus.WAITING) == 500, 90, "500 waiting runs")
    rig.settle()
    assert len(held_threads()) <= bound, held_threads()
    waiting = {r.id: r for r in rig.runs()}
    for k, run_id in enumerate(ids):
        run = waiting[run_id]
        assert run.wait_reason == WaitReason.TIMER
        assert run.wake_at == wake_of(k)
        assert run.lease_owner is None

    for k in (0, 1, 99, 100, 317, 499):
        clock.advance(wake_of(k) - clock.now())
        wait_until(
            lambda k=k: statuses()[: k + 1].count(RunStatus.COMPLETED) == k + 1,  # type: ignore[misc]
            30,
            f"runs 0..{k} awake",
        )
        now_statuses = statuses()
        assert set(now_statuses[k + 1 :]) <= {RunStatus.WAITING}, f"woke early at {k}"
        assert len(held_threads()) <= bound, held_threads()

    for k, run_id in enumerate(ids):
        steps = client.steps(run_id)
        sleeps = [s for s in steps if s.kind == StepKind.SLEEP]
        assert len(sleeps) == 1 and sleeps[0].status == StepStatus.COMPLETED
        assert sleeps[0].attempt == 1
        assert sleeps[0].finished_at is not None and sleeps[0].finished_at >= wake_of(k)
    # One call before each sleep, one after: every run woke exactly once.
    assert len(model.requests) == 1000


def test_a_timer_wakes_its_run_on_time_through_a_real_apscheduler_job(
    client: Client, make_rig: RigFactory
) -> None:
    model = ScriptedModel(
        lambda req: (
            Reply("awake") if answered(req.messages) else Reply("nap", [("wait", {"seconds": 1.5})])
        )
    )
    run = client.start_run("nap 1", model=HAIKU, tools=["wait"])
    # The worker polls once an hour: only the scheduler's job can wake the run in time.
    rig = make_rig(model, real_time=True, poll_s=3600.0)
    wait_status(rig.client, run.id, RunStatus.WAITING, what="the run to sleep")
    wake_at = client.run(run.id).wake_at
    assert wake_at is not None
    # The scheduler sets the job once it hears the activation ended, just after the status.
    wait_until(lambda: f"wake:{run.id}" in rig.service.job_ids(), 10, "the wake-up job")
    wait_status(rig.client, run.id, RunStatus.COMPLETED)
    (sleep,) = [s for s in client.steps(run.id) if s.kind == StepKind.SLEEP]
    assert sleep.finished_at is not None
    assert wake_at <= sleep.finished_at  # not before its time
    assert f"wake:{run.id}" not in rig.service.job_ids()


@pytest.mark.parametrize("default", ["approve", "reject"])
def test_an_approval_deadline_applies_its_default_action(
    client: Client, make_rig: RigFactory, clock: FakeClock, tmp_path: Path, default: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "x.md").write_text("old\n")
    model = ScriptedModel(
        [Reply("overwrite", [("write_file", {"path": "x.md", "content": "new\n"})]), Reply("ok")]
    )
    settings = client.settings.updated({"approval_deadline_s": 3600, "approval_default": default})
    run = client.start_run("edit x", model=HAIKU, workspace=ws, tools=["write_file"])
    rig = make_rig(model, engine_settings=settings)
    wait_until(lambda: bool(client.approvals()), 10, "the approval")
    (approval,) = client.approvals()
    assert approval.deadline == clock.now() + 3600
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.APPROVAL and held.wake_at == approval.deadline

    clock.advance(3599)
    rig.settle()
    assert rig.status(run.id) == RunStatus.WAITING
    clock.advance(1)
    wait_status(rig.client, run.id, RunStatus.COMPLETED)
    decided = client.store.get_approval(approval.id)
    assert decided.state == ApprovalState.EXPIRED
    assert decided.decided_at == approval.deadline
    assert f"default action ({default})" in decided.decision_note
    if default == "approve":
        assert (ws / "x.md").read_text() == "new\n"
        assert "wrote x.md" in str(model.requests[-1].messages)
    else:
        assert (ws / "x.md").read_text() == "old\n"
        assert "default action (reject)" in str(model.requests[-1].messages)


def test_a_rate_limit_wait_is_woken_by_the_scheduler(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    model = ScriptedModel(
        [Reply(raises=RateLimitedError("429 slow down", retry_after=900)), Reply("ok")]
    )
    run = client.start_run("rate", model=HAIKU)
    rig = make_rig(model)
    wait_status(rig.client, run.id, RunStatus.WAITING, what="the rate-limit wait")
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.RATE_LIMIT and held.wake_at == clock.now() + 900
    clock.advance(899)
    rig.settle()
    assert rig.status(run.id) == RunStatus.WAITING
    clock.advance(1)
    wait_status(rig.client, run.id, RunStatus.COMPLETED)
    assert len(model.requests) == 2
