"""Malformed or truncated model answers: a clear failure, a journal that still folds, a retry.

A model port that breaks its contract (content blocks missing their fields, an answer that
stops for a tool call but holds none, content that is not a list) must not poison the
journal: the model call is recorded as failed with a message naming the problem, none of
the answer enters the conversation, and resuming the run with a sane model finishes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage, WaitReason
from desktop_agent.domain.errors import ApiConnectionError
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from tests.conftest import MakeExecutor
from tests.faults.strategies import JSONISH, TEXT
from tests.faults.test_fuzz_tool_arguments import check_journal
from tests.helpers.fakes import Reply, ScriptedModel


class RawModel:
    """Answers with whatever content and stop reason it is given, shape unchecked."""

    def __init__(
        self, content: Any, stop_reason: Any, partial: str = "", then: Reply | None = None
    ) -> None:
        self.content = content
        self.stop_reason = stop_reason
        self.partial = partial
        self.then = ScriptedModel([then]) if then else None
        self.calls = 0

    def context_window(self, model: str) -> int:
        return 200_000

    def compacts_on_server(self, model: str) -> bool:
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        return 0.0

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        self.calls += 1
        if self.then is not None and self.calls > 1:
            return self.then.complete(
                request, idempotency_key=idempotency_key, on_text=on_text, cancel=cancel
            )
        if self.partial:
            on_text(self.partial)
        return ModelResponse(self.content, self.stop_reason, Usage(5, 5), 0.0, request.model)


def _finish_with_a_sane_model(client: Client, make_executor: MakeExecutor, run_id: str) -> None:
    client.resume(run_id)
    sane = ScriptedModel([Reply("Recovered and done.")])
    assert make_executor(sane).execute(run_id) == RunStatus.COMPLETED
    check_journal(client, run_id)


@pytest.mark.parametrize(
    ("content", "stop", "problem"),
    [
        ([{"type": "tool_use", "name": "read_file", "input": {}}], "tool_use", "has no id"),
        ([{"type": "tool_use", "id": "t1", "input": {}}], "tool_use", "has no name"),
        ([{"type": "text"}], "end_turn", "(text) has no text"),
        ([{"text": "no type"}], "end_turn", "has no type"),
        (["just a string"], "end_turn", "has no type"),
        ([{"type": "text", "text": "I will read"}], "tool_use", "holds none"),
        ([], "tool_use", "holds none"),
        (None, "end_turn", "content is not a list"),
        ([{"type": "text", "text": "ok"}], None, "no stop reason"),
        (
            [
                {"type": "tool_use", "id": "same", "name": "list_files", "input": {}},
                {"type": "tool_use", "id": "same", "name": "list_files", "input": {}},
            ],
            "tool_use",
            "repeats tool_use id",
        ),
    ],
)
def test_malformed_answer_fails_the_call_clearly_and_a_retry_finishes(
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
    content: Any,
    stop: Any,
    problem: str,
) -> None:
    run = client.start_run("Read things", model="claude-haiku-4-5", workspace=workspace)
    model = RawModel(content, stop, partial="I will read the fi")
    assert make_executor(model).execute(run.id) == RunStatus.FAILED

    failed = client.run(run.id)
    assert failed.status_message.startswith("Model call failed: the model's answer is malformed")
    assert problem in failed.status_message
    (step,) = client.steps(run.id)
    assert step.kind == StepKind.MODEL_CALL and step.status == StepStatus.FAILED
    assert problem in (step.error or "")
    assert "content" not in (step.output or {})  # nothing of the answer was kept as content
    assert step.output["partial"] == "I will read the fi"  # what streamed is kept and shown
    check_journal(client, run.id)
    _finish_with_a_sane_model(client, make_executor, run.id)


def test_answer_that_breaks_off_mid_stream_waits_and_keeps_what_streamed(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Read things", model="claude-haiku-4-5", workspace=workspace)

    class BreaksOff(RawModel):
        def complete(self, request: ModelRequest, **kw: Any) -> ModelResponse:
            kw["on_text"]("Half an answ")
            raise ApiConnectionError("the model API's answer broke off: connection reset")

    assert make_executor(BreaksOff(None, None)).execute(run.id) == RunStatus.WAITING
    waiting = client.run(run.id)
    assert waiting.wait_reason == WaitReason.RATE_LIMIT and waiting.wake_at is not None
    assert "broke off" in waiting.status_message and "retrying in" in waiting.status_message
    (step,) = client.steps(run.id)
    assert step.status == StepStatus.FAILED and step.output["partial"] == "Half an answ"
    check_journal(client, run.id)
    _finish_with_a_sane_model(client, make_executor, run.id)


BLOCK = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "tool_use", "thinking", "image", ""]) | TEXT,
        "text": TEXT | JSONISH,
        "id": TEXT | JSONISH,
        "name": st.sampled_from(["list_files", "read_file", "wait"]) | TEXT | JSONISH,
        "input": JSONISH,
    },
)
CONTENT = st.one_of(st.lists(st.one_of(BLOCK, JSONISH), max_size=4), JSONISH)
STOP = st.one_of(st.sampled_from(["end_turn", "tool_use", "max_tokens", "pause_turn"]), JSONISH)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(content=CONTENT, stop=STOP)
def test_any_answer_shape_leaves_a_journal_that_folds(
    client: Client, make_executor: MakeExecutor, workspace: Path, content: Any, stop: Any
) -> None:
    run = client.start_run("Fuzz answers", model="claude-haiku-4-5", workspace=workspace)
    model = RawModel(content, stop, then=Reply("Done after the odd answer."))
    status = make_executor(model).execute(run.id)
    check_journal(client, run.id)
    if status == RunStatus.FAILED:
        assert "malformed" in client.run(run.id).status_message
        _finish_with_a_sane_model(client, make_executor, run.id)
    else:
        # A well-formed answer: the run went on to its end, or waits as the answer asked.
        assert status in (RunStatus.COMPLETED, RunStatus.WAITING), client.run(run.id)
