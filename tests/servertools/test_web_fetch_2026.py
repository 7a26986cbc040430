"""Anthropic's web fetch as a run option: in the place of our own web_fetch, with the domains.

The version, name and fields are the SDK 2.14's (``WebFetchTool20260318Param``); the rule
that Claude fetches only URLs already in the conversation and the list of models are the
"Web fetch tool" page's (read 2026-11-27). The API refuses two tools of one name, so a run
offers our ``web_fetch`` or Anthropic's, never both.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import typing
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import WebFetchTool20260318Param

from desktop_agent.client.api import Client
from desktop_agent.client.server_tool_lines import server_tool_lines
from desktop_agent.domain import AgentSpec
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.builtin_tools import SERVER_TOOLS, WEB_FETCH_VERSION
from desktop_agent.engine.ports import CancelToken, ModelRequest
from desktop_agent.engine.request import WEB_FETCH_MAX_CONTENT_TOKENS
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import build_params
from desktop_agent.llm.pricing import model_info
from desktop_agent.persistence.catalogue import save_models
from tests.conftest import MakeExecutor, drain
from tests.helpers import claude_contract as contract
from tests.helpers.fake_anthropic import Block, Raw, Stream, Text
from tests.llm.conftest import MakeModel, StartFake
from tests.tools.test_server_tools import ServerToolModel

MODEL = "claude-sonnet-5-5"
NO_CODE = "claude-haiku-4-5"
FETCH = {"type": WEB_FETCH_VERSION, "name": "web_fetch"}


def _without_code_execution(model: str = NO_CODE) -> list[dict[str, Any]]:
    models = copy.deepcopy(snapshot_models())
    for m in models:
        if m["id"] == model:
            m["capabilities"]["server_tools"]["code_execution"] = {"supported": False}
    return models


def test_the_version_and_name_are_the_sdk_s() -> None:
    hints = typing.get_type_hints(WebFetchTool20260318Param, include_extras=True)
    assert typing.get_args(typing.get_args(hints["type"])[0]) == (WEB_FETCH_VERSION,)
    assert typing.get_args(typing.get_args(hints["name"])[0]) == ("web_fetch",)
    assert SERVER_TOOLS["server_web_fetch"] == {"type": "web_fetch_20260318", "name": "web_fetch"}
    assert WEB_FETCH_VERSION in contract.WEB_FETCH_VERSIONS


# --------------------------------------------------------------------------- run options


def test_web_fetch_takes_the_place_of_our_own(client: Client) -> None:
    spec, _ = client.prepare_run(model=MODEL, server_web_fetch=True)
    assert "server_web_fetch" in spec.tool_names
    assert "web_fetch" not in spec.tool_names
    assert spec.server_web_fetch is True
    assert spec.to_json()["server_web_fetch"] is True
    assert AgentSpec.from_json(spec.to_json()) == spec
    assert "takes the place of the run's own web_fetch" in client.last_model_notice
    plain, _ = client.prepare_run(model=MODEL)
    assert "web_fetch" in plain.tool_names and "server_web_fetch" not in plain.tool_names


def test_a_definition_without_the_options_keeps_its_hash() -> None:
    spec = AgentSpec(model=MODEL, system_prompt="s")
    assert "server_web_fetch" not in spec.to_json()
    assert "code_execution" not in spec.to_json()
    assert spec.definition_hash == AgentSpec.from_json(spec.to_json()).definition_hash


def test_a_model_that_does_not_take_it_is_refused(client: Client) -> None:
    save_models(client.store.db, _without_code_execution(), time.time())
    with pytest.raises(InvalidInputError, match="does not take Anthropic's web fetch"):
        client.prepare_run(model=NO_CODE, server_web_fetch=True)
    with pytest.raises(InvalidInputError, match="does not take Anthropic's code execution"):
        client.prepare_run(model=NO_CODE, code_execution=True)
    spec, _ = client.prepare_run(model=MODEL, server_web_fetch=True, code_execution=True)
    assert {"server_web_fetch", "code_execution"} <= set(spec.tool_names)


def test_code_execution_is_refused_in_economy_mode_and_for_the_demo(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="economy mode"):
        client.prepare_run(model=MODEL, code_execution=True, economy=True)
    with pytest.raises(InvalidInputError, match="no Anthropic server tools"):
        client.prepare_run(model="demo", server_web_fetch=True)


# --------------------------------------------------------------------------- the request


def test_the_request_carries_it_with_the_run_s_domains(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.start_run(
        "Read the page", model=NO_CODE, server_web_fetch=True, search_domains=["example.com"]
    )
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    tools = model.requests[0].tools
    assert [t for t in tools if t["name"] == "web_fetch"] == [
        {
            **FETCH,
            "max_uses": client.settings.web_search_max_uses,
            "max_content_tokens": WEB_FETCH_MAX_CONTENT_TOKENS,
            "allowed_domains": ["example.com"],
        }
    ]
    assert not any(t.get("name") == "code_execution" for t in tools)
    assert model.requests[0].container is None


def test_a_run_that_did_not_choose_it_sends_our_own(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.start_run("Read the page", model=NO_CODE)
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    (ours,) = [t for t in model.requests[0].tools if t["name"] == "web_fetch"]
    assert "input_schema" in ours and "type" not in ours


def test_a_model_without_it_in_the_catalogue_is_not_sent_it() -> None:
    catalogue = Catalogue(_without_code_execution())
    plain = {"name": "note", "description": "n", "input_schema": {"type": "object"}}
    code = dict(SERVER_TOOLS["code_execution"])
    request = ModelRequest(
        model=NO_CODE,
        system="s",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Goal"}]}],
        tools=[plain, FETCH, code],
        max_tokens=1024,
        container="container_1",
    )
    params = build_params(request, NO_CODE, catalogue)
    assert [t["name"] for t in params["tools"]] == ["note"]
    assert "container" not in params
    kept = build_params(request, MODEL, catalogue)
    assert [t["name"] for t in kept["tools"]] == ["note", "web_fetch", "code_execution"]
    assert kept["container"] == "container_1"


def test_fetches_are_counted_and_cost_only_tokens(
    start_fake: StartFake, make_model: MakeModel, tmp_path: Path
) -> None:
    blocks: list[Block] = [
        Raw({"type": "server_tool_use", "id": "srvtoolu_f", "name": "web_fetch",
             "input": {"url": "https://example.com/report"}}),
        Raw({"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_f",
             "content": {"type": "web_fetch_result", "url": "https://example.com/report",
                         "content": {"type": "document", "source": {
                             "type": "text", "media_type": "text/plain", "data": "Grew 4%."}}}}),
        Text("It grew 4%."),
    ]  # fmt: skip
    fake = start_fake([Stream(blocks)])
    request = ModelRequest(
        model=MODEL,
        system="s",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Read example.com/report"}]}
        ],
        tools=[{**FETCH, "max_uses": 2, "allowed_domains": ["example.com"]}],
        max_tokens=1024,
        workspace=str(tmp_path),
    )
    response = make_model(fake).complete(
        request, idempotency_key="r:1", on_text=lambda _t: None, cancel=CancelToken()
    )
    assert fake.requests[0].status == 200
    assert response.details["server_tool_use"] == {"web_fetch_requests": 1}
    assert response.cost_usd == pytest.approx(model_info(MODEL).cost(response.usage))
    assert "container" not in response.details
    assert server_tool_lines({}, {"api": response.details}) == ["1 web fetch"]
    both = {"api": {"server_tool_use": {"web_fetch_requests": 2, "web_search_requests": 2}}}
    assert server_tool_lines({}, both) == ["2 web fetches", "2 web searches ($0.0200)"]


# --------------------------------------------------------------------------- the fake


def _check(body: dict[str, Any], model: str = MODEL) -> contract.ApiError | None:
    full = {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        **body,
    }
    upload = contract.FileRecord("f", "data.csv", "text/csv", b"a,b\n", "2026-11-27T00:00:00Z")
    return contract.validate(full, {"anthropic-beta": contract.BETA_FILES}, files={"f": upload})


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"tools": [{"type": "web_fetch_20990101", "name": "web_fetch"}]}, "web_fetch_20260318"),
        ({"tools": [{**FETCH, "name": "fetch"}]}, "Input should be 'web_fetch'"),
        ({"tools": [{**FETCH, "user_location": {}}]}, "Extra inputs are not permitted"),
        ({"tools": [{**FETCH, "max_content_tokens": 0}]}, "max_content_tokens"),
        (
            {"tools": [{**FETCH, "allowed_domains": ["a.test"], "blocked_domains": ["b.test"]}]},
            "Cannot specify both",
        ),
        (
            {"tools": [FETCH, {"name": "web_fetch", "input_schema": {"type": "object"}}]},
            "Tool names must be unique",
        ),
        ({"tools": [{"type": "code_execution_20260521", "name": "bash"}]}, "'code_execution'"),
        (
            {"tools": [{"type": "code_execution_20260521", "name": "code_execution", "x": 1}]},
            "Extra inputs",
        ),
        ({"tools": [SERVER_TOOLS["code_execution"]], "container": 5}, "container"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "container_upload", "file_id": "f"}]}
                ]
            },
            "require the code execution tool",
        ),
    ],
)
def test_the_fake_refuses_what_the_documents_say(body: dict[str, Any], words: str) -> None:
    error = _check(body)
    assert error is not None and error.status == 400, body
    assert words in error.message


def test_the_fake_takes_the_documented_shapes_and_models() -> None:
    full = {
        **FETCH,
        "max_uses": 2,
        "max_content_tokens": 5000,
        "citations": {"enabled": True},
        "use_cache": False,
        "response_inclusion": "full",
        "blocked_domains": ["x.test"],
    }
    code = SERVER_TOOLS["code_execution"]
    assert _check({"tools": [full, code], "container": "container_1"}) is None
    assert _check({"tools": [code], "container": {"id": None, "skills": []}}) is None
    rules = contract.resolve(MODEL)
    assert rules is not None and rules.web_fetch and rules.code_execution_tool
    without = dataclasses.replace(rules, web_fetch=False)
    error = contract._check_server_tools({"tools": [FETCH]}, without, frozenset(), "claude-x")
    assert error is not None and "web fetch tool is not supported on claude-x" in error.message
