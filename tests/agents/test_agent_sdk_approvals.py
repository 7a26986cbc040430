"""Approvals of Agent SDK runs in the analyst's inbox.

A call the analyst's rules ask about (``ask_unsafe``: Claude Code's ``Bash`` acts on the
world) is deferred by the hook desktop-agent registers: the session stops, the run waits
on an approval the inbox lists with the tool, its arguments, the model's reason and the
rule, holding no thread. The decision resumes the session from the journal's store: the
call runs once (as approved, or as edited), or the model reads the analyst's refusal.
Each test runs on a SQLite file and on the tests' PostgreSQL server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus, StepKind, StepStatus
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers import postgres
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse

MODEL = "claude-sonnet-5-5"
COMMAND = {"command": "echo effect >> effect.txt", "description": "Append to effect.txt"}


def results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def script(body: dict[str, Any], _index: int) -> Stream:
    """Ask to run the command; once its result is in, say what came back."""
    results = results_of(body)
    if not results:
        return Stream([Text("I will append a line to effect.txt."), ToolUse("Bash", COMMAND)])
    content = results[-1].get("content")
    return Stream([Text(f"Done. The command said: {content}")])


@pytest.fixture(params=postgres.BACKENDS)
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The database, as a SQLite file or on the tests' PostgreSQL server."""
    with postgres.database_for(tmp_path / "data", request.param):
        yield tmp_path / "data" / "desktop-agent.db"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(script) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield fake


def start(client: Client, ws: Path) -> str:
    ws.mkdir(exist_ok=True)
    run = client.start_run(
        "Append a line to effect.txt", model=MODEL, workspace=ws, agent="agent-sdk"
    )
    drain(client.store, build_executor(client.store, client.settings))
    return run.id


def test_a_call_the_rules_ask_about_waits_in_the_inbox_and_runs_once_approved(
    client: Client, api: FakeAnthropic, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    run_id = start(client, ws)
    waiting = client.run(run_id)
    assert (waiting.status, str(waiting.wait_reason)) == (RunStatus.WAITING, "approval")
    assert not (ws / "effect.txt").exists()
    [approval] = client.approvals()
    assert (approval.run_id, approval.tool, approval.arguments) == (run_id, "Bash", COMMAND)
    assert approval.reason == "I will append a line to effect.txt."
    assert "acts on the outside world" in approval.rule
    assert len(api.requests) == 1  # the session stopped at the call: no thread waits

    client.approve(approval.id)
    drain(client.store, build_executor(client.store, client.settings))

    done = client.run(run_id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert (ws / "effect.txt").read_text() == "effect\n"  # it ran, once
    steps = client.store.load_steps(run_id)
    assert [(s.kind, s.name) for s in steps] == [
        (StepKind.MODEL_CALL, MODEL),
        (StepKind.APPROVAL, "approval"),
        (StepKind.TOOL_CALL, "Bash"),
        (StepKind.MODEL_CALL, MODEL),
    ]
    assert all(s.status == StepStatus.COMPLETED for s in steps)
    assert steps[1].output["decisions"][0]["state"] == "approved"
    use_id = steps[0].output["content"][-1]["id"]
    assert steps[2].input == {"tool_use_id": use_id, "arguments": COMMAND}
    assert not steps[2].output["is_error"]
    assert client.approvals() == []
    assert client.approvals(ApprovalState.APPROVED)[0].id == approval.id
    # The model's next call carries the command's result, in the resumed session.
    assert not results_of(api.bodies()[-1])[-1].get("is_error")


def test_an_edited_call_runs_as_edited(client: Client, api: FakeAnthropic, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run_id = start(client, ws)
    [approval] = client.approvals()
    edited = {"command": "echo edited >> effect.txt", "description": "Append, edited"}
    client.approve(approval.id, arguments=edited, note="a different line")
    drain(client.store, build_executor(client.store, client.settings))

    assert client.run(run_id).status == RunStatus.COMPLETED
    assert (ws / "effect.txt").read_text() == "edited\n"
    call = next(s for s in client.store.load_steps(run_id) if s.kind == StepKind.TOOL_CALL)
    assert call.input["arguments"] == edited


def test_a_rejected_call_never_runs_and_the_model_reads_why(
    client: Client, api: FakeAnthropic, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    run_id = start(client, ws)
    [approval] = client.approvals()
    client.reject(approval.id, "no writes today")
    drain(client.store, build_executor(client.store, client.settings))

    done = client.run(run_id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert not (ws / "effect.txt").exists()
    refusal = results_of(api.bodies()[-1])[-1]
    assert refusal["is_error"] and "no writes today" in str(refusal["content"])
    steps = client.store.load_steps(run_id)
    assert [s.kind for s in steps] == [StepKind.MODEL_CALL, StepKind.APPROVAL, StepKind.MODEL_CALL]
    assert "no writes today" in done.status_message
