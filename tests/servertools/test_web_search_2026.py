"""The 2026 web search tool, end to end: run options, the request, the fake API, the price.

The version, its fields and the one-list rule are those of Anthropic's "Web search tool"
page (``web_search_20260318``; ``allowed_domains`` or ``blocked_domains``, not both);
the price is $10 per 1,000 searches (``llm/pricing.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain.catalogue import ModelEntry
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.builtin_tools import WEB_SEARCH_VERSION
from desktop_agent.engine.ports import CancelToken, ModelRequest
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy, build_params
from desktop_agent.llm.pacing import RateLimitPacer
from desktop_agent.llm.pricing import SERVER_TOOL_USD, model_info
from desktop_agent.persistence.catalogue import save_models
from tests.helpers import claude_contract as contract
from tests.helpers.fake_anthropic import FakeAnthropic, Raw, Stream, Text

KEY = "sk-ant-api03-test-0123456789abcdef"
NO_SEARCH = "claude-haiku-4-5"


@dataclass
class _Settings:
    fallback_model: str = ""


def _catalogue_without_search(model: str = NO_SEARCH) -> list[dict[str, Any]]:
    models = copy.deepcopy(snapshot_models())
    for m in models:
        if m["id"] == model:
            m["capabilities"]["server_tools"]["web_search"] = {"supported": False}
    return models


@pytest.fixture
def fake_searching() -> Iterator[FakeAnthropic]:
    """The fake API answering with two searches, their results, then the answer."""
    blocks: list[Any] = []
    for i, query in enumerate(("cloud 2025", "cloud 2026")):
        blocks += [
            Raw({"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": "web_search",
                 "input": {"query": query}}),
            Raw({"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{i}",
                 "content": [{"type": "web_search_result", "url": "https://example.com/a",
                              "title": "A", "encrypted_content": "opaque"}]}),
        ]  # fmt: skip
    with FakeAnthropic([Stream([*blocks, Text("It grew 4%.")], stop_reason="end_turn")]) as fake:
        yield fake


def _model(fake: FakeAnthropic, catalogue: Catalogue | None = None) -> ClaudeModel:
    model = ClaudeModel(
        lambda: KEY,
        _Settings(),
        base_url=fake.url,
        policy=RetryPolicy(backoff_s=0.01),
        pacer=RateLimitPacer(),
        timeout=20.0,
    )
    if catalogue is not None:
        model.catalogue = catalogue
    return model


def _request(model: str, tools: list[dict[str, Any]]) -> ModelRequest:
    return ModelRequest(
        model=model,
        system="Be careful.",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Goal: look"}]}],
        tools=tools,
        max_tokens=1024,
    )


SEARCH = {
    "type": WEB_SEARCH_VERSION,
    "name": "web_search",
    "max_uses": 3,
    "allowed_domains": ["example.com"],
}


def test_the_version_is_the_documented_2026_one() -> None:
    assert WEB_SEARCH_VERSION == "web_search_20260318"
    assert WEB_SEARCH_VERSION in contract.WEB_SEARCH_VERSIONS


def test_searches_are_priced_per_step_and_their_count_kept(
    fake_searching: FakeAnthropic,
) -> None:
    response = _model(fake_searching).complete(
        _request("claude-sonnet-5-5", [SEARCH]),
        idempotency_key="run1:1",
        on_text=lambda _t: None,
        cancel=CancelToken(),
    )
    sent = fake_searching.requests[0]
    assert sent.status == 200
    assert sent.body["tools"] == [{**SEARCH, "cache_control": {"type": "ephemeral"}}]
    assert [b["type"] for b in response.content] == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert response.details["server_tool_use"] == {"web_search_requests": 2}
    tokens = model_info("claude-sonnet-5-5").cost(response.usage)
    assert response.cost_usd == pytest.approx(tokens + 2 * 0.01)
    assert SERVER_TOOL_USD["web_search_requests"] == pytest.approx(10 / 1000)


def test_a_model_whose_catalogue_lacks_web_search_is_not_sent_it() -> None:
    catalogue = Catalogue(_catalogue_without_search())
    entry = catalogue.entry(NO_SEARCH)
    assert isinstance(entry, ModelEntry) and not entry.has("web_search")
    plain = {"name": "note", "description": "n", "input_schema": {"type": "object"}}
    params = build_params(_request(NO_SEARCH, [plain, SEARCH]), NO_SEARCH, catalogue)
    assert [t["name"] for t in params["tools"]] == ["note"]
    kept = build_params(_request("claude-sonnet-5-5", [plain, SEARCH]), "claude-sonnet-5-5")
    assert [t["name"] for t in kept["tools"]] == ["note", "web_search"]


def test_the_fake_refuses_web_search_on_a_model_without_it() -> None:
    rules = contract.resolve("claude-sonnet-5-5")
    assert rules is not None
    body = {"tools": [dict(SEARCH)]}
    assert contract._check_server_tools(body, rules, frozenset(), "claude-sonnet-5-5") is None
    without = dataclasses.replace(rules, web_search=False)
    error = contract._check_server_tools(body, without, frozenset(), "claude-x")
    assert error is not None and error.type == "invalid_request_error"
    assert "not supported on claude-x" in error.message


# --------------------------------------------------------------------------- run options


def test_allowed_domains_are_a_run_option(client: Client) -> None:
    spec, _ = client.prepare_run(
        model="claude-sonnet-5-5",
        web_search=True,
        search_domains=["Example.com", "example.org/blog", "example.com"],
    )
    assert "web_search" in spec.tool_names
    assert spec.search_domains == ("example.com", "example.org/blog")
    assert spec.to_json()["search_domains"] == ["example.com", "example.org/blog"]
    assert type(spec).from_json(spec.to_json()) == spec


def test_both_domain_lists_are_refused(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="not both"):
        client.prepare_run(
            model="claude-sonnet-5-5", search_domains=["a.test"], search_blocked_domains=["b.test"]
        )


def test_a_domain_with_a_scheme_is_refused(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="bare domain"):
        client.prepare_run(model="claude-sonnet-5-5", search_domains=["https://a.test"])


def test_the_run_option_turns_web_search_off_while_the_setting_is_on(client: Client) -> None:
    client.settings.web_search = True
    on, _ = client.prepare_run(model="claude-sonnet-5-5")
    off, _ = client.prepare_run(model="claude-sonnet-5-5", web_search=False)
    assert "web_search" in on.tool_names
    assert "web_search" not in off.tool_names
    assert off.web_search is False


def test_a_model_without_web_search_gets_none_and_the_run_says_so(client: Client) -> None:
    save_models(client.store.db, _catalogue_without_search(), time.time())
    spec, _ = client.prepare_run(model=NO_SEARCH, web_search=True)
    assert "web_search" not in spec.tool_names
    assert "does not take web search" in client.last_model_notice
    other, _ = client.prepare_run(model="claude-sonnet-5-5", web_search=True)
    assert "web_search" in other.tool_names
