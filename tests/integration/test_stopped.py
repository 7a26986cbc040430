"""Stop is not the end: a stopped run keeps its partial report and resumes from its journal.

It can still be cancelled, and a note or a budget extension does not wake it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import (
    ApprovalState,
    CommandKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.errors import InvalidStateError
from desktop_agent.engine.loop import RESUMED_NOTE
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

HAIKU = "claude-haiku-4-5"


def _fingerprint(steps: list[Step]) -> list[tuple[int, str, str, str, object]]:
    return [(s.seq, str(s.kind), s.name, str(s.status), s.output) for s in steps]


def test_stop_keeps_a_partial_report_and_resume_continues_the_same_journal(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        [Reply("First I list the folder.", [("list_files", {})]), Reply("Three files. Done.")]
    )
    run = client.start_run(
        "List", model=HAIKU, workspace=workspace, approval_overrides={"list_files": "ask"}
    )
    executor = make_executor(model)
    drain(client.store, executor)
    assert client.run(run.id).wait_reason == WaitReason.APPROVAL

    client.stop(run.id)
    drain(client.store, executor)
    stopped = client.run(run.id)
    assert stopped.status == RunStatus.STOPPED
    assert not stopped.status.is_terminal and stopped.status.is_resumable
    assert "partial report" in stopped.status_message and stopped.finished_at is None
    before = client.steps(run.id)
    assert before[-1].kind == StepKind.REPORT and before[-1].status == StepStatus.COMPLETED
    assert "First I list the folder." in before[-1].output["report"]
    assert (workspace / f"partial-report-{run.id}.md").is_file()
    assert [a.state for a in client.approvals(None)] == [ApprovalState.EXPIRED]
    with pytest.raises(InvalidStateError, match="already stopped"):
        client.stop(run.id)
    with pytest.raises(InvalidStateError, match="nothing to pause"):
        client.pause(run.id)

    # A note to a stopped run waits for it to go on: it wakes nothing.
    client.steer(run.id, "only count the Markdown files")
    assert drain(client.store, executor).activations == 0
    assert client.run(run.id).status == RunStatus.STOPPED

    client.resume(run.id)
    drain(client.store, executor)
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.APPROVAL)
    after = client.steps(run.id)
    # Extended, not restarted: every step recorded before the stop is still there, unchanged.
    assert _fingerprint(after[: len(before)]) == _fingerprint(before)
    new = after[len(before) :]
    notes = [s.input["text"] for s in new if s.kind == StepKind.STEER]
    assert sorted(notes) == sorted([RESUMED_NOTE, "only count the Markdown files"])
    assert [s.kind for s in new[:2]] == [StepKind.STEER, StepKind.STEER]
    assert new[-1].kind == StepKind.APPROVAL  # the call that waited is asked about again
    assert len(model.requests) == 1  # the model was not asked to start over

    (pending,) = client.approvals()
    client.approve(pending.id)
    drain(client.store, executor)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED and done.finished_at is not None
    assert len(model.requests) == 2
    told = str(model.requests[1].messages)
    assert RESUMED_NOTE in told and "only count the Markdown files" in told
    assert [s.kind for s in client.steps(run.id)].count(StepKind.REPORT) == 1
    assert client.store.pending_commands(run.id) == []


def test_a_resume_sent_right_after_a_stop_is_carried_out_not_dropped(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel([Reply("Need input.", [("ask_user", {"question": "Which year?"})])])
    run = client.start_run("Ask", model=HAIKU, workspace=workspace)
    executor = make_executor(model)
    drain(client.store, executor)
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT
    client.store.add_command(run.id, CommandKind.STOP)
    client.store.add_command(run.id, CommandKind.RESUME)
    model.replies = [Reply("Going on without an answer.")]
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    kinds = [s.kind for s in client.steps(run.id)]
    assert kinds.index(StepKind.REPORT) < kinds.index(StepKind.STEER)
    with client.store.db.read() as conn:
        results = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT result FROM commands WHERE run_id = ? ORDER BY id", (run.id,)
            )
        ]
    assert results[0] == "stopping" and results[1].startswith("resumed after a stop")


def test_cancel_ends_a_stopped_run(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)
    client.stop(run.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.STOPPED
    client.cancel(run.id)
    drain(client.store, executor)
    ended = client.run(run.id)
    assert ended.status == RunStatus.CANCELLED and ended.finished_at is not None
    with pytest.raises(InvalidStateError, match="nothing to resume"):
        client.resume(run.id)


def test_a_budget_extension_to_a_stopped_run_keeps_it_stopped(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace, max_steps=50)
    executor = make_executor()
    drain(client.store, executor)
    client.stop(run.id)
    drain(client.store, executor)
    last = client.run(run.id).last_seq
    client.extend_budget(run.id, steps=5)
    drain(client.store, executor)
    still = client.run(run.id)
    assert still.status == RunStatus.STOPPED and still.budget.max_steps == 55
    assert still.last_seq == last
