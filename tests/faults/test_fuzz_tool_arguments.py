"""Tool arguments from the model that are wrong in every way: the run goes on, the journal holds.

Each example is one real run through the engine on a real SQLite journal: a scripted model
calls a tool with fuzzed arguments (wrong types, missing fields, huge strings, lone
surrogates, deep nesting, not an object at all, an unknown tool name), then answers. The
model must read a tool result for its call, the run must end or wait normally (never fail
or need attention), and the journal must be a gap-free sequence of closed records that
folds back into the same conversation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepStatus
from desktop_agent.engine.loop import restore_state
from tests.conftest import MakeExecutor
from tests.faults.strategies import TEXT, arguments
from tests.helpers.fakes import Reply, ScriptedModel

# Network tools (web_fetch, http_post, send_email) are left out: fuzzed URLs must not
# reach the network. Their argument validation is the same pydantic path as these.
TOOLS: dict[str, list[str]] = {
    "list_files": ["path"],
    "read_file": ["path", "offset"],
    "search_files": ["query", "path"],
    "write_file": ["path", "content"],
    "append_note": ["path", "text"],
    "update_plan": ["items"],
    "wait": ["seconds", "until", "reason"],
    "ask_user": ["question"],
}

CALLS = st.one_of(
    st.sampled_from(sorted(TOOLS)).flatmap(lambda n: st.tuples(st.just(n), arguments(TOOLS[n]))),
    st.tuples(TEXT.filter(bool), arguments(["x"])),  # no such tool; maybe unencodable
)

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def check_journal(client: Client, run_id: str) -> None:
    """Gap-free, closed (except a wait the run is in), and folds without error."""
    run = client.run(run_id)
    steps = client.steps(run_id)
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    open_steps = [s for s in steps if s.status == StepStatus.STARTED]
    if run.status == RunStatus.WAITING:
        assert len(open_steps) <= 1 and (not open_steps or open_steps[0] is steps[-1])
    else:
        assert open_steps == []
    state, _open = restore_state(client.store, run)
    assert state.scalars.last_seq == len(steps)


@FUZZ
@given(call=CALLS)
def test_bad_tool_arguments_become_an_error_result_and_the_run_goes_on(
    client: Client, make_executor: MakeExecutor, workspace: Path, call: tuple[str, Any]
) -> None:
    name, args = call
    model = ScriptedModel([Reply("Calling a tool.", [(name, args)]), Reply("All done.")])
    run = client.start_run("Fuzz the tools", model="claude-haiku-4-5", workspace=workspace)
    status = make_executor(model).execute(run.id)

    assert status in (RunStatus.COMPLETED, RunStatus.WAITING), client.run(run.id).status_message
    check_journal(client, run.id)
    if status == RunStatus.COMPLETED:
        # The model was told what became of its call, in a tool result for that call.
        assert len(model.requests) == 2
        results = [
            block
            for block in model.requests[1].messages[-1]["content"]
            if block.get("type") == "tool_result"
        ]
        assert len(results) == 1
        assert isinstance(results[0]["content"], str) and results[0]["content"]
    else:
        run_now = client.run(run.id)
        assert run_now.wait_reason in ("approval", "timer", "human_input"), run_now.wait_reason
    # Nothing left the workspace: the only files are the sources and what the tools wrote.
    assert {p.name for p in workspace.parent.iterdir()} <= {"ws", "data"}
