"""The Claude adapter alone, with the real SDK against the local fake Messages API."""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from typing import Any

import pytest

from desktop_agent.domain import Usage
from desktop_agent.domain.errors import (
    ApiConnectionError,
    AuthenticationError,
    BadRequestError,
    RateLimitedError,
    RunCancelled,
)
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from desktop_agent.llm.claude import NO_KEY_MESSAGE, ClaudeModel
from desktop_agent.llm.pacing import RateLimitPacer
from desktop_agent.llm.pricing import model_info
from tests.helpers.fake_anthropic import (
    Raw,
    Status,
    Stream,
    Text,
    Thinking,
    ToolUse,
    ratelimit_headers,
)
from tests.helpers.polling import wait_until
from tests.llm.conftest import KEY, MakeModel, StartFake

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

TOOLS = [
    {"name": "list_files", "description": "List files.", "input_schema": {"type": "object"}},
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
]


def _request(
    model: str = "claude-sonnet-4-5",
    messages: list[dict[str, Any]] | None = None,
    **kw: Any,
) -> ModelRequest:
    msgs = messages or [{"role": "user", "content": [{"type": "text", "text": "Goal: look"}]}]
    return ModelRequest(
        model=model,
        system=kw.pop("system", "You are careful."),
        messages=msgs,
        tools=kw.pop("tools", TOOLS),
        max_tokens=kw.pop("max_tokens", 1024),
        **kw,
    )


