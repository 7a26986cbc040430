"""MCP servers' tools in real runs: effect classes, idempotency keys, failures, definitions.

A real MCP server (``tests/mcp/server.py``, the SDK's server side) over stdio or over
Streamable HTTP on loopback; the real engine, with a scripted model asking for the calls.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keyring
import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, EffectClass, RunStatus, StepKind
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.tools.mcp import (
    CATALOGUE_FILE,
    McpHub,
    listed_tools,
    parse_servers,
    start_hub,
    tool_name,
)
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.mcp.conftest import HubFor, registry_with, start_run, stdio_server


def tool_steps(client: Client, run_id: str) -> list[tuple[str, str, bool]]:
    out = []
    for s in client.steps(run_id):
        if s.kind == StepKind.TOOL_CALL and isinstance(s.output, dict):
            out.append((s.name, str(s.output.get("content")), bool(s.output.get("is_error"))))
    return out


def test_the_tools_are_listed_with_effects_from_their_hints(hub_for: HubFor) -> None:
    hub = hub_for(stdio_server(effects={"tag": "unsafe"}))
    status = hub.status["glossary"]
    assert (status.state, status.message) == ("connected", "")
    effects = {t.name: t.effect for t in hub.tools()}
    assert effects["glossary__lookup"] == EffectClass.READ_ONLY  # readOnlyHint
    assert effects["glossary__post"] == EffectClass.UNSAFE  # no hints
    assert effects["glossary__tag"] == EffectClass.UNSAFE  # idempotentHint, overridden
    lookup = next(t for t in hub.tools() if t.name == "glossary__lookup")
    assert lookup.input_schema["properties"] == {"word": {"title": "Word", "type": "string"}}
    assert "[MCP server glossary]" in lookup.description


def test_a_read_only_tool_runs_in_a_run_and_its_result_reaches_the_journal(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor
) -> None:
    hub = hub_for(stdio_server())
    run = start_run(client, hub, "Define cobalt", ["glossary__lookup"])
    replies = [Reply("Looking it up.", [("glossary__lookup", {"word": "cobalt"})]), Reply("Done.")]
    drain(client.store, make_executor(ScriptedModel(replies), tools=registry_with(hub)))
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert tool_steps(client, run.id) == [
        ("glossary__lookup", "cobalt: a metal used in batteries", False)
    ]


def test_an_unsafe_tool_asks_first_and_carries_the_steps_idempotency_key(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor, server_log: Path
) -> None:
    hub = hub_for(stdio_server())
    executor = make_executor(
        ScriptedModel(
            [Reply("Posting.", [("glossary__post", {"text": "Q3 is out"})]), Reply("Ok.")]
        ),
        tools=registry_with(hub),
    )
    run = start_run(client, hub, "Tell the team", ["glossary__post"])
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.WAITING  # ask_unsafe: nothing sent yet
    assert not server_log.exists()
    (pending,) = client.approvals(ApprovalState.PENDING)
    assert pending.tool == "glossary__post"
    client.approve(pending.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    (posted,) = [json.loads(line) for line in server_log.read_text().splitlines()]
    (step,) = [
        s
        for s in client.steps(run.id)
        if s.name == "glossary__post" and s.kind == StepKind.TOOL_CALL
    ]
    assert posted["text"] == "Q3 is out"
    assert posted["meta"]["idempotency_key"] == f"{run.id}:{step.seq}" == step.idempotency_key
    assert posted["meta"]["io.desktop-agent/idempotency-key"] == step.idempotency_key


def test_failures_are_error_results_and_the_run_goes_on(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor
) -> None:
    hub = hub_for(stdio_server(timeout_s=1))
    replies = [
        Reply("Trying.", [("glossary__broken", {}), ("glossary__slow", {"seconds": 5})]),
        Reply("Again.", [("glossary__lookup", {"word": "nickel"})]),
        Reply("Done."),
    ]
    run = start_run(
        client, hub, "Try the glossary", ["glossary__broken", "glossary__slow", "glossary__lookup"]
    )
    drain(client.store, make_executor(ScriptedModel(replies), tools=registry_with(hub)))
    assert client.run(run.id).status == RunStatus.COMPLETED
    (broken, slow, lookup) = tool_steps(client, run.id)
    assert broken[2] and "broken" in broken[1]
    assert slow[2] and "did not answer slow within 1 s" in slow[1]
    assert lookup == ("glossary__lookup", "nickel: a metal used in batteries", False)


def test_a_server_that_cannot_start_is_a_status_not_a_crash(hub_for: HubFor) -> None:
    hub = hub_for(
        {"name": "gone", "command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        stdio_server(),
    )
    assert hub.status["gone"].state == "failed" and hub.status["gone"].message
    assert hub.status["glossary"].state == "connected"  # the others are not held up
    assert all(t.spec.server == "glossary" for t in hub.tools())
    result = hub.call("gone", "anything", {}, {}, 5)
    assert result.is_error and "gone" in result.content


def test_a_dropped_stdio_server_is_started_again_on_the_next_call(hub_for: HubFor) -> None:
    import psutil

    hub = hub_for(stdio_server())
    me = psutil.Process()
    (child,) = [
        p for p in me.children(recursive=True) if "tests.mcp.server" in " ".join(p.cmdline())
    ]
    os.kill(child.pid, signal.SIGKILL)
    first = hub.call("glossary", "lookup", {"word": "tin"}, {}, 5)
    assert first.is_error and "glossary" in first.content  # the call that found it gone
    assert hub.status["glossary"].state == "connecting"
    again = hub.call("glossary", "lookup", {"word": "tin"}, {}, 5)  # waits for the new one
    assert (again.is_error, again.content) == (False, "tin: a metal used in batteries")


def test_a_changed_tool_is_caught_by_the_definition_check(
    client: Client,
    make_executor: MakeExecutor,
    hub_for: HubFor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = hub_for(stdio_server())
    run = start_run(client, first, "Define words", ["glossary__lookup", "ask_user"])
    ask = Reply("Which word?", [("ask_user", {"question": "Which word?"})])
    drain(client.store, make_executor(ScriptedModel([ask]), tools=registry_with(first)))
    assert client.run(run.id).wait_reason is not None  # waits for the answer
    monkeypatch.setenv("MCP_TEST_VARIANT", "2")  # the server is upgraded meanwhile
    upgraded = hub_for(stdio_server())
    client.answer(run.id, "cobalt")
    done = ScriptedModel([Reply("Done.")])
    drain(client.store, make_executor(done, tools=registry_with(upgraded)))
    waiting = client.run(run.id)
    assert waiting.status == RunStatus.NEEDS_ATTENTION
    assert "agent definition changed" in waiting.status_message
    assert "glossary__lookup" in waiting.status_message
    assert client.store.runnable_runs(time.time()) == []  # the answer waits for the decision
    client.resolve(run.id, "accept")
    drain(client.store, make_executor(done, tools=registry_with(upgraded)))
    finished = client.run(run.id)
    assert finished.status == RunStatus.COMPLETED
    assert dict(finished.spec.tools)["glossary__lookup"] == next(
        t.version for t in upgraded.tools() if t.name == "glossary__lookup"
    )
    assert any(s.kind == StepKind.QUESTION and s.output for s in client.steps(run.id))


def test_the_catalogue_lets_the_app_offer_the_tools_without_connecting(
    client: Client, server_log: Path
) -> None:
    catalogue = client.db_path.parent / CATALOGUE_FILE
    hub = start_hub([stdio_server()], catalogue)
    assert hub is not None
    try:
        listed = {t.name: t for t in listed_tools(catalogue)}
        assert set(listed) == {t.name for t in hub.tools()}
        assert listed["glossary__lookup"].version == next(
            t.version for t in hub.tools() if t.name == "glossary__lookup"
        )
    finally:
        hub.close()
    again = Client(client.db_path)  # a new client reads the catalogue
    try:
        run = again.start_run("Define", model="demo", tools=["glossary__lookup"])
        assert dict(run.spec.tools)["glossary__lookup"].startswith("mcp-")
    finally:
        again.close()


def test_declarations_that_cannot_be_used_say_why() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "Bad Name", "command": "x"}, "lowercase"),
        ({"name": "a"}, "either a command"),
        ({"name": "a", "command": "x", "url": "http://h"}, "either a command"),
        ({"name": "a", "url": "ftp://h"}, "http://"),
        ({"name": "a", "command": "x", "effects": {"t": "maybe"}}, "read_only, idempotent"),
        ({"name": "a", "command": "x", "timeout_s": 0}, "timeout_s"),
    ]
    for raw, says in cases:
        with pytest.raises(InvalidInputError, match=says):
            parse_servers([raw])
    with pytest.raises(InvalidInputError, match="unique"):
        parse_servers([{"name": "a", "command": "x"}, {"name": "a", "url": "http://h"}])
    assert tool_name("glossary", "x" * 80).startswith("glossary__x")
    assert len(tool_name("glossary", "x" * 80)) == 64


def test_an_http_server_gets_its_header_secret_from_the_keyring(
    http_server: Callable[[], str],
) -> None:
    url = http_server()
    keyring.set_password("desktop-agent-mcp", "remote/token", "Bearer s3cret-mcp-token")
    hub = McpHub(
        parse_servers(
            [{"name": "remote", "url": url, "headers": {"Authorization": "keyring:token"}}]
        )
    )
    hub.start()
    try:
        assert hub.status["remote"].state == "connected", hub.status["remote"].message
        seen = hub.call("remote", "whoami", {}, {}, 10)
        assert (seen.is_error, seen.content) == (False, "Bearer s3cret-mcp-token")
        assert "s3cret" not in json.dumps(hub.catalogue())
    finally:
        hub.close()


def test_a_missing_keyring_secret_fails_that_server_with_the_command_to_fix_it(
    http_server: Callable[[], str],
) -> None:
    headers = {"Authorization": "keyring:nope"}
    hub = McpHub(parse_servers([{"name": "remote", "url": http_server(), "headers": headers}]))
    hub.start()
    try:
        status = hub.status["remote"]
        assert status.state == "failed"
        assert "keyring set desktop-agent-mcp remote/nope" in status.message
    finally:
        hub.close()
