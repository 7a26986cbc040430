"""An MCP tool's arguments are checked against its schema at every depth, before they leave.

The tests' server (``tests/mcp/server.py``) offers ``report``, whose ``filters`` are a list
of objects with a numeric ``since``. Its own side reads ``since`` leniently (``"5"`` would
pass as 5.0), so what reaches it is what the client let through: the server's log of the
calls it received says which did.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, CommandKind, RunStatus, StepKind
from desktop_agent.domain.errors import InvalidInputError
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.mcp.conftest import HubFor, registry_with, start_run, stdio_server

TOOL = "glossary__report"
GOOD: dict[str, Any] = {
    "title": "Q3",
    "filters": [
        {"field": "revenue", "since": 1_700_000_000},
        {"field": "costs", "since": 1_700_000_000.5},
        {"field": "staff", "since": 0},
    ],
}
SOON = {**GOOD, "filters": [*GOOD["filters"][:2], {"field": "staff", "since": "soon"}]}
SOON_PROBLEM = "filters[2].since: 'soon' is not of type 'number'"
QUOTED = {**GOOD, "filters": [{"field": "revenue", "since": "5"}]}
"""A number in quotes: the server would take it; the schema says a number."""
QUOTED_PROBLEM = "filters[0].since: '5' is not of type 'number'"
EDITED = {"title": "Q3 (costs only)", "filters": [{"field": "costs", "since": 1_690_000_000}]}


def received(log: Path) -> list[dict[str, Any]]:
    """The ``report`` calls the server received, in order."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [{"title": r["report"], "filters": r["filters"]} for r in lines if "report" in r]


def tool_results(client: Client, run_id: str) -> list[tuple[str, bool]]:
    return [
        (str(s.output.get("content")), bool(s.output.get("is_error")))
        for s in client.steps(run_id)
        if s.kind == StepKind.TOOL_CALL and s.name == TOOL and isinstance(s.output, dict)
    ]


def test_a_models_call_with_a_bad_nested_field_is_refused_with_its_path_and_never_sent(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor, server_log: Path
) -> None:
    hub = hub_for(stdio_server(effects={"report": "read_only"}))  # runs without asking
    replies = [
        Reply("Filing.", [(TOOL, SOON), (TOOL, QUOTED)]),
        Reply("Fixed.", [(TOOL, GOOD)]),
        Reply("Done."),
    ]
    run = start_run(client, hub, "Report on Q3", [TOOL])
    drain(client.store, make_executor(ScriptedModel(replies), tools=registry_with(hub)))
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert tool_results(client, run.id) == [
        (f"invalid arguments for {TOOL}: {SOON_PROBLEM}", True),
        (f"invalid arguments for {TOOL}: {QUOTED_PROBLEM}", True),
        ("filed Q3 with 3 filters", False),  # the valid nested call passes
    ]
    assert received(server_log) == [GOOD]


def test_an_analysts_edit_with_a_bad_nested_field_is_refused_and_nothing_changes(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor, server_log: Path
) -> None:
    hub = hub_for(stdio_server())  # report is unsafe: the analyst is asked first
    executor = make_executor(
        ScriptedModel([Reply("Filing.", [(TOOL, GOOD)]), Reply("Filed.")]),
        tools=registry_with(hub),
    )
    run = start_run(client, hub, "Report on Q3", [TOOL])
    client.reload_mcp_tools()  # the catalogue the worker wrote: the client checks edits
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.WAITING
    (pending,) = client.approvals(ApprovalState.PENDING)

    with pytest.raises(InvalidInputError, match=re.escape(SOON_PROBLEM)) as refused:
        client.approve(pending.id, SOON)
    assert refused.value.code == "edit_refused"
    assert "nothing was approved" in str(refused.value)
    assert client.store.get_approval(pending.id) == pending  # nothing saved
    assert client.store.pending_commands(run.id) == []

    # A decision written past the client (an older release, a script): the worker refuses it.
    command = client.store.add_command(
        run.id, CommandKind.APPROVE, {"approval_id": pending.id, "arguments": QUOTED}
    )
    drain(client.store, executor)
    result = client.store.get_command(command).result
    assert result.startswith(f"refused: {QUOTED_PROBLEM}"), result
    assert client.store.get_approval(pending.id) == pending
    assert client.run(run.id).status == RunStatus.WAITING
    assert received(server_log) == []

    client.approve(pending.id, EDITED)  # a valid nested edit passes, and runs as edited
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert client.store.get_approval(pending.id).state == ApprovalState.EDITED
    assert received(server_log) == [EDITED]
    assert tool_results(client, run.id) == [("filed Q3 (costs only) with 1 filters", False)]
