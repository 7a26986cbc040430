"""The analyst's note to an Agent SDK run that is working: the session's next message.

A note (steer) sent while the session waits on the model interrupts the session; the note
is recorded as our runs record it, and the session resumes from the journal's store with
the note as its next user message, which the model reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.worker import Worker
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text
from tests.helpers.polling import wait_status

MODEL = "claude-sonnet-5-5"
NOTE = "Use the 2025 figures only."


def test_a_note_interrupts_the_session_and_is_its_next_message(
    client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_worker_thread: Callable[[RunExecutor], Worker],
) -> None:
    gate = threading.Event()

    def script(body: dict[str, Any], index: int) -> Stream:
        if index == 0:  # the first answer waits until the test lets it go
            return Stream([Text("Looking at every year since 2019.")], hold_after=1, gate=gate)
        return Stream([Text("Growth in 2025 was 4%.")])

    with FakeAnthropic(script) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        run = client.start_run(
            "How much growth?", model=MODEL, workspace=tmp_path / "ws", agent="agent-sdk"
        )
        run_worker_thread(build_executor(client.store, client.settings))
        api.wait_requests(1)
        client.steer(run.id, NOTE)
        done = wait_status(client, run.id, RunStatus.COMPLETED, RunStatus.NEEDS_ATTENTION)
        gate.set()

    assert done.status == RunStatus.COMPLETED, done.status_message
    assert NOTE in api.requests[-1].last_user_text()
    steps = client.store.load_steps(run.id)
    note = next(s for s in steps if s.kind == StepKind.STEER)
    assert note.input["text"] == NOTE and note.output["delivered"]
    assert steps[-1].kind == StepKind.MODEL_CALL and done.status_message == "Growth in 2025 was 4%."
