"""The run loop on a real SQLite journal: demo runs, approvals, controls, recovery."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import (
    ApprovalState,
    CommandKind,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.errors import RateLimitedError
from desktop_agent.engine.loop import EngineConfig, restore_state
from desktop_agent.engine.state import AgentState, apply_step
from desktop_agent.tools.registry import ToolRegistry, builtin_tools
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel, UnsafeTool
from tests.helpers.polling import wait_status, wait_until


def test_demo_run_waits_for_approval_then_completes(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)

    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.wait_reason == WaitReason.APPROVAL
    (approval,) = client.approvals()
    assert approval.tool == "write_file"
    assert "overwrite report.md" in approval.rule
    draft = (workspace / "report.md").read_text()
    assert "Draft" in draft

    client.approve(approval.id)
    drain(client.store, executor)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    report = (workspace / "report.md").read_text()
    assert "## Conclusions" in report
    for name in ("alpha.md", "beta.txt", "gamma.md"):
        assert name in report
    notes = (workspace / "notes.md").read_text()
    assert notes.count("- **") == 3
    steps = client.steps(run.id)
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert all(s.status == StepStatus.COMPLETED for s in steps)
    assert done.cost_usd == pytest.approx(sum(s.cost_usd for s in steps))
    assert done.usage.input_tokens == sum(s.usage.input_tokens for s in steps)
    # Storage stays linear: model-call steps record how many messages, not the messages.
    for s in steps:
        if s.kind == StepKind.MODEL_CALL:
            # The first call also fixes the run's tool definitions.
            assert set(s.input) == (
                {"model", "messages", "tools"} if s.seq == 1 else {"model", "messages"}
            )


def test_edited_approval_runs_only_the_edited_call(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)
    (approval,) = client.approvals()
    client.approve(approval.id, {"path": "report.md", "content": "EDITED BY ANALYST\n"})
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert (workspace / "report.md").read_text() == "EDITED BY ANALYST\n"
    writes = [s for s in client.steps(run.id) if s.name == "write_file"]
    assert len(writes) == 2  # the draft, then only the edited revision
    assert writes[1].input["arguments"]["content"] == "EDITED BY ANALYST\n"
    assert client.store.get_approval(approval.id).state == ApprovalState.EDITED


def test_rejection_reason_reaches_the_model(client: Client, make_executor: MakeExecutor) -> None:
    model = ScriptedModel(
        [
            Reply("I will overwrite.", [("write_file", {"path": "x.md", "content": "new"})]),
            Reply("Understood, leaving it."),
        ]
    )
    ws = Path(client.db_path).parent / "ws-reject"
    ws.mkdir()
    (ws / "x.md").write_text("old")
    run = client.start_run("Edit x", model="claude-haiku-4-5", workspace=ws)
    executor = make_executor(model)
    drain(client.store, executor)
    (approval,) = client.approvals()
    client.reject(approval.id, "keep the old wording")
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert (ws / "x.md").read_text() == "old"
    last = model.requests[-1].messages[-1]
    result = last["content"][0]
    assert result["type"] == "tool_result"
    assert result["is_error"] is True
    assert "keep the old wording" in result["content"]


def test_decision_sent_before_the_worker_reaches_the_wait_is_kept(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)
    (approval,) = client.approvals()
    # The analyst decides while no worker runs; the command row waits in the database.
    client.approve(approval.id)
    assert client.run(run.id).status == RunStatus.WAITING
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED


def test_pause_and_resume_at_step_boundaries(
    client: Client, make_executor: MakeExecutor, run_worker_thread: object, workspace: Path
) -> None:
    model = ScriptedModel(lambda req: Reply("step", [("list_files", {})]), delay=0.05)
    run = client.start_run("Loop", model="claude-haiku-4-5", workspace=workspace, max_steps=400)
    worker = run_worker_thread(make_executor(model))  # type: ignore[operator]
    wait_until(lambda: client.run(run.id).last_seq >= 4, what="a few steps")
    client.pause(run.id)
    wait_status(client, run.id, RunStatus.PAUSED)
    paused_at = client.run(run.id).last_seq
    asked = len(model.requests)
    polls = worker.polls
    wait_until(lambda: worker.polls >= polls + 3, what="three more worker polls")
    assert client.run(run.id).last_seq == paused_at  # holds no thread, takes no step
    assert len(model.requests) == asked
    assert not worker._in_flight
    client.resume(run.id)
    wait_until(lambda: client.run(run.id).last_seq > paused_at + 2, what="steps after resume")
    client.cancel(run.id)
    wait_status(client, run.id, RunStatus.CANCELLED)


def test_cancel_interrupts_a_model_call_and_writes_a_partial_report(
    client: Client, make_executor: MakeExecutor, run_worker_thread: object, workspace: Path
) -> None:
    model = ScriptedModel([Reply("slow answer")], delay=30.0)
    run = client.start_run("Slow", model="claude-haiku-4-5", workspace=workspace)
    run_worker_thread(make_executor(model))  # type: ignore[operator]
    wait_until(lambda: model.requests, what="the model call to start")
    client.cancel(run.id)
    wait_status(client, run.id, RunStatus.CANCELLED)
    # Interrupted, not waited out: the 30 s call never gave its answer, its step failed.
    steps = client.steps(run.id)
    assert steps[0].kind == StepKind.MODEL_CALL and steps[0].status == StepStatus.FAILED
    assert steps[-1].kind == StepKind.REPORT
    assert (workspace / f"partial-report-{run.id}.md").exists()


def test_steer_note_reaches_the_next_model_call(
    client: Client, make_executor: MakeExecutor
) -> None:
    model = ScriptedModel([Reply("first", [("list_files", {})]), Reply("done")])
    run = client.start_run("Look", model="claude-haiku-4-5")
    client.steer(run.id, "focus on 2025")
    drain(client.store, make_executor(model))
    assert client.run(run.id).status == RunStatus.COMPLETED
    first_messages = model.requests[0].messages
    assert any("focus on 2025" in str(m["content"]) for m in first_messages)
    assert any(s.kind == StepKind.STEER for s in client.steps(run.id))


def test_unsafe_effect_in_flight_needs_attention_then_skip(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.txt"
    tools = ToolRegistry([*builtin_tools(), UnsafeTool(outbox)])
    model = ScriptedModel(
        [Reply("sending", [("send_message", {"to": "ceo", "text": "hi"})]), Reply("ok, done")]
    )
    client._tools = tools
    run = client.start_run("Send", model="claude-haiku-4-5", tools=["send_message"])
    executor = make_executor(model, tools=tools)
    store = client.store
    # Crash right after the intent of the unsafe step (the 2nd intent): no outcome recorded.
    cfg = EngineConfig(crash_hook=_raise_at("after_intent", 2), settings=_no_ask(client))
    with pytest.raises(_Crash):
        make_executor(model, tools=tools, config=cfg).execute(run.id)
    assert not outbox.exists()  # the effect never ran: the crash came just before it
    drain(store, executor)
    stuck = client.run(run.id)
    assert stuck.status == RunStatus.NEEDS_ATTENTION
    assert stuck.attention_seq == 2
    assert "may or may not have happened" in stuck.status_message
    client.resolve(run.id, "skip")
    drain(store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert not outbox.exists()  # skipped: never executed blindly
    last_request = model.requests[-1].messages[-1]["content"][0]
    assert "may or may not have happened" in last_request["content"]


def test_unsafe_effect_in_doubt_resolved_by_probe(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.txt"
    tools = ToolRegistry([*builtin_tools(), UnsafeTool(outbox)])
    model = ScriptedModel(
        [Reply("sending", [("send_message", {"to": "ceo", "text": "hi"})]), Reply("done")]
    )
    client._tools = tools
    run = client.start_run("Send", model="claude-haiku-4-5", tools=["send_message"])
    cfg = EngineConfig(crash_hook=_raise_at("after_effect", 2), settings=_no_ask(client))
    with pytest.raises(_Crash):
        make_executor(model, tools=tools, config=cfg).execute(run.id)
    assert outbox.read_text().count("\n") == 1  # the effect happened, its outcome was lost
    executor = make_executor(model, tools=tools)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.NEEDS_ATTENTION
    client.resolve(run.id, "probe")
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert outbox.read_text().count("\n") == 1  # probing found it done: not sent twice
    step = client.store.get_step(run.id, 2)
    assert step.status == StepStatus.COMPLETED
    assert "already happened" in step.output["content"]


def test_read_only_step_in_flight_is_executed_again(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel([Reply("look", [("list_files", {})]), Reply("done")])
    run = client.start_run("List", model="claude-haiku-4-5", workspace=workspace)
    cfg = EngineConfig(crash_hook=_raise_at("after_effect", 2), settings=_no_ask(client))
    with pytest.raises(_Crash):
        make_executor(model, config=cfg).execute(run.id)
    drain(client.store, make_executor(model))
    assert client.run(run.id).status == RunStatus.COMPLETED
    step = client.store.get_step(run.id, 2)
    assert step.attempt == 2
    assert "alpha.md" in step.output["content"]


def test_journal_that_does_not_match_is_flagged(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel([Reply("look", [("list_files", {})]), Reply("done")])
    run = client.start_run("List", model="claude-haiku-4-5", workspace=workspace)
    cfg = EngineConfig(crash_hook=_raise_at("after_intent", 2), settings=_no_ask(client))
    with pytest.raises(_Crash):
        make_executor(model, config=cfg).execute(run.id)
    # Tamper: the open step claims a different tool than the model asked for.
    with client.store.db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE steps SET name = 'read_file' WHERE run_id = ? AND seq = 2", (run.id,)
        )
    drain(client.store, make_executor(model))
    flagged = client.run(run.id)
    assert flagged.status == RunStatus.NEEDS_ATTENTION
    assert "does not match" in flagged.status_message


def test_snapshot_restore_equals_full_fold(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor(config=EngineConfig(snapshot_every=3))
    drain(client.store, executor)
    (approval,) = client.approvals()
    client.approve(approval.id)
    drain(client.store, executor)
    snap = client.store.load_snapshot(run.id)
    assert snap is not None and snap.seq > 3
    restored, open_step = restore_state(client.store, client.run(run.id))
    full = AgentState.initial(run.goal)
    for step in client.steps(run.id):
        apply_step(full, step)
    assert open_step is None
    assert restored.scalars.to_json() == full.scalars.to_json()
    assert restored.conversation.messages == full.conversation.messages


def test_long_retry_after_hibernates_without_a_thread(
    client: Client, make_executor: MakeExecutor
) -> None:
    clock = FakeClock()
    model = ScriptedModel(
        [Reply(raises=RateLimitedError("429 too many requests", retry_after=120)), Reply("ok")]
    )
    run = client.start_run("Rate", model="claude-haiku-4-5")
    executor = make_executor(model, clock=clock)
    threads_before = threading.active_count()
    drain(client.store, executor, clock=clock)
    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.wait_reason == WaitReason.RATE_LIMIT
    assert waiting.wake_at == pytest.approx(clock.now() + 120, abs=1)
    assert threading.active_count() <= threads_before
    clock.advance(60)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.WAITING  # not due yet
    clock.advance(61)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.COMPLETED
    failed, ok = client.steps(run.id)
    assert failed.status == StepStatus.FAILED and "429" in (failed.error or "")
    assert ok.status == StepStatus.COMPLETED


def test_step_budget_waits_then_extends(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        lambda req: Reply("again", [("list_files", {})]) if len(req.messages) < 8 else Reply("done")
    )
    run = client.start_run("Budget", model="claude-haiku-4-5", workspace=workspace, max_steps=4)
    executor = make_executor(model)
    drain(client.store, executor)
    held = client.run(run.id)
    assert held.status == RunStatus.WAITING and held.wait_reason == WaitReason.BUDGET
    assert "4 of 4 steps" in held.status_message
    client.extend_budget(run.id, steps=20)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED


def _no_ask(client: Client) -> Settings:
    """Engine settings that do not ask before unsafe tools (the crash is the subject)."""
    client.settings.ask_unsafe = False
    return client.settings


class _Crash(BaseException):
    pass


def _raise_at(point: str, nth: int):  # type: ignore[no-untyped-def]
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            seen["n"] += 1
            if seen["n"] == nth:
                raise _Crash(point)

    return hook


def test_a_refused_request_waits_for_the_analyst_and_resume_retries(
    client: Client, make_executor: MakeExecutor
) -> None:
    from desktop_agent.domain.errors import BadRequestError

    model = ScriptedModel(
        [Reply(raises=BadRequestError("400 prompt is too long")), Reply("fine now")]
    )
    run = client.start_run("Refused", model="claude-haiku-4-5")
    executor = make_executor(model)
    drain(client.store, executor)
    held = client.run(run.id)
    assert held.status == RunStatus.NEEDS_ATTENTION
    assert held.status_message == "400 prompt is too long"  # the port's words, as they are
    assert client.steps(run.id)[0].status == StepStatus.FAILED
    client.store.add_command(run.id, CommandKind.RESUME)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
