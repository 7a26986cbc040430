"""MCP servers that misbehave are contained: huge answers, stuck calls, repeated failures.

The tests' own server (``tests/mcp/server.py``) as a real child process: ``huge`` answers
megabytes in one message, ``wedge`` blocks the whole server as a stuck server does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from desktop_agent.cli.mcp import _lines
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.tools.files import MAX_READ_CHARS
from desktop_agent.tools.mcp import (
    CUT_META,
    FAIL_AFTER,
    RESULT_CHARS,
    McpHub,
    _Cut,
    _Lines,
    _read_line,
    parse_servers,
    read_catalogue,
)
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import wait_until
from tests.mcp.conftest import HubFor, registry_with, start_run, stdio_server
from tests.mcp.test_mcp_tools import tool_steps

# ------------------------------------------------------------------ huge answers


def test_a_50_mb_answer_is_cut_at_the_limit_and_the_session_goes_on(
    client: Client, make_executor: MakeExecutor, hub_for: HubFor
) -> None:
    hub = hub_for(stdio_server(timeout_s=30))  # the old reading took minutes: a timeout
    replies = [
        Reply("Fetching.", [("glossary__huge", {"megabytes": 50})]),
        Reply("Again.", [("glossary__lookup", {"word": "zinc"})]),
        Reply("Done."),
    ]
    run = start_run(client, hub, "Fetch it all", ["glossary__huge", "glossary__lookup"])
    drain(client.store, make_executor(ScriptedModel(replies), tools=registry_with(hub)))
    assert client.run(run.id).status == RunStatus.COMPLETED
    (huge, lookup) = tool_steps(client, run.id)
    assert not huge[2], huge[1][-300:]
    text, note = huge[1].rsplit("\n", 1)
    assert text == "x" * RESULT_CHARS
    # the server sent the text twice (content and structured content): 100 MB
    assert note.startswith("[cut: the server answered 100,000,")
    assert "the first 4,194,304 were read and at most 100,000 characters are kept]" in note
    assert lookup == ("glossary__lookup", "zinc: a metal used in batteries", False)


def test_the_limit_is_the_built_in_tools_one() -> None:
    assert RESULT_CHARS == MAX_READ_CHARS == 100_000


def test_an_answer_under_the_byte_cap_but_over_the_limit_is_cut_with_a_note(
    hub_for: HubFor,
) -> None:
    hub = hub_for(stdio_server())
    result = hub.call("glossary", "huge", {"megabytes": 0.25}, {}, 30)
    assert not result.is_error
    assert result.content == "x" * RESULT_CHARS + "\n[cut at 100,000 of 250,000 characters]"


def line(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def test_a_long_line_is_read_in_chunks_holding_the_cap_and_its_id_is_found_last() -> None:
    # a server that writes the id after the result (as some SDKs do), escapes in the text
    text = 'say "hi"\n' * 50_000 + "é€😀" * 1000
    message = line({"result": {"content": [{"type": "text", "text": text}]}, "id": 7})
    lines = _Lines(cap=10_000)
    done: list[bytes | _Cut] = []
    for start in range(0, len(message), 4096):
        done += lines.feed(message[start : start + 4096])
        held = len(lines.line) + (len(lines.cut.head) if lines.cut else 0)
        assert held <= 10_000  # never the whole message
    (cut,) = done
    assert isinstance(cut, _Cut) and cut.size == len(message) - 1
    read = _read_line(cut, {7: "tools/call"})
    assert read is not None
    answer = read.message
    assert answer.id == 7
    kept = answer.result["content"][0]["text"]
    assert text.startswith(kept) and 4000 < len(kept) < 10_000
    assert answer.result["_meta"][CUT_META]["received_bytes"] == len(message) - 1


def test_a_cut_inside_an_escape_or_a_character_keeps_the_text_readable() -> None:
    for text in ("\\" * 30_000, "\u00e9" * 30_000, "\U0001f600" * 30_000, "\x01" * 30_000):
        for cap in range(1000, 1012):
            raw = json.dumps(
                {"jsonrpc": "2.0", "id": "a", "result": {"content": [{"text": text}]}},
                ensure_ascii=cap % 2 == 0,
            ).encode()
            cut = _Cut(cap)
            cut.feed(raw)
            read = _read_line(cut, {"a": "tools/call"})
            assert read is not None
            kept = read.message.result["content"][0]["text"]
            assert kept and text.startswith(kept), (text[:1], cap)


def test_a_long_answer_to_anything_but_a_call_is_an_error_and_notices_are_dropped() -> None:
    tools = line({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "x" * 5000}]}})
    lines = _Lines(cap=1000)
    (cut,) = lines.feed(tools)
    read = _read_line(cut, {1: "tools/list"})
    assert read is not None
    assert read.message.error.message.startswith("the server answered 5,")
    notice = line(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"d": "x" * 5000}}
    )
    (cut,) = lines.feed(notice)
    assert _read_line(cut, {}) is None
    (short,) = lines.feed(line({"jsonrpc": "2.0", "id": 2, "result": {}}))
    assert short == b'{"jsonrpc":"2.0","id":2,"result":{}}'


# ------------------------------------------------------------------ timeouts


def test_a_call_that_times_out_resets_the_session_so_the_next_call_works(
    hub_for: HubFor,
) -> None:
    hub = hub_for(stdio_server(timeout_s=2))
    stuck = hub.call("glossary", "wedge", {}, {}, 2)  # the whole server is stuck
    after = hub.call("glossary", "lookup", {"word": "tin"}, {}, 2)
    assert (after.is_error, after.content) == (False, "tin: a metal used in batteries")
    assert stuck.is_error
    assert "did not answer wedge within 2 s" in stuck.content
    assert "its session was reset" in stuck.content
    assert hub.status["glossary"].state == "connected"


# ------------------------------------------------------------------ servers that keep failing


def test_a_server_that_keeps_failing_is_marked_failed_and_comes_back(
    hub_for: HubFor, tmp_path: Path
) -> None:
    catalogue = tmp_path / "mcp-tools.json"
    hub = hub_for(stdio_server(timeout_s=1), catalogue=catalogue, retry_failed_s=3600)
    results = [hub.call("glossary", "wedge", {}, {}, 1) for _ in range(FAIL_AFTER)]
    assert all(r.is_error and "did not answer wedge within 1 s" in r.content for r in results)
    assert "marked failed" not in results[-2].content
    assert "the server is marked failed after 3 failures in a row" in results[-1].content
    status = hub.status["glossary"]
    assert status.state == "failed"
    assert status.message.startswith("marked failed after 3 failures in a row (last: a timeout)")

    # its calls fail at once, saying why, instead of each waiting its timeout
    refused = hub.call("glossary", "lookup", {"word": "tin"}, {}, 1)
    assert refused.is_error
    assert refused.content.startswith("MCP server glossary is failed: marked failed after 3")

    # `desktop-agent mcp list` shows it (the catalogue the worker keeps current)
    listed = read_catalogue(catalogue)
    (server,) = listed["servers"]
    assert server["state"] == "failed" and "marked failed" in server["message"]
    assert any(
        line.startswith("glossary (stdio) failed: marked failed after 3 failures")
        for line in _lines(listed, 1)
    )

    # a reconnection that works brings it back (here asked for; else after the pause)
    hub.reconnect("glossary")
    wait_until(lambda: hub.status["glossary"].state == "connected", 30, "glossary back")
    again = hub.call("glossary", "lookup", {"word": "tin"}, {}, 1)
    assert (again.is_error, again.content) == (False, "tin: a metal used in batteries")
    assert read_catalogue(catalogue)["servers"][0]["state"] == "connected"

    # marked again, it is tried again by itself after its pause
    hub.retry_failed_s = 0.1
    hub.call("glossary", "lookup", {"word": "tin"}, {}, 1)  # an answer resets the pause
    for _ in range(FAIL_AFTER):
        hub.call("glossary", "wedge", {}, {}, 1)
    wait_until(lambda: hub.status["glossary"].state == "connected", 30, "glossary back")
    back = hub.call("glossary", "lookup", {"word": "lead"}, {}, 1)
    assert (back.is_error, back.content) == (False, "lead: a metal used in batteries")


def test_a_failure_between_answers_does_not_mark_a_server_failed(hub_for: HubFor) -> None:
    hub = hub_for(stdio_server(timeout_s=1), retry_failed_s=3600)
    for _ in range(FAIL_AFTER):
        assert hub.call("glossary", "wedge", {}, {}, 1).is_error
        ok = hub.call("glossary", "lookup", {"word": "tin"}, {}, 1)
        assert not ok.is_error, ok.content
    assert hub.status["glossary"].state == "connected"


def test_a_huge_answer_over_http_is_cut_too(http_server: Callable[[], str]) -> None:
    hub = McpHub(parse_servers([{"name": "remote", "url": http_server(), "timeout_s": 30}]))
    hub.start()
    try:
        assert hub.status["remote"].state == "connected", hub.status["remote"].message
        huge = hub.call("remote", "huge", {"megabytes": 20}, {}, 30)
        assert not huge.is_error, huge.content[-300:]
        text, note = huge.content.rsplit("\n", 1)
        assert text == "x" * RESULT_CHARS
        assert note.startswith("[cut: the server answered 40,000,")
        after = hub.call("remote", "lookup", {"word": "tin"}, {}, 10)
        assert (after.is_error, after.content) == (False, "tin: a metal used in batteries")
    finally:
        hub.close()
