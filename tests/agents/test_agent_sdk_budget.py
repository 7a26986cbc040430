"""Budgets in dollars and time apply to Agent SDK runs as to our own.

Past the run's cost budget (its model steps priced from their usage) or its time budget
(time worked, the session's included), the session is interrupted and the run waits on a
``budget`` step shaped as the engine's, holding no thread; *extend* resumes the session
from the journal's store and it goes on to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse

MODEL = "claude-sonnet-5-5"


class Script:
    """Read a file (an expensive first call), then answer; a chosen call waits on a gate."""

    def __init__(self, ws: Path, held: int | None) -> None:
        self.ws = ws
        self.held = held
        self.gate = threading.Event()

    def __call__(self, body: dict[str, Any], index: int) -> Stream:
        answered = any(
            block.get("type") == "tool_result"
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
        )
        if not answered:
            reply = Stream(
                [Text("Reading the notes."), ToolUse("Read", {"file_path": str(self.ws / "n.md")})],
                input_tokens=100_000,  # $0.20 at Sonnet 5.5's $2 per million
            )
        else:
            reply = Stream([Text("Growth was 4%.")], input_tokens=1000)
        if index == self.held:
            reply.hold_after, reply.gate = 1, self.gate
        return reply


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "n.md").write_text("Growth was 4%.\n")
    return folder


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    yield monkeypatch


def drain_runs(client: Client) -> None:
    drain(client.store, build_executor(client.store, client.settings))


def test_past_its_cost_budget_the_session_stops_and_an_extension_resumes_it(
    client: Client, ws: Path, env: pytest.MonkeyPatch
) -> None:
    script = Script(ws, held=1)  # the call after the expensive one waits to be interrupted
    with FakeAnthropic(script) as api:
        env.setenv("ANTHROPIC_BASE_URL", api.url)
        run = client.start_run(
            "How much growth?", model=MODEL, workspace=ws, agent="agent-sdk", max_cost_usd=0.05
        )
        drain_runs(client)
        waiting = client.run(run.id)
        assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
        assert "Budget reached: spent $0.20 of $0.05" in waiting.status_message
        budget = client.store.load_steps(run.id)[-1]
        assert (budget.kind, budget.name, budget.status) == (
            StepKind.BUDGET,
            "cost",
            StepStatus.STARTED,
        )
        assert budget.input["spent"]["cost_usd"] == pytest.approx(0.2, rel=0.01)

        client.extend_budget(run.id, cost_usd=1.0)
        script.gate.set()
        drain_runs(client)

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert done.status_message == "Growth was 4%."
    steps = client.store.load_steps(run.id)
    closed = next(s for s in steps if s.kind == StepKind.BUDGET)
    assert closed.output["action"] == "extend"
    assert steps[-1].kind == StepKind.MODEL_CALL


def test_past_its_time_budget_a_working_session_is_interrupted(
    client: Client, ws: Path, env: pytest.MonkeyPatch
) -> None:
    script = Script(ws, held=0)  # the first call never ends by itself within the budget
    with FakeAnthropic(script) as api:
        env.setenv("ANTHROPIC_BASE_URL", api.url)
        run = client.start_run(
            "How much growth?", model=MODEL, workspace=ws, agent="agent-sdk", max_time_s=1.0
        )
        drain_runs(client)
        waiting = client.run(run.id)
        assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
        assert waiting.status_message.startswith("Budget reached: worked")
        assert client.store.load_steps(run.id)[-1].name == "time"

        client.extend_budget(run.id, time_s=600)
        script.gate.set()
        drain_runs(client)

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
