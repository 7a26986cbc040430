"""http_post against a real HTTP server that records Idempotency-Key headers."""

from __future__ import annotations

import json

import pytest

from desktop_agent.domain import EffectClass
from desktop_agent.engine.control import run_tool
from desktop_agent.tools.http_post import HttpPost, honours_keys
from tests.tools.conftest import MakeCtx
from tests.tools.servers import HttpServer, KeyedEndpoint, Reply


def test_post_carries_the_step_key_and_returns_the_response(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/orders"] = Reply(201, b'{"id": 42}', {"Content-Type": "application/json"})
    ctx = make_ctx(run_id="r9", seq=7, allow_private_fetch=True)
    res = run_tool(
        HttpPost(),
        {
            "url": http_server.url("/orders"),
            "body": {"sku": "A1", "qty": 2},
            "headers": {"X-Trace": "t1"},
        },
        ctx,
    )
    assert not res.is_error, res.content
    assert res.content.startswith("HTTP 201 Created") and '{"id": 42}' in res.content
    (req,) = http_server.requests
    assert req.method == "POST"
    assert req.headers["idempotency-key"] == "r9:7"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["x-trace"] == "t1"
    assert json.loads(req.body) == {"sku": "A1", "qty": 2}


def test_post_errors_are_results_the_model_reads(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/bad"] = Reply(422, b"missing field sku")
    http_server.routes["/moved"] = Reply(307, b"", {"Location": "/elsewhere"})
    http_server.routes["/slow"] = Reply(200, b"late", delay=2.0)
    ctx = make_ctx(allow_private_fetch=True, http_timeout_s=0.3)
    bad = run_tool(HttpPost(), {"url": http_server.url("/bad"), "text": "x"}, ctx)
    assert bad.is_error and "HTTP 422" in bad.content and "missing field sku" in bad.content
    moved = run_tool(HttpPost(), {"url": http_server.url("/moved"), "body": {}}, ctx)
    assert "not followed" in moved.content
    assert http_server.hits("/elsewhere") == []
    slow = run_tool(HttpPost(), {"url": http_server.url("/slow"), "body": {}}, ctx)
    assert slow.is_error and "may or may not have acted" in slow.content
    for args in (
        {"url": http_server.url("/bad"), "body": {}, "text": "both"},
        {"url": http_server.url("/bad"), "headers": {"Idempotency-Key": "mine"}},
        {"url": http_server.url("/bad"), "headers": {"X-Evil": "a\r\nHost: b"}},
        {"url": http_server.url("/bad"), "headers": {"Bad Name": "v"}},
    ):
        res = run_tool(HttpPost(), args, ctx)
        assert res.is_error and "invalid arguments" in res.content
    assert len(http_server.hits("/bad")) == 1


def test_private_addresses_are_refused_for_posts(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/hook"] = Reply(200, b"ok")
    tool = HttpPost()
    args = {"url": http_server.url("/hook"), "body": {"a": 1}}
    res = run_tool(tool, args, make_ctx())
    assert res.is_error and "refused" in res.content
    assert tool.validate(args, make_ctx()) is not None  # checked again right before the effect
    assert http_server.requests == []


def test_endpoints_that_honour_keys_make_posts_idempotent(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    endpoint = KeyedEndpoint()
    http_server.routes["/api/v1/orders"] = endpoint
    tool = HttpPost()
    url = http_server.url("/api/v1/orders")
    plain = make_ctx(allow_private_fetch=True)
    honoured = make_ctx(
        allow_private_fetch=True, idempotent_post_prefixes=[http_server.url("/api/v1")]
    )
    args = {"url": url, "body": {"sku": "A1"}}
    assert tool.effect == EffectClass.UNSAFE
    assert tool.effect_of(args, plain) == EffectClass.UNSAFE
    assert tool.effect_of(args, honoured) == EffectClass.IDEMPOTENT
    assert tool.probe(args, plain) is None  # cannot tell: the user must decide
    assert tool.probe(args, honoured) is False  # a repeat with the same key is harmless
    run_tool(tool, args, honoured)
    again = run_tool(tool, args, honoured)
    assert "replayed" in again.content
    assert endpoint.keys == ["run1:3", "run1:3"] and len(endpoint.effects) == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.test/v1/orders", True),
        ("https://api.example.test/v1", True),
        ("https://api.example.test:443/v1/orders?x=1", True),
        ("https://API.example.test/v1/orders", True),
        ("https://api.example.test/v1-beta/orders", False),
        ("https://api.example.test/v2/orders", False),
        ("https://api.example.test.evil.test/v1/orders", False),
        ("http://api.example.test/v1/orders", False),
        ("https://api.example.test:8443/v1/orders", False),
        ("https://api.example.test/v1/%2e%2e/admin", False),
        ("https://api.example.test/v1/../admin", False),
        ("not a url", False),
    ],
)
def test_key_honouring_prefixes_match_whole_segments(url: str, expected: bool) -> None:
    assert honours_keys(url, ["https://api.example.test/v1/"]) is expected


def test_a_response_cut_off_mid_body_shows_what_came_and_says_so(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/cut"] = Reply(200, b"accepted: order 42", short_by=500)
    ctx = make_ctx(allow_private_fetch=True)
    res = run_tool(HttpPost(), {"url": http_server.url("/cut"), "body": {}}, ctx)
    assert "HTTP 200" in res.content and "accepted: order 42" in res.content
    assert "[the response was cut off]" in res.content
    assert len(http_server.hits("/cut")) == 1
