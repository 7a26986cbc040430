"""Agent SDK runs from the command line: ``desktop-agent run GOAL --agent agent-sdk``.

The run is queued with its agent, a worker drives the session against the contract fake,
the call the rules ask about waits in ``approvals``, ``approve`` lets it run, and ``show``
prints the session's steps as it prints our own runs'.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli.commands import main
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.agents import AgentKind
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse

MODEL = "claude-sonnet-5-5"


def script(body: dict[str, Any], _index: int) -> Stream:
    answered = any(
        block.get("type") == "tool_result"
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    )
    if not answered:
        return Stream([Text("Creating the file."), ToolUse("Bash", {"command": "touch done.txt"})])
    return Stream([Text("The file is there.")])


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(script) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield fake


def cli(client: Client, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_run_with_the_agent_sdk_from_the_command_line(
    client: Client, api: FakeAnthropic, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    out = cli(
        client, capsys, "--json", "run", "Create done.txt", "--agent", "agent-sdk",
        "--model", MODEL, "--workspace", str(ws), "--detach",
    )  # fmt: skip
    run_id = json.loads(out)["id"]
    assert client.run(run_id).spec.agent == AgentKind.AGENT_SDK
    drain(client.store, build_executor(client.store, client.settings))

    assert "Bash" in cli(client, capsys, "approvals")
    [approval] = client.approvals()
    cli(client, capsys, "approve", approval.id)
    drain(client.store, build_executor(client.store, client.settings))

    assert client.run(run_id).status == RunStatus.COMPLETED
    assert (ws / "done.txt").exists()
    shown = cli(client, capsys, "show", run_id)
    assert "Bash" in shown and "The file is there." in shown


def test_the_demo_model_is_refused_for_an_agent_sdk_run(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["--db", str(client.db_path), "run", "x", "--agent", "agent-sdk", "--model", "demo"]
    )
    assert code != 0
    assert "needs a Claude model" in capsys.readouterr().err
    assert client.runs() == []