class WatchedCancel(CancelToken):
    """A cancel token that records every wait asked of it: the adapter sleeps only on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.waiting = threading.Event()

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        self.waiting.set()
        return super().wait(timeout)


def _call(
    model: ClaudeModel, request: ModelRequest | None = None, cancel: CancelToken | None = None
) -> tuple[ModelResponse, list[str]]:
    texts: list[str] = []
    response = model.complete(
        request or _request(),
        idempotency_key="run1:1",
        on_text=texts.append,
        cancel=cancel or CancelToken(),
    )
    return response, texts


def _cache_controls(body: dict[str, Any]) -> list[str]:
    """Where the request put cache breakpoints, as readable paths."""
    found = [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    found += [f"system[{i}]" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for i, msg in enumerate(body["messages"]):
        content = msg["content"] if isinstance(msg["content"], list) else []
        found += [f"messages[{i}][{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return found


# --------------------------------------------------------------------------- requests


def test_request_caches_the_stable_prefix_and_keeps_thinking_blocks(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Stream([Text("done")])])
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Goal: look"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should list.", "signature": "sig-A"},
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "tu1", "name": "list_files", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a.md"}],
        },
    ]
    pristine = copy.deepcopy(history)
    request = _request(messages=history, max_tokens=1024, thinking_budget=2048)
    _call(make_model(fake), request)

    (sent,) = fake.requests
    body = sent.body
    assert _cache_controls(body) == [
        "tools[1]",
        "system[0]",
        "messages[0][0]",  # the newest message of the previous call: a guaranteed hit
        "messages[2][0]",  # the newest message
    ]
    assert body["system"][0]["text"] == "You are careful."
    # The signed thinking block goes back exactly as received, and never carries a breakpoint.
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "I should list.",
        "signature": "sig-A",
    }
    # Thinking budget within max_tokens, leaving the answer its own share.
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 2048 + 1024
    assert body["model"] == "claude-sonnet-4-5" and body["stream"] is True
    assert history == pristine  # the engine's messages are not modified
    # The key travels in the auth header only, and the SDK's own retries are off.
    assert sent.key == KEY
    assert KEY not in json.dumps(body)
    assert sent.headers["x-stainless-retry-count"] == "0"


def test_at_most_four_breakpoints_and_no_thinking_when_off(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Stream([Text("ok")])])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Goal: plain string content"}]
    for i in range(6):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"u{i}"}]})
    _call(make_model(fake), _request(messages=messages, system=""))
    body = fake.requests[0].body
    assert "system" not in body and "thinking" not in body
    assert _cache_controls(body) == ["tools[1]", "messages[10][0]", "messages[12][0]"]
    assert body["messages"][0]["content"] == "Goal: plain string content"


# --------------------------------------------------------------------------- responses


def test_stream_collects_text_tool_input_thinking_and_exact_usage(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake(
        [
            Stream(
                [
                    Thinking("Let me think about it.", signature="sig-XYZ"),
                    Text("Hello there, world!", chunk=5),
                    ToolUse("read_file", {"path": "notes/a.md", "max_chars": 500}, chunk=7),
                ],
                input_tokens=1000,
                output_tokens=50,
                cache_write=200,
                cache_read=300,
                model="claude-sonnet-4-5-20250929",
            )
        ]
    )
    response, texts = _call(make_model(fake), _request(thinking_budget=2048, max_tokens=4096))

    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert response.stop_reason == "tool_use"
    thinking, text, tool = response.content
    # The signed block is kept as the API sent it (the fake signs it over its prefix).
    assert thinking["type"] == "thinking" and thinking["thinking"] == "Let me think about it."
    assert isinstance(thinking["signature"], str) and len(thinking["signature"]) > 20
    assert text == {"type": "text", "text": "Hello there, world!"}
    assert tool["type"] == "tool_use" and tool["name"] == "read_file"
    assert tool["input"] == {"path": "notes/a.md", "max_chars": 500}
    assert str(tool["id"]).startswith("toolu_")
    assert response.thinking == "Let me think about it."
    # Live output: the thinking (marked), the text deltas, then the tool input as it streams.
    assert texts[:2] == ["\n(thinking) ", "Let me think abo"]
    assert texts[texts.index("Hello") : texts.index("Hello") + 4] == [
        "Hello",
        " ther",
        "e, wo",
        "rld!",
    ]
    assert "".join(texts) == (
        "\n(thinking) Let me think about it."
        'Hello there, world!\n[read_file] {"path": "notes/a.md", "max_chars": 500}'
    )
    # Usage: input and cache from message_start, output from message_delta.
    assert response.usage == Usage(1000, 50, 200, 300)
    # Sonnet 4.5: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million.
    assert response.cost_usd == pytest.approx(
        (1000 * 3 + 50 * 15 + 200 * 3.75 + 300 * 0.30) / 1e6, abs=1e-12
    )
    assert response.cost_usd == pytest.approx(0.00459, abs=1e-12)
    assert response.model == "claude-sonnet-4-5-20250929"


def test_server_tool_blocks_pass_through_unchanged(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    result_block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.org/a",
                "title": "A",
                "encrypted_content": "opaque",
            }
        ],
    }
    fake = start_fake(
        [
            Stream(
                [
                    Raw(
                        {
                            "type": "server_tool_use",
                            "id": "srvtoolu_1",
                            "name": "web_search",
                            "input": {"query": "growth 2025"},
                        }
                    ),
                    Raw(result_block),
                    Text("Growth was 4%."),
                ],
                stop_reason="end_turn",
            )
        ]
    )
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    response, texts = _call(make_model(fake), _request(tools=[*TOOLS, search]))
    sent = fake.requests[0].body["tools"][-1]
    assert sent == {**search, "cache_control": {"type": "ephemeral"}}
    use, result, text = response.content
    assert use == {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "growth 2025"},
    }
    assert result == result_block
    assert text == {"type": "text", "text": "Growth was 4%."}
    assert texts[0] == "\n[web_search] "


def test_context_window_and_worst_case_cost(make_model: MakeModel) -> None:
    model = make_model(base_url="http://127.0.0.1:9")
    assert model.context_window("claude-sonnet-4-5") == 200_000
    assert model.context_window("claude-haiku-4-5-20251001") == 200_000
    request = _request(max_tokens=4000)
    worst = model.worst_case_cost(request)
    assert worst >= 4000 * 15 / 1e6  # at least the full output
    assert worst < 0.1
    with_fallback = make_model(base_url="http://127.0.0.1:9", fallback="claude-opus-4-1")
    assert with_fallback.worst_case_cost(request) >= 4000 * 75 / 1e6


# --------------------------------------------------------------------------- failures


def test_429_with_long_retry_after_raises_at_once_and_holds_other_runs(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake(
        [Status(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "120"})]
    )
    pacer = RateLimitPacer()
    model = make_model(fake, pacer=pacer)
    cancel = WatchedCancel()
    with pytest.raises(RateLimitedError) as info:
        _call(model, cancel=cancel)
    assert cancel.waits == []  # never slept through the 120 s: raised without waiting
    assert info.value.retry_after == 120
    assert "429 rate_limit_error: Number of requests exceeded" in str(info.value)
    assert len(fake.requests) == 1  # no SDK retry either
    # Another run of the same process does not even send its request.
    other_run = make_model(fake, pacer=pacer)
    with pytest.raises(RateLimitedError) as again:
        _call(other_run)
    assert again.value.retry_after == pytest.approx(120, abs=2)
    assert len(fake.requests) == 1


def test_short_retry_after_is_waited_on_the_cancel_token_then_retried(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake(
        [
            Status(429, "rate_limit_error", "slow down", {"retry-after-ms": "300"}),
            Stream([Text("after the wait")]),
        ]
    )
    response, _ = _call(make_model(fake))
    assert response.content == [{"type": "text", "text": "after the wait"}]
    first, second = fake.requests
    assert second.at - first.at >= 0.28


@pytest.mark.parametrize(
    ("reply", "error", "retry_after", "requests", "text"),
    [
        (
            Status(529, "overloaded_error", "Overloaded", {"retry-after": "30"}),
            RateLimitedError,
            30,
            1,
            "overloaded (529 overloaded_error: Overloaded)",
        ),
        (Status(500, "api_error", "Internal error"), ApiConnectionError, None, 3, "500 api_error"),
        (
            Status(503, "api_error", "unavailable", {"retry-after": "60"}),
            ApiConnectionError,
            60,
            1,
            "503 api_error: unavailable",
        ),
        (
            Status(400, "invalid_request_error", "messages: text content blocks must be non-empty"),
            BadRequestError,
            None,
            1,
            "400 invalid_request_error: messages: text content blocks must be non-empty",
        ),
        (
            Status(404, "not_found_error", "model: claude-nope"),
            BadRequestError,
            None,
            1,
            "model: claude-nope",
        ),
        (
            Status(403, "permission_error", "not allowed"),
            AuthenticationError,
            None,
            1,
            "403 permission_error",
        ),
    ],
)
def test_error_statuses_map_to_engine_errors(
    start_fake: StartFake,
    make_model: MakeModel,
    reply: Status,
    error: type[Exception],
    retry_after: float | None,
    requests: int,
    text: str,
) -> None:
    fake = start_fake([reply])
    with pytest.raises(error) as info:
        _call(make_model(fake))
    assert text in str(info.value)
    assert getattr(info.value, "retry_after", None) == retry_after
    assert len(fake.requests) == requests


def test_server_error_then_success_is_retried_inside_the_call(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Status(500, "api_error", "oops"), Stream([Text("fine now")])])
    response, _ = _call(make_model(fake))
    assert response.content[0]["text"] == "fine now"
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("etype", "error"),
    [
        ("overloaded_error", RateLimitedError),
        ("api_error", ApiConnectionError),
        ("invalid_request_error", BadRequestError),
    ],
)
def test_mid_stream_error_event_is_handled_like_its_type(
    start_fake: StartFake, make_model: MakeModel, etype: str, error: type[Exception]
) -> None:
    fake = start_fake(
        [
            Stream(
                [Text("partial answer that breaks", chunk=8)],
                error=(etype, "went wrong"),
                error_after=2,
            ),
            Stream([Text("never reached")]),
        ]
    )
    with pytest.raises(error) as info:
        _call_collect = make_model(fake)
        texts: list[str] = []
        _call_collect.complete(
            _request(), idempotency_key="r:1", on_text=texts.append, cancel=CancelToken()
        )
    assert f"mid-stream {etype}: went wrong" in str(info.value)
    assert texts == ["partial ", "answer t"]  # streamed before the error
    assert len(fake.requests) == 1  # output already streamed: the engine decides, not us


def test_mid_stream_error_before_any_output_is_retried(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake(
        [
            Stream([Text("x")], error=("overloaded_error", "Overloaded"), error_after=0),
            Stream([Text("second try")]),
        ]
    )
    response, texts = _call(make_model(fake))
    assert texts == ["second try"]
    assert response.content[0]["text"] == "second try"
    assert len(fake.requests) == 2


def test_stream_cut_before_message_stop_is_a_connection_error(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Stream([Text("cut in the middle", chunk=4)], cut_after=2)])
    with pytest.raises(ApiConnectionError, match="ended before the message was complete"):
        _call(make_model(fake))
    assert len(fake.requests) == 1


def test_garbage_event_is_a_connection_error_in_plain_words(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Stream([Text("half an answer", chunk=4)], garbage_after=2)])
    with pytest.raises(ApiConnectionError) as caught:
        _call(make_model(fake))
    message = str(caught.value)
    assert message.startswith("the model API's answer broke off: an event was not valid JSON")
    assert "Error" not in message  # no exception class name (JSONDecodeError, ValueError)


def test_unreachable_api_is_a_connection_error(make_model: MakeModel) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens
    model = make_model(base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(ApiConnectionError, match="cannot reach the model API"):
        _call(model)


def test_missing_key_fails_before_any_request(start_fake: StartFake, make_model: MakeModel) -> None:
    fake = start_fake()
    for key in (None, "", "   "):
        with pytest.raises(AuthenticationError) as info:
            _call(make_model(fake, key=key))
        assert str(info.value) == NO_KEY_MESSAGE
    assert fake.requests == []


def test_rejected_key_is_an_authentication_error_without_the_key(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    bad = "sk-ant-api03-WRONG-key-0000000000"
    fake = start_fake([Stream([Text("hi")])], accept_keys={KEY})
    with pytest.raises(AuthenticationError) as info:
        _call(make_model(fake, key=bad))
    # What to do first, then the API's own words.
    assert str(info.value) == (
        "The API refused the API key: set a valid one in Settings > API key, with "
        "`desktop-agent key set`, or in ANTHROPIC_API_KEY "
        "(401 authentication_error: invalid x-api-key)"
    )
    assert len(fake.requests) == 1
    response, _ = _call(make_model(fake, key=KEY))
    assert response.content[0]["text"] == "hi"


def test_error_messages_never_carry_the_key(start_fake: StartFake, make_model: MakeModel) -> None:
    fake = start_fake([Status(400, "invalid_request_error", f"bad header value {KEY} given")])
    with pytest.raises(BadRequestError) as info:
        _call(make_model(fake))
    assert KEY not in str(info.value)
    assert "bad header value [redacted API key] given" in str(info.value)


def test_cancel_between_events_closes_the_stream(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    long_text = "word " * 200
    fake = start_fake([Stream([Text(long_text, chunk=5)], delay=0.02)])
    cancel = CancelToken()
    texts: list[str] = []

    def on_text(delta: str) -> None:
        texts.append(delta)
        if len(texts) == 3:  # set from another thread, as the worker does
            canceller = threading.Thread(target=cancel.cancel)
            canceller.start()
            canceller.join()

    with pytest.raises(RunCancelled):
        make_model(fake).complete(_request(), idempotency_key="r:1", on_text=on_text, cancel=cancel)
    assert 3 <= len(texts) < 10  # stopped at the next event, not at the end of the answer
    # The server was still streaming when the client closed: it hit a broken connection.
    wait_until(lambda: fake.disconnects > 0, what="the fake API to see the disconnect")
    assert fake.disconnects == 1  # the connection was closed: the API stops generating


# --------------------------------------------------------------------------- pacing


def test_pacing_waits_briefly_or_hibernates_from_ratelimit_headers(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake(
        lambda body, i: Stream(
            [Text(f"answer {i}")],
            headers=ratelimit_headers(requests_remaining=0, reset_in=1.0 if i == 0 else 45.0),
        )
    )
    model = make_model(fake)
    _call(model)
    # Bucket empty, full again in 1 s: the next call waits (cancellably) instead of a 429.
    _call(model)
    first, second = fake.requests
    assert second.at - first.at >= 0.7
    # Empty for 45 s: the call does not wait in a thread; the run hibernates.
    with pytest.raises(RateLimitedError) as info:
        _call(model)
    assert info.value.retry_after == pytest.approx(45, abs=3)
    assert len(fake.requests) == 2


def test_parallel_runs_share_the_pacer_and_spread_their_calls(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    refill = time.time() + 1.5
    fake = start_fake(
        lambda body, i: Stream(
            [Text("ok")],
            headers=ratelimit_headers(requests_remaining=max(0, 1 - i), reset_at=refill),
        )
    )
    pacer = RateLimitPacer()
    run_a, run_b = make_model(fake, pacer=pacer), make_model(fake, pacer=pacer)
    _call(run_a)  # learns: one request left until the bucket refills in 1.5 s
    results: list[str] = []

    def call(model: ClaudeModel) -> None:
        response, _ = _call(model)
        results.append(str(response.content[0]["text"]))

    threads = [threading.Thread(target=call, args=(m,)) for m in (run_a, run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == ["ok", "ok"]
    times = sorted(r.at for r in fake.requests[1:])
    assert times[1] >= refill - 0.05  # the second waited for the refill instead of a 429


def test_pacing_wait_is_cancellable(start_fake: StartFake, make_model: MakeModel) -> None:
    fake = start_fake(
        [Stream([Text("ok")], headers=ratelimit_headers(requests_remaining=0, reset_in=5.0))]
    )
    model = make_model(fake)
    _call(model)
    cancel = WatchedCancel()

    def cancel_once_waiting() -> None:
        if cancel.waiting.wait(30):
            cancel.cancel()

    canceller = threading.Thread(target=cancel_once_waiting)
    canceller.start()
    with pytest.raises(RunCancelled):
        _call(model, cancel=cancel)
    canceller.join()
    # The pacing wait (~5 s, to the refill) was a wait on the token, cut short by cancel.
    assert len(cancel.waits) == 1 and cancel.waits[0] == pytest.approx(5.0, abs=2.0)
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- fallback


def test_fallback_model_after_repeated_overload(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    def script(body: dict[str, Any], i: int) -> Status | Stream:
        if body["model"] == "claude-sonnet-4-5":
            return Status(529, "overloaded_error", "Overloaded", {"retry-after": "0"})
        return Stream([Text("from the fallback")], input_tokens=1000, output_tokens=100)

    fake = start_fake(script)
    model = make_model(fake, fallback="claude-haiku-4-5")
    response, _ = _call(model)
    assert [r.body["model"] for r in fake.requests] == [
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
    ]
    assert response.model == "claude-haiku-4-5"
    haiku = model_info("claude-haiku-4-5")
    assert response.cost_usd == pytest.approx((1000 * haiku.input + 100 * haiku.output) / 1e6)
    # While the overload is recent, the next call goes to the fallback directly.
    _call(model)
    assert fake.requests[-1].body["model"] == "claude-haiku-4-5"
    assert len(fake.requests) == 4


def test_without_fallback_overload_reaches_the_engine(
    start_fake: StartFake, make_model: MakeModel
) -> None:
    fake = start_fake([Status(529, "overloaded_error", "Overloaded")])
    with pytest.raises(RateLimitedError, match="overloaded"):
        _call(make_model(fake))
    assert len(fake.requests) == 3  # two quick retries, then the engine backs off
    assert {r.body["model"] for r in fake.requests} == {"claude-sonnet-4-5"}
