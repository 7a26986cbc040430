"""Runs on the Claude Agent SDK, driven by a worker, against the contract fake of the API.

The SDK drives its bundled Claude Code CLI, which calls the fake Messages API
(``ANTHROPIC_BASE_URL``) for each model turn; the session is kept in the journal's database
and its messages become the run's steps. Each test starts its run through the client
(``agent="agent-sdk"``) and lets an in-process worker drain it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.domain.agents import AgentKind
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse

MODEL = "claude-sonnet-5-5"


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request carries, oldest first."""
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The fake API with a script each test sets; the CLI reaches it through the env."""
    fake = FakeAnthropic([])
    with fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield fake


def test_a_run_reads_a_file_and_answers_with_its_steps_usage_and_cost_in_the_journal(
    client: Client, api: FakeAnthropic, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("The market grew 4% in 2025.\n")

    def script(body: dict[str, Any], _index: int) -> Stream:
        results = tool_results(body)
        if not results:
            return Stream(
                [Text("Reading the notes."), ToolUse("Read", {"file_path": str(ws / "notes.md")})],
                input_tokens=1200,
                output_tokens=40,
            )
        return Stream([Text("The market grew 4% in 2025.")], input_tokens=1500, output_tokens=12)

    api.script = script
    run = client.start_run(
        "How much did the market grow?", model=MODEL, workspace=ws, agent="agent-sdk"
    )
    assert run.spec.agent == AgentKind.AGENT_SDK and run.spec.tools == ()
    drain(client.store, build_executor(client.store, client.settings))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert done.status_message.startswith("The market grew 4%")
    assert done.spec.session_id  # the session the SDK named
    steps = client.store.load_steps(run.id)
    assert [(s.kind, s.name, s.status) for s in steps] == [
        (StepKind.MODEL_CALL, MODEL, StepStatus.COMPLETED),
        (StepKind.TOOL_CALL, "Read", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, MODEL, StepStatus.COMPLETED),
    ]
    first, read, last = steps
    assert [b["type"] for b in first.output["content"]][-1] == "tool_use"
    assert "4% in 2025" in read.output["content"] and not read.output["is_error"]
    assert last.output["content"][-1]["text"] == "The market grew 4% in 2025."
    assert first.usage.input_tokens == 1200 and last.usage.input_tokens == 1500
    assert first.cost_usd > 0 and last.cost_usd > 0
    assert done.cost_usd == pytest.approx(first.cost_usd + last.cost_usd)
    assert done.usage.input_tokens == 2700
    bodies = [json.dumps(b) for b in api.bodies()]
    assert all(MODEL in b for b in bodies) and len(bodies) == 2


def test_without_an_api_key_the_run_waits_for_one_and_calls_nothing(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeAnthropic([Stream([Text("never")])]) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        run = client.start_run("x", model=MODEL, workspace=tmp_path / "ws", agent="agent-sdk")
        drain(client.store, build_executor(client.store, client.settings))
        waiting = client.run(run.id)
        assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.CREDENTIALS)
        assert "no API key" in waiting.status_message
        assert fake.requests == [] and client.store.load_steps(run.id) == []
