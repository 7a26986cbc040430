"""Commands are rows: each is applied once, at a boundary, or explicitly ignored."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import CommandKind, RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.engine.ports import RunPatch
from desktop_agent.tools.files import ListFiles
from desktop_agent.tools.registry import ToolRegistry, builtin_tools
from tests.conftest import MakeExecutor, drain


def test_note_sent_while_waiting_for_approval_is_delivered_after_the_decision(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)
    assert client.run(run.id).wait_reason == WaitReason.APPROVAL
    client.steer(run.id, "keep it short")
    # The note alone does not wake the run: the worker goes idle instead of spinning.
    worker = drain(client.store, executor)
    assert worker.activations == 0
    assert client.store.pending_commands(run.id)[0].kind == CommandKind.STEER
    (approval,) = client.approvals()
    client.approve(approval.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    steps = client.steps(run.id)
    approval_seq = next(s.seq for s in steps if s.kind == StepKind.APPROVAL)
    steer = next(s for s in steps if s.kind == StepKind.STEER)
    assert steer.seq > approval_seq
    assert steer.input == {"text": "keep it short"}
    assert client.store.pending_commands(run.id) == []


def test_commands_that_do_not_apply_are_marked_ignored(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    client.store.add_command(run.id, CommandKind.ANSWER, {"text": "42"})
    client.store.add_command(run.id, CommandKind.RESOLVE, {"action": "skip"})
    drain(client.store, make_executor())
    assert client.store.pending_commands(run.id) == []
    with client.store.db.read() as conn:
        results = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT result FROM commands WHERE run_id = ? ORDER BY id", (run.id,)
            )
        ]
    assert results[0].startswith("ignored: the run asked no question")
    assert results[1].startswith("ignored: no step of this run is in doubt")


def test_commands_to_an_ended_run_are_ignored_not_replayed(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    client.cancel(run.id)
    executor = make_executor()
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.CANCELLED
    client.store.add_command(run.id, CommandKind.PAUSE)
    worker = drain(client.store, executor)
    assert worker.activations == 1
    assert client.store.pending_commands(run.id) == []
    assert client.run(run.id).status == RunStatus.CANCELLED


def test_cancel_during_an_approval_closes_the_wait_and_the_request(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    executor = make_executor()
    drain(client.store, executor)
    (approval,) = client.approvals()
    client.cancel(run.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.CANCELLED
    assert client.approvals() == []
    assert client.store.get_approval(approval.id).decision_note.startswith("the run ended")
    steps = client.steps(run.id)
    assert all(s.status != StepStatus.STARTED for s in steps)
    assert steps[-1].kind == StepKind.REPORT
    assert (workspace / f"partial-report-{run.id}.md").read_text().startswith("# Partial report")


class _ListFilesV2(ListFiles):
    version = "2"


def test_changed_tool_version_is_flagged_and_accepted(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    old_hash = run.definition_hash
    tools = ToolRegistry([*(t for t in builtin_tools() if t.name != "list_files"), _ListFilesV2()])
    executor = make_executor(tools=tools)
    drain(client.store, executor)
    flagged = client.run(run.id)
    assert flagged.status == RunStatus.NEEDS_ATTENTION
    assert "'list_files' changed from version 1 to 2" in flagged.status_message
    assert client.steps(run.id) == []  # nothing ran under the new definition
    client.resolve(run.id, "accept")
    drain(client.store, executor)
    accepted = client.run(run.id)
    assert accepted.status == RunStatus.WAITING  # went on to the demo's approval
    assert ("list_files", "2") in accepted.spec.tools
    assert accepted.definition_hash != old_hash


def test_a_parked_run_is_retried_by_resume(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=workspace)
    client.store.commit(
        run.id,
        patch=RunPatch(status=RunStatus.NEEDS_ATTENTION, status_message="Internal error (boom)"),
    )
    executor = make_executor()
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.NEEDS_ATTENTION
    client.store.add_command(run.id, CommandKind.RESUME)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.WAITING  # ran on to the demo's approval
