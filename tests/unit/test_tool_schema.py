"""Tool arguments against JSON schemas (``engine/schema.py``) and argument models, at depth.

The check names the path of each bad field, most relevant first; resolves references
inside the schema only (a ``$ref`` to a URL is refused, and nothing is fetched); refuses
every call when the schema itself is unusable. MCP tools (no model of their own) check
with it before a call, an approval or a pre-run check; built-in tools name the same paths
from their pydantic models.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.domain import EffectClass
from desktop_agent.engine import schema
from desktop_agent.engine.edits import edit_problem
from desktop_agent.engine.ports import CancelToken, ToolContext, ToolInputError
from desktop_agent.engine.schema import field_path, schema_problem
from desktop_agent.tools.mail import SendEmail
from desktop_agent.tools.mcp import McpTool, RemoteTool
from desktop_agent.tools.registry import ToolRegistry
from tests.helpers.fakes import FakeClock
from tests.tools.servers import HttpServer

FILTERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "limit": {"type": "integer", "minimum": 1},
        "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
        "mode": {"anyOf": [{"enum": ["any", "all"]}, {"type": "null"}]},
    },
    "required": ["title", "filters"],
    "additionalProperties": False,
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "since": {"type": "number"}},
            "required": ["field", "since"],
            "additionalProperties": False,
        }
    },
}
GOOD: dict[str, Any] = {
    "title": "Q3",
    "limit": 3.0,  # an integral float is an integer, as JSON Schema has it
    "filters": [{"field": "a", "since": 1}, {"field": "b", "since": 2.5}],
    "mode": None,
}


def context(tmp_path: Path) -> ToolContext:
    return ToolContext(
        run_id="run1",
        seq=1,
        idempotency_key="run1:1",
        workspace=tmp_path,
        clock=FakeClock(),
        cancel=CancelToken(),
    )


def mcp_tool(input_schema: dict[str, Any]) -> McpTool:
    spec = RemoteTool(
        "srv", "report", "srv__report", "File a report.", input_schema, EffectClass.UNSAFE
    )
    return McpTool(spec, hub=None)


def test_paths_read_as_in_code() -> None:
    assert field_path(["filters", 2, "since"]) == "filters[2].since"
    assert field_path([0, "a", "b", 1, 2]) == "[0].a.b[1][2]"
    assert field_path([]) == ""


def test_a_fitting_call_passes_and_a_bad_field_at_any_depth_is_named_by_its_path() -> None:
    assert schema_problem(FILTERS, GOOD) is None
    cases: dict[str, dict[str, Any]] = {
        "filters[1].since: 'soon' is not of type 'number'": {
            **GOOD,
            "filters": [{"field": "a", "since": 1}, {"field": "b", "since": "soon"}],
        },
        "filters[0]: 'since' is a required property": {**GOOD, "filters": [{"field": "a"}]},
        "filters[0]: Additional properties are not allowed ('x' was unexpected)": {
            **GOOD,
            "filters": [{"field": "a", "since": 1, "x": 0}],
        },
        "limit: 0 is less than the minimum of 1": {**GOOD, "limit": 0},
        "limit: 1.5 is not of type 'integer'": {**GOOD, "limit": 1.5},
        "mode: 'some' is not valid under any of the given schemas": {**GOOD, "mode": "some"},
        "'title' is a required property": {"filters": []},
    }
    for problem, args in cases.items():
        assert schema_problem(FILTERS, args) == problem, args


def test_many_problems_name_three_and_count_the_rest() -> None:
    bad = {
        "title": 5,
        "limit": "x",
        "mode": 1,
        "filters": [{"since": "a"}, {"since": "b"}],
        "extra": True,
    }
    problem = schema_problem(FILTERS, bad)
    assert problem is not None and problem.count("; ") == 3, problem
    assert re.search(r"; and \d+ more problems$", problem), problem


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    problem = schema_problem(FILTERS, {**GOOD, "title": "x" * 100_000})
    assert problem is not None and problem.startswith("title: 'xxx")
    assert len(problem) <= schema.MAX_PROBLEM_CHARS + len("title: ")
    assert "\n" not in problem


def test_a_reference_outside_the_schema_is_never_fetched_and_refuses_the_call(
    tmp_path: Path,
) -> None:
    server = HttpServer()
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string"}', encoding="utf-8")
    try:
        for ref in (server.url("/schema.json"), secret.as_uri()):
            remote = {"type": "object", "properties": {"x": {"$ref": ref}}}
            problem = schema_problem(remote, {"x": 1})
            assert problem is not None and "outside itself" in problem, problem
            assert ref in problem and "nothing is fetched" in problem
            with pytest.raises(ToolInputError, match="cannot be checked"):
                mcp_tool(remote).run({"x": 1}, context(tmp_path))
        assert server.requests == []
    finally:
        server.close()


def test_a_schema_that_is_not_one_refuses_every_call() -> None:
    broken = {"type": "object", "properties": {"x": {"type": "wat"}}}
    problem = schema_problem(broken, {"x": 1})
    assert problem is not None and "not a valid JSON Schema" in problem, problem
    assert "properties.x.type" in problem
    assert schema_problem(broken, {}) == problem  # even arguments it would not look at


def test_the_dialect_named_is_the_one_used_and_an_unknown_one_reads_as_2020_12() -> None:
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"items": [{"type": "string"}, {"type": "number"}]}},
    }
    assert schema_problem(draft7, {"pair": ["a", 1]}) is None
    assert schema_problem(draft7, {"pair": ["a", "b"]}) == "pair[1]: 'b' is not of type 'number'"
    unknown = {**FILTERS, "$schema": "https://example.test/my-dialect"}
    assert schema_problem(unknown, GOOD) is None  # no warning either (warnings fail tests)
    assert schema_problem(unknown, {**GOOD, "limit": 0}) == "limit: 0 is less than the minimum of 1"


def test_an_mcp_tool_checks_before_a_call_an_approval_and_a_pre_run_check(
    tmp_path: Path,
) -> None:
    tool, ctx = mcp_tool(FILTERS), context(tmp_path)
    bad = {**GOOD, "filters": [{"field": "a", "since": "soon"}]}
    problem = "filters[0].since: 'soon' is not of type 'number'"
    for check in (tool.run, tool.approval_reason, tool.validate):
        with pytest.raises(ToolInputError, match=re.escape(problem)):
            check(bad, ctx)
    assert tool.approval_reason(GOOD, ctx) is None and tool.validate(GOOD, ctx) is None
    assert tool.run(GOOD, ctx).content == "MCP server srv is not connected here"
    assert edit_problem(tool, bad) == problem  # an edit: the engine's check, no context
    assert edit_problem(tool, bad, ctx) == problem  # the client's, with the pre-run check


def test_every_built_in_tool_has_a_usable_schema_and_a_nested_edit_is_checked() -> None:
    registry = ToolRegistry(plugins=False)
    for name in registry.names():
        tool = registry.get(name)
        if tool is not None:
            problem = schema_problem(tool.input_schema, {})
            assert problem is None or "is a required property" in problem, (name, problem)
    mail = {"to": ["team@example.test", 7], "subject": "Q3", "body": "Up 12%."}
    assert edit_problem(registry.get("send_email"), mail) == "to[1]: 7 is not of type 'string'"


def test_a_tool_with_a_model_names_the_same_paths(tmp_path: Path) -> None:
    mail = {"to": ["team@example.test", 7], "subject": "Q3", "body": "Up 12%."}
    with pytest.raises(ToolInputError, match=re.escape("to[1]: Input should be a valid string")):
        SendEmail().parse(mail)
