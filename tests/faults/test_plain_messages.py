"""What the analyst reads after a bug in a tool or in the engine: words, no exception names.

A tool that raises ``KeyError('x')`` or a bare ``RuntimeError()``, a tool whose check of a
call raises, a model port that raises something unexpected: each time the run goes on or
waits with a message in plain words (the step's result, the approval's rule, the run's
status message). The exception's class name stays in the worker's log, for whoever debugs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import JSON, EffectClass, RunStatus, StepKind
from desktop_agent.engine.ports import ToolContext, ToolResult
from desktop_agent.tools.registry import ToolRegistry
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import QuietTool, Reply, ScriptedModel, call_once

EXCEPTION_NAMES = ("KeyError", "RuntimeError", "Exception", "Error:")


class Breaking(QuietTool):
    """A test tool whose run (or check of a call) raises the exception it is given."""

    name = "breaking"
    description = "Break."
    effect = EffectClass.IDEMPOTENT

    def __init__(self, *, on_run: Exception | None = None, on_check: Exception | None = None):
        self.on_run = on_run
        self.on_check = on_check

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        if self.on_run is not None:
            raise self.on_run
        return ToolResult("done")

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        if self.on_check is not None:
            raise self.on_check
        return None


def _run_with(client: Client, make_executor: MakeExecutor, tool: Breaking) -> str:
    client._tools.add(tool)
    run_id = client.start_run("break something", model="demo", tools=["breaking"]).id
    executor = make_executor(
        ScriptedModel(call_once("breaking", saying="Trying.", then="Done.")),
        tools=ToolRegistry([tool]),
    )
    drain(client.store, executor)
    return run_id


def _tool_result(client: Client, run_id: str) -> str:
    (step,) = [s for s in client.steps(run_id) if s.kind == StepKind.TOOL_CALL]
    assert isinstance(step.output, dict)
    return str(step.output["content"])


def _no_exception_name(text: str) -> None:
    for name in EXCEPTION_NAMES:
        assert name not in text, text


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (KeyError("x"), "breaking failed: missing key 'x'"),
        (RuntimeError(), "breaking failed without saying why"),
        (ValueError("the sheet has no row 7"), "breaking failed: the sheet has no row 7"),
    ],
)
def test_a_tool_that_raises_fails_in_words_and_the_log_keeps_the_class(
    client: Client,
    make_executor: MakeExecutor,
    caplog: pytest.LogCaptureFixture,
    raised: Exception,
    expected: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="desktop_agent.engine.control")
    run_id = _run_with(client, make_executor, Breaking(on_run=raised))

    assert client.run(run_id).status == RunStatus.COMPLETED  # the model read it and went on
    text = _tool_result(client, run_id)
    assert text == expected
    _no_exception_name(text)
    assert type(raised).__name__ in caplog.text


def test_a_tool_that_cannot_check_a_call_asks_the_analyst_in_words(
    client: Client, make_executor: MakeExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="desktop_agent.engine.control")
    run_id = _run_with(client, make_executor, Breaking(on_check=KeyError("path")))
    (approval,) = client.approvals()
    assert approval.run_id == run_id
    assert approval.rule == "breaking could not check this call: missing key 'path'"

    run_id = _run_with(client, make_executor, Breaking(on_check=RuntimeError()))
    (approval,) = [a for a in client.approvals() if a.run_id == run_id]
    assert approval.rule == "breaking could not check this call (its check gave no reason)"
    assert "KeyError" in caplog.text and "RuntimeError" in caplog.text


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (KeyError("x"), "Internal error: missing key 'x'; resume to retry"),
        (
            RuntimeError(),
            "Internal error: something failed without saying why (the worker's log has the "
            "details); resume to retry",
        ),
    ],
)
def test_an_internal_error_parks_the_run_with_a_message_in_words(
    client: Client,
    make_executor: MakeExecutor,
    caplog: pytest.LogCaptureFixture,
    raised: Exception,
    expected: str,
) -> None:
    caplog.set_level(logging.ERROR, logger="desktop_agent.worker.worker")
    run_id = client.start_run("fail inside", model="claude-haiku-4-5").id
    drain(client.store, make_executor(ScriptedModel([Reply(raises=raised)])))

    run = client.run(run_id)
    assert (run.status, run.status_message) == (RunStatus.NEEDS_ATTENTION, expected)
    _no_exception_name(run.status_message)
    assert type(raised).__name__ in caplog.text  # with its traceback, for debugging


def test_plain_error_says_what_happened_when_the_exception_says_nothing() -> None:
    assert plain_error(KeyError("x")) == "missing key 'x'"
    assert plain_error(RuntimeError()) == "something went wrong"
    assert plain_error(RuntimeError(), empty="no reason given") == "no reason given"
