"""The fake Messages API enforces each model's documented contract, through the real SDK.

Table-driven: every documented refusal is sent through ``anthropic`` 2.14 to the strict fake
and must come back with the API's status, error type and message (exact where the docs or
real answers quote it, key words otherwise), and every documented acceptable request must be
answered. Focused tests cover preserved thinking (prefix checks, ``drop_block``, other
models' blocks), thinking display, progress text, on-demand compaction, the prompt cache
model with its clock, cache diagnostics, the Models API and ``count_tokens``.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import pytest
from anthropic.types import ModelInfo

from tests.helpers import claude_contract as contract
from tests.helpers.claude_contract import BETA_BLOCK_BINDING, BETA_COMPACTION, BETA_TASK_BUDGETS
from tests.helpers.fake_anthropic import (
    Compaction,
    FakeAnthropic,
    RedactedThinking,
    Reply,
    Stream,
    Text,
    Thinking,
    ToolUse,
)

KEY = "sk-ant-api03-test-contract"
SYSTEM = "You are a research assistant. Answer from the notes."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Search the notes.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]
QUESTION = "Where is the Q3 report?"
USER: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]

ENABLED_REFUSED = (
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)


def effort_refused(level: str) -> str:
    return (
        f"output_config.effort '{level}' is not supported when thinking is disabled on this "
        "model. Use effort 'high' or below, or enable thinking."
    )


def bound_elsewhere(i: int, j: int) -> str:
    return (
        f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound "
        "to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )


def agent(body: dict[str, Any], index: int) -> Reply:
    """A research turn: search when asked the question, else answer."""
    if body["messages"][-1]["content"] != QUESTION:
        return Stream([Thinking("The note answers it."), Text("It is in notes/q3.md.")])
    return Stream(
        [
            Thinking("I should search the notes first."),
            Text("Searching the notes."),
            ToolUse("search", {"q": "Q3 report"}),
        ]
    )


pytestmark = pytest.mark.filterwarnings(
    "ignore:The model .* is deprecated:DeprecationWarning",
    "ignore:Using Claude with .* is deprecated:UserWarning",
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    """One strict fake for the module (the agent script keeps no state between requests)."""
    with FakeAnthropic(agent) as server:
        yield server


def client_of(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0)


@pytest.fixture(scope="module")
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return client_of(fake)


def req(model: str, **params: Any) -> dict[str, Any]:
    """A request (a copy: tests edit it)."""
    return copy.deepcopy({"model": model, "max_tokens": 1024, "messages": USER, **params})


def declared(method: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with those the SDK method does not declare moved to ``extra_body``.

    SDK 2.14 declares no ``temperature`` / ``top_p`` / ``top_k``: they go as extra body.
    """
    names = inspect.signature(method).parameters
    extra = {k: v for k, v in params.items() if k not in names}
    known = {k: v for k, v in params.items() if k in names}
    if extra:
        known["extra_body"] = {**known.get("extra_body", {}), **extra}
    return known


def send(
    client: anthropic.Anthropic, params: dict[str, Any], betas: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Create a message (non-streamed) and return it as a dict."""
    if betas:
        beta = client.beta.messages.create
        answer: dict[str, Any] = beta(
            betas=list(betas), **declared(beta, params), timeout=20.0
        ).model_dump()
        return answer
    create = client.messages.create
    # an explicit timeout: the SDK refuses large non-streamed max_tokens without one
    answer = create(**declared(create, params), timeout=20.0).model_dump()
    return answer


def stream(
    client: anthropic.Anthropic, params: dict[str, Any], betas: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Stream a message through the SDK's accumulator and return the final one as a dict."""
    if betas:
        beta = client.beta.messages.stream
        with beta(betas=list(betas), **declared(beta, params)) as beta_stream:
            return beta_stream.get_final_message().model_dump()
    with client.messages.stream(**declared(client.messages.stream, params)) as message_stream:
        return message_stream.get_final_message().model_dump()


def sent_back(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as a client sends it back (unchanged, ``None`` fields left out)."""
    content = [{k: v for k, v in b.items() if v is not None} for b in message["content"]]
    return {"role": "assistant", "content": content}


def tool_result(message: dict[str, Any]) -> dict[str, Any]:
    tool = next(b for b in message["content"] if b["type"] == "tool_use")
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": "q3.md"}],
    }


def converse(
    client: anthropic.Anthropic, model: str, betas: tuple[str, ...] = (), **params: Any
) -> list[dict[str, Any]]:
    """Two turns of a tool conversation, returned ready for a third request.

    Messages: 0 user question, 1 assistant (thinking, progress, tool_use), 2 tool result,
    3 assistant (thinking, text), 4 user follow-up.
    """
    base = {"model": model, "max_tokens": 2048, "system": SYSTEM, "tools": TOOLS, **params}
    messages = copy.deepcopy(USER)
    first = stream(client, base | {"messages": messages}, betas)
    messages += [sent_back(first), tool_result(first)]
    second = stream(client, base | {"messages": messages}, betas)
    return [*messages, sent_back(second), {"role": "user", "content": "Thanks. Summarize it."}]


def third(model: str, messages: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 2048,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
        **params,
    }


# --------------------------------------------------------------------------- refusal table


@dataclass
class Refusal:
    params: dict[str, Any]
    status: int = 400
    type: str = "invalid_request_error"
    exact: str | None = None
    words: tuple[str, ...] = ()
    betas: tuple[str, ...] = ()
    extra_body: dict[str, Any] = field(default_factory=dict)


def refusal(name: str, params: dict[str, Any], **kw: Any) -> Any:
    return pytest.param(Refusal(params, **kw), id=name)


PREFILL = [*USER, {"role": "assistant", "content": "The report is in"}]
FORCED_ANY = {"tools": TOOLS, "tool_choice": {"type": "any"}}
FORCED_TOOL = {"tools": TOOLS, "tool_choice": {"type": "tool", "name": "search"}}


def cached_blocks(n: int, ttls: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i in range(n):
        mark: dict[str, Any] = {"type": "ephemeral"}
        if i < len(ttls):
            mark["ttl"] = ttls[i]
        blocks.append({"type": "text", "text": f"Rule {i}.", "cache_control": mark})
    return blocks


REFUSALS = [
    # ---- Sonnet 5.5: the five settings, and between_tools above high
    refusal(
        "sonnet-5-5 thinking disabled points to between_tools",
        req("claude-sonnet-5-5", thinking={"type": "disabled"}),
        words=('"disabled"', "between_tools", "claude-sonnet-5-5"),
    ),
    refusal(
        "sonnet-5-5 thinking enabled with budget",
        req("claude-sonnet-5-5", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "sonnet-5-5 between_tools at xhigh",
        req(
            "claude-sonnet-5-5",
            thinking={"type": "between_tools"},
            output_config={"effort": "xhigh"},
        ),
        words=("'xhigh'", "between_tools", "claude-sonnet-5-5"),
    ),
    refusal(
        "sonnet-5-5 between_tools at max",
        req(
            "claude-sonnet-5-5", thinking={"type": "between_tools"}, output_config={"effort": "max"}
        ),
        words=("'max'", "between_tools"),
    ),
    refusal(
        "sonnet-5-5 temperature",
        req("claude-sonnet-5-5", temperature=0.2),
        words=("temperature", "claude-sonnet-5-5"),
    ),
    refusal("sonnet-5-5 top_p", req("claude-sonnet-5-5", top_p=0.9), words=("top_p",)),
    refusal("sonnet-5-5 top_k", req("claude-sonnet-5-5", top_k=5), words=("top_k",)),
    refusal(
        "sonnet-5-5 assistant prefill",
        req("claude-sonnet-5-5", messages=PREFILL),
        words=("prefill", "claude-sonnet-5-5"),
    ),
    refusal(
        "sonnet-5-5 tool_choice any",
        req("claude-sonnet-5-5", **FORCED_ANY),
        words=("tool_choice", "'any'", "claude-sonnet-5-5"),
    ),
    refusal(
        "sonnet-5-5 tool_choice tool", req("claude-sonnet-5-5", **FORCED_TOOL), words=("'tool'",)
    ),
    # ---- the other preserved-thinking models
    refusal(
        "opus-5-5 tool_choice tool", req("claude-opus-5-5", **FORCED_TOOL), words=("tool_choice",)
    ),
    refusal(
        "fable-5-1 tool_choice any", req("claude-fable-5-1", **FORCED_ANY), words=("tool_choice",)
    ),
    refusal(
        "fable-5-2 tool_choice any", req("claude-fable-5-2", **FORCED_ANY), words=("tool_choice",)
    ),
    refusal(
        "mythos-5-1 tool_choice any", req("claude-mythos-5-1", **FORCED_ANY), words=("tool_choice",)
    ),
    refusal(
        "mythos-5-2 tool_choice tool",
        req("claude-mythos-5-2", **FORCED_TOOL),
        words=("tool_choice",),
    ),
    refusal(
        "opus-5-5 thinking disabled (always on)",
        req("claude-opus-5-5", thinking={"type": "disabled"}),
        words=('"disabled"', "claude-opus-5-5"),
    ),
    refusal(
        "opus-5-5 between_tools",
        req("claude-opus-5-5", thinking={"type": "between_tools"}),
        words=("between_tools", "claude-opus-5-5"),
    ),
    refusal(
        "opus-5-5 temperature", req("claude-opus-5-5", temperature=0.0), words=("temperature",)
    ),
    refusal(
        "fable-5-2 thinking disabled",
        req("claude-fable-5-2", thinking={"type": "disabled"}),
        words=('"disabled"',),
    ),
    refusal(
        "mythos-5-1 thinking disabled",
        req("claude-mythos-5-1", thinking={"type": "disabled"}),
        words=('"disabled"',),
    ),
    refusal(
        "fable-5-1 thinking enabled",
        req("claude-fable-5-1", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "haiku-5-5 thinking disabled",
        req("claude-haiku-5-5", thinking={"type": "disabled"}),
        words=('"disabled"', "claude-haiku-5-5"),
    ),
    refusal(
        "haiku-5-5 between_tools",
        req("claude-haiku-5-5", thinking={"type": "between_tools"}),
        words=("between_tools", "claude-haiku-5-5"),
    ),
    refusal(
        "haiku-5-5 thinking enabled",
        req("claude-haiku-5-5", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal("haiku-5-5 prefill", req("claude-haiku-5-5", messages=PREFILL), words=("prefill",)),
    refusal("haiku-5-5 top_k", req("claude-haiku-5-5", top_k=40), words=("top_k",)),
    # ---- legacy 2026 models
    refusal(
        "fable-5 thinking disabled",
        req("claude-fable-5", thinking={"type": "disabled"}),
        words=('"disabled"', "claude-fable-5"),
    ),
    refusal(
        "mythos-5 thinking enabled",
        req("claude-mythos-5", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "sonnet-5 thinking enabled",
        req("claude-sonnet-5", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "sonnet-5 between_tools",
        req("claude-sonnet-5", thinking={"type": "between_tools"}),
        words=("between_tools", "claude-sonnet-5"),
    ),
    refusal(
        "opus-5 thinking disabled at xhigh",
        req("claude-opus-5", thinking={"type": "disabled"}, output_config={"effort": "xhigh"}),
        exact=effort_refused("xhigh"),
    ),
    refusal("opus-5 top_k", req("claude-opus-5", top_k=3), words=("top_k",)),
    refusal(
        "opus-4-8 thinking enabled",
        req("claude-opus-4-8", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "opus-4-8 thinking disabled at max",
        req("claude-opus-4-8", thinking={"type": "disabled"}, output_config={"effort": "max"}),
        exact=effort_refused("max"),
    ),
    refusal(
        "opus-4-7 thinking disabled at xhigh",
        req("claude-opus-4-7", thinking={"type": "disabled"}, output_config={"effort": "xhigh"}),
        exact=effort_refused("xhigh"),
    ),
    refusal(
        "opus-4-7 thinking enabled",
        req("claude-opus-4-7", thinking={"type": "enabled", "budget_tokens": 2048}),
        exact=ENABLED_REFUSED,
    ),
    refusal(
        "opus-4-7 temperature",
        req("claude-opus-4-7", temperature=0.5),
        words=("temperature", "claude-opus-4-7"),
    ),
    refusal("opus-4-8 prefill", req("claude-opus-4-8", messages=PREFILL), words=("prefill",)),
    # ---- 4.6 and 4.5
    refusal(
        "opus-4-6 prefill",
        req("claude-opus-4-6", messages=PREFILL),
        words=("prefill", "claude-opus-4-6"),
    ),
    refusal("sonnet-4-6 prefill", req("claude-sonnet-4-6", messages=PREFILL), words=("prefill",)),
    refusal(
        "sonnet-4-6 effort xhigh",
        req("claude-sonnet-4-6", output_config={"effort": "xhigh"}),
        words=("'xhigh'", "claude-sonnet-4-6"),
    ),
    refusal(
        "opus-4-5 adaptive thinking",
        req("claude-opus-4-5", thinking={"type": "adaptive"}),
        words=('"adaptive"', "claude-opus-4-5"),
    ),
    refusal(
        "opus-4-5 effort xhigh",
        req("claude-opus-4-5", output_config={"effort": "xhigh"}),
        words=("'xhigh'",),
    ),
    refusal(
        "haiku-4-5 effort",
        req("claude-haiku-4-5", output_config={"effort": "low"}),
        words=("effort", "claude-haiku-4-5"),
    ),
    refusal(
        "haiku-4-5 budget under 1024",
        req("claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 512}),
        words=("budget_tokens", "1024"),
    ),
    refusal(
        "haiku-4-5 budget not below max_tokens",
        req("claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 1024}),
        words=("max_tokens", "budget_tokens"),
    ),
    refusal(
        "haiku-4-5 forced tool use with thinking",
        req(
            "claude-haiku-4-5",
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 2048},
            **FORCED_ANY,
        ),
        words=("tool_choice", "thinking"),
    ),
    refusal(
        "sonnet-4-5 temperature with extended thinking",
        req(
            "claude-sonnet-4-5",
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 2048},
            temperature=0.3,
        ),
        words=("temperature", "extended thinking"),
    ),
    # ---- every model
    refusal(
        "five cache_control blocks",
        req("claude-sonnet-5-5", system=cached_blocks(5)),
        exact="A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    refusal(
        "cache_control over tools, system and messages",
        req(
            "claude-haiku-4-5",
            tools=[dict(TOOLS[0], cache_control={"type": "ephemeral"})],
            system=cached_blocks(3),
            messages=[{"role": "user", "content": cached_blocks(2)}],
        ),
        exact="A maximum of 4 blocks with cache_control may be provided. Found 6.",
    ),
    refusal(
        "cache ttl 10m",
        req("claude-opus-5-5", system=cached_blocks(1, ("10m",))),
        words=("ttl", "'10m'"),
    ),
    refusal(
        "cache 1h after 5m",
        req("claude-opus-5-5", system=cached_blocks(2, ("5m", "1h"))),
        words=("'1h'", "'5m'", "system.1"),
    ),
    refusal(
        "max_tokens over sonnet-5-5 maximum",
        req("claude-sonnet-5-5", max_tokens=128_001),
        exact=(
            "max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens "
            "for claude-sonnet-5-5"
        ),
    ),
    refusal(
        "max_tokens over opus-4-5 maximum (dated id)",
        req("claude-opus-4-5-20251101", max_tokens=128_001),
        exact=(
            "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for "
            "claude-opus-4-5-20251101"
        ),
    ),
    refusal(
        "unknown effort value",
        req("claude-sonnet-5-5", output_config={"effort": "extreme"}),
        words=("output_config.effort", "'extreme'"),
    ),
    refusal(
        "system role message on sonnet-4-6",
        req("claude-sonnet-4-6", messages=[*USER, {"role": "system", "content": "Be brief."}]),
        words=("'system'", "claude-sonnet-4-6"),
    ),
    refusal(
        "context strategy compact on opus-4-5",
        req("claude-opus-4-5", context_management={"edits": [{"type": "compact_20260112"}]}),
        betas=("context-management-2025-06-27",),
        words=("compact_20260112", "claude-opus-4-5"),
    ),
    # ---- beta headers
    refusal(
        "compaction without its beta header",
        req("claude-opus-5-5"),
        extra_body={"compaction": {"type": "summarize"}},
        words=("compaction", BETA_COMPACTION),
    ),
    refusal(
        "compaction with context_management",
        req(
            "claude-opus-5-5",
            compaction={"type": "summarize"},
            context_management={"edits": [{"type": "compact_20260112"}]},
        ),
        betas=(BETA_COMPACTION,),
        words=("compaction", "context_management"),
    ),
    refusal(
        "compaction on haiku-4-5",
        req("claude-haiku-4-5", compaction={"type": "summarize"}),
        betas=(BETA_COMPACTION,),
        words=("summarize", "claude-haiku-4-5"),
    ),
    refusal(
        "block_binding without its beta header",
        req(
            "claude-sonnet-5-5",
            thinking={
                "type": "adaptive",
                "block_binding": {"prefix_mismatch_behavior": "drop_block"},
            },
        ),
        words=("thinking.block_binding", BETA_BLOCK_BINDING),
    ),
    refusal(
        "task_budget without its beta header",
        req("claude-opus-5-5", output_config={"task_budget": {"type": "tokens", "total": 64000}}),
        words=("task_budget", BETA_TASK_BUDGETS),
    ),
    refusal(
        "task_budget on sonnet-5",
        req("claude-sonnet-5", output_config={"task_budget": {"type": "tokens", "total": 64000}}),
        betas=(BETA_TASK_BUDGETS,),
        words=("task_budget", "claude-sonnet-5"),
    ),
    # ---- server tools: the web search tool's documented versions and fields only
    refusal(
        "web search with an unknown version",
        req("claude-sonnet-5-5", tools=[{"type": "web_search_20990101", "name": "web_search"}]),
        words=("tools.0", "'web_search_20990101'", "web_search_20260318"),
    ),
    refusal(
        "web search with a field it does not have",
        req(
            "claude-sonnet-5-5",
            tools=[{"type": "web_search_20260318", "name": "web_search", "domains": ["a.test"]}],
        ),
        words=("tools.0", "domains", "Extra inputs are not permitted"),
    ),
    refusal(
        "web search with both domain lists",
        req(
            "claude-sonnet-5-5",
            tools=[
                {
                    "type": "web_search_20260318",
                    "name": "web_search",
                    "allowed_domains": ["a.test"],
                    "blocked_domains": ["b.test"],
                }
            ],
        ),
        words=("allowed_domains", "blocked_domains"),
    ),
    refusal(
        "web search under another name",
        req("claude-sonnet-5-5", tools=[{"type": "web_search_20260318", "name": "search"}]),
        words=("tools.0", "name", "'web_search'"),
    ),
    refusal(
        "web search with max_uses 0",
        req(
            "claude-sonnet-5-5",
            tools=[{"type": "web_search_20260318", "name": "web_search", "max_uses": 0}],
        ),
        words=("max_uses",),
    ),
    # ---- models that are gone or unknown
    refusal(
        "retired sonnet-4-0",
        req("claude-sonnet-4-0"),
        status=404,
        type="not_found_error",
        exact="model: claude-sonnet-4-0",
    ),
    refusal(
        "retired opus-4-1 by dated id",
        req("claude-opus-4-1-20250805"),
        status=404,
        type="not_found_error",
        exact="model: claude-opus-4-1-20250805",
    ),
    refusal(
        "unknown model",
        req("claude-nonexistent-9"),
        status=404,
        type="not_found_error",
        exact="model: claude-nonexistent-9",
    ),
]


@pytest.mark.parametrize("case", REFUSALS)
def test_documented_refusals(
    fake: FakeAnthropic, client: anthropic.Anthropic, case: Refusal
) -> None:
    params = dict(case.params)
    if case.extra_body:
        params["extra_body"] = case.extra_body
    with pytest.raises(anthropic.APIStatusError) as caught:
        send(client, params, case.betas)
    error = caught.value
    assert error.status_code == case.status
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == case.type
    assert error.body["request_id"] == error.request_id
    message = error.body["error"]["message"]
    if case.exact is not None:
        assert message == case.exact
    for word in case.words:
        assert word in message
    answered = fake.requests[-1]
    assert (answered.status, answered.error and answered.error.message) == (case.status, message)


# --------------------------------------------------------------------------- accepted table


def accepted(name: str, params: dict[str, Any], betas: tuple[str, ...] = ()) -> Any:
    return pytest.param(params, betas, id=name)


ACCEPTED = [
    accepted(
        "sonnet-5-5 effort medium without thinking",
        req("claude-sonnet-5-5", output_config={"effort": "medium"}),
    ),
    accepted(
        "sonnet-5-5 between_tools at high",
        req(
            "claude-sonnet-5-5",
            thinking={"type": "between_tools"},
            output_config={"effort": "high"},
        ),
    ),
    accepted(
        "sonnet-5-5 between_tools at default effort",
        req("claude-sonnet-5-5", thinking={"type": "between_tools"}),
    ),
    accepted(
        "sonnet-5-5 between_tools at low",
        req(
            "claude-sonnet-5-5", thinking={"type": "between_tools"}, output_config={"effort": "low"}
        ),
    ),
    accepted(
        "sonnet-5-5 adaptive at max",
        req("claude-sonnet-5-5", thinking={"type": "adaptive"}, output_config={"effort": "max"}),
    ),
    accepted("sonnet-5-5 temperature at its default", req("claude-sonnet-5-5", temperature=1.0)),
    accepted(
        "sonnet-5-5 tool_choice auto",
        req("claude-sonnet-5-5", tools=TOOLS, tool_choice={"type": "auto"}),
    ),
    accepted(
        "sonnet-5-5 system message mid-conversation",
        req(
            "claude-sonnet-5-5",
            messages=[
                *USER,
                {"role": "system", "content": "Today is Friday."},
                {"role": "user", "content": "Go on."},
            ],
        ),
    ),
    accepted(
        "opus-5-5 adaptive display summarized",
        req("claude-opus-5-5", thinking={"type": "adaptive", "display": "summarized"}),
    ),
    accepted("opus-5-5 effort xhigh", req("claude-opus-5-5", output_config={"effort": "xhigh"})),
    accepted("opus-5-5 max_tokens at its maximum", req("claude-opus-5-5", max_tokens=128_000)),
    accepted("haiku-5-5 forced tool use", req("claude-haiku-5-5", **FORCED_ANY)),
    accepted("haiku-5-5 effort max", req("claude-haiku-5-5", output_config={"effort": "max"})),
    accepted("fable-5-2 defaults", req("claude-fable-5-2")),
    accepted("mythos-5-2 adaptive", req("claude-mythos-5-2", thinking={"type": "adaptive"})),
    accepted(
        "sonnet-5 thinking disabled at xhigh",
        req("claude-sonnet-5", thinking={"type": "disabled"}, output_config={"effort": "xhigh"}),
    ),
    accepted("sonnet-5 forced tool use", req("claude-sonnet-5", **FORCED_TOOL)),
    accepted(
        "opus-5 thinking disabled at high",
        req("claude-opus-5", thinking={"type": "disabled"}, output_config={"effort": "high"}),
    ),
    accepted(
        "opus-4-8 thinking disabled at high",
        req("claude-opus-4-8", thinking={"type": "disabled"}, output_config={"effort": "high"}),
    ),
    accepted(
        "opus-4-7 adaptive at xhigh",
        req("claude-opus-4-7", thinking={"type": "adaptive"}, output_config={"effort": "xhigh"}),
    ),
    accepted(
        "opus-4-6 extended thinking still accepted",
        req(
            "claude-opus-4-6", max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048}
        ),
    ),
    accepted(
        "sonnet-4-6 adaptive at max",
        req("claude-sonnet-4-6", thinking={"type": "adaptive"}, output_config={"effort": "max"}),
    ),
    accepted("sonnet-4-6 sampling", req("claude-sonnet-4-6", temperature=0.2)),
    accepted(
        "haiku-4-5 enabled with budget",
        req(
            "claude-haiku-4-5", max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048}
        ),
    ),
    accepted(
        "haiku-4-5 dated id with sampling, prefill and forced tool",
        req("claude-haiku-4-5-20251001", temperature=0.0, top_k=5, messages=PREFILL, **FORCED_ANY),
    ),
    accepted(
        "opus-4-5 effort low with sampling",
        req("claude-opus-4-5", output_config={"effort": "low"}, temperature=0.7),
    ),
    accepted("sonnet-4-5 deprecated but served", req("claude-sonnet-4-5-20250929")),
    accepted(
        "four cache breakpoints, 1h before 5m",
        req(
            "claude-sonnet-5-5",
            tools=[dict(TOOLS[0], cache_control={"type": "ephemeral", "ttl": "1h"})],
            system=cached_blocks(2, ("1h", "5m")),
            messages=[{"role": "user", "content": cached_blocks(1)}],
        ),
    ),
    accepted(
        "block_binding with its beta header",
        req(
            "claude-sonnet-5-5",
            thinking={
                "type": "adaptive",
                "block_binding": {"prefix_mismatch_behavior": "drop_block"},
            },
        ),
        (BETA_BLOCK_BINDING,),
    ),
    accepted(
        "task_budget with its beta header",
        req(
            "claude-opus-5-5",
            output_config={"effort": "high", "task_budget": {"type": "tokens", "total": 64000}},
        ),
        (BETA_TASK_BUDGETS,),
    ),
    accepted(
        "web search 20260318 with allowed domains",
        req(
            "claude-sonnet-5-5",
            tools=[
                {
                    "type": "web_search_20260318",
                    "name": "web_search",
                    "max_uses": 3,
                    "allowed_domains": ["example.com", "example.org/blog"],
                },
                *TOOLS,
            ],
        ),
    ),
    accepted(
        "web search 20250305 with blocked domains",
        req(
            "claude-haiku-4-5",
            tools=[
                {"type": "web_search_20250305", "name": "web_search", "blocked_domains": ["x.test"]}
            ],
        ),
    ),
    accepted(
        "clear_tool_uses on haiku-4-5",
        req(
            "claude-haiku-4-5", context_management={"edits": [{"type": "clear_tool_uses_20250919"}]}
        ),
        ("context-management-2025-06-27",),
    ),
]


@pytest.mark.parametrize(("params", "betas"), ACCEPTED)
def test_documented_acceptable_requests(
    fake: FakeAnthropic, client: anthropic.Anthropic, params: dict[str, Any], betas: tuple[str, ...]
) -> None:
    message = send(client, params, betas)
    assert message["type"] == "message"
    assert message["stop_reason"] in ("end_turn", "tool_use")
    assert fake.requests[-1].status == 200
    streamed = stream(client, params, betas)
    assert [b["type"] for b in streamed["content"]] == [b["type"] for b in message["content"]]


# --------------------------------------------------------------------------- preserved thinking


def test_tool_conversation_sends_thinking_back_unchanged(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    before = len(fake.requests)
    params: dict[str, Any] = {"thinking": {"type": "adaptive", "display": "summarized"}}
    messages = converse(client, "claude-sonnet-5-5", **params)
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "thinking", "tool_use"]
    assert [b["type"] for b in messages[3]["content"]] == ["thinking", "text"]
    final = send(client, third("claude-sonnet-5-5", messages, **params))
    assert final["stop_reason"] == "end_turn"
    # the SDK's own objects sent back as they are, streamed this time
    with client.messages.stream(**third("claude-sonnet-5-5", USER)) as first_stream:
        first = first_stream.get_final_message()
    again = [
        *USER,
        {"role": "assistant", "content": first.content},
        tool_result(first.model_dump()),
    ]
    with client.messages.stream(**third("claude-sonnet-5-5", again)) as second_stream:
        assert second_stream.get_final_message().stop_reason == "end_turn"
    answered = fake.requests[before:]
    assert [r.status for r in answered] == [200] * 5
    assert all("input_transformations" not in (r.response or {}) for r in answered)


def edit_system(params: dict[str, Any]) -> None:
    params["system"] = SYSTEM + " Today is 2026-11-27."


def edit_tools(params: dict[str, Any]) -> None:
    params["tools"] = [*TOOLS, {"name": "fetch", "input_schema": {"type": "object"}}]


def edit_question(params: dict[str, Any]) -> None:
    params["messages"][0]["content"] = QUESTION + " (Q3 2026)"


def edit_tool_result(params: dict[str, Any]) -> None:
    params["messages"][2]["content"][0]["content"] = "q3-final.md"


def remove_first_thinking(params: dict[str, Any]) -> None:
    del params["messages"][1]["content"][0]


def edit_thinking_text(params: dict[str, Any]) -> None:
    params["messages"][3]["content"][0]["thinking"] = "Something else."


def summarize_locally(params: dict[str, Any]) -> None:
    """The case the docs name: older turns summarized, later thinking kept."""
    messages = params["messages"]
    params["messages"] = [{"role": "user", "content": "Earlier: we searched."}, *messages[3:]]


@pytest.mark.parametrize(
    ("edit", "index"),
    [
        pytest.param(edit_system, (1, 0), id="system edited"),
        pytest.param(edit_tools, (1, 0), id="tool list changed"),
        pytest.param(edit_question, (1, 0), id="earlier message edited"),
        pytest.param(edit_tool_result, (3, 0), id="tool result edited"),
        pytest.param(remove_first_thinking, (1, 0), id="earlier thinking block removed"),
        pytest.param(edit_thinking_text, (3, 0), id="thinking text changed"),
        pytest.param(summarize_locally, (1, 0), id="older turns summarized by the client"),
    ],
)
def test_changed_prefix_refused(
    client: anthropic.Anthropic,
    edit: Callable[[dict[str, Any]], None],
    index: tuple[int, int],
) -> None:
    params = third("claude-sonnet-5-5", converse(client, "claude-sonnet-5-5"))
    edit(params)
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(client, params)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": bound_elsewhere(*index)},
        "request_id": caught.value.request_id,
    }


def test_cache_control_is_not_part_of_the_prefix(client: anthropic.Anthropic) -> None:
    params = third("claude-sonnet-5-5", converse(client, "claude-sonnet-5-5"))
    params["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    params["system"] = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert send(client, params)["stop_reason"] == "end_turn"


def test_drop_block_drops_failing_blocks_and_reports_them(client: anthropic.Anthropic) -> None:
    messages = converse(client, "claude-sonnet-5-5")
    binding = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    params = third("claude-sonnet-5-5", messages, thinking=binding)
    edit_tool_result(params)
    message = send(client, params, (BETA_BLOCK_BINDING,))
    assert message["input_transformations"] == [
        {
            "type": "thinking_dropped",
            "path": "messages.3.content.0",
            "reason": "prefix_binding_mismatch",
        }
    ]
    edit_system(params)  # now every block fails: each turn's consecutive thinking blocks go
    message = send(client, params, (BETA_BLOCK_BINDING,))
    assert [(t["path"], t["reason"]) for t in message["input_transformations"]] == [
        ("messages.1.content.0", "prefix_binding_mismatch"),
        ("messages.1.content.1", "prefix_binding_mismatch"),
        ("messages.3.content.0", "prefix_binding_mismatch"),
    ]


def test_drop_block_needs_its_header_on_every_request(client: anthropic.Anthropic) -> None:
    binding = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    params = third("claude-sonnet-5-5", converse(client, "claude-sonnet-5-5"), thinking=binding)
    with pytest.raises(anthropic.BadRequestError, match=BETA_BLOCK_BINDING):
        send(client, params)


def test_block_from_another_model_is_dropped_silently(client: anthropic.Anthropic) -> None:
    messages = converse(client, "claude-opus-5-5")
    message = send(client, third("claude-sonnet-5-5", messages), ("any-beta-2026-01-01",))
    assert message["stop_reason"] == "end_turn"
    assert [(t["path"], t["reason"]) for t in message["input_transformations"]] == [
        ("messages.1.content.0", "model_binding_mismatch"),
        ("messages.1.content.1", "model_binding_mismatch"),
        ("messages.3.content.0", "model_binding_mismatch"),
    ]
    # Fable 5.1 reads Opus 5.5's blocks (and checks their prefix); not the other way round
    assert send(client, third("claude-fable-5-1", messages)).get("input_transformations") is None
    edit_system(params := third("claude-fable-5-1", messages))
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0"):
        send(client, params)
    back = converse(client, "claude-fable-5-1")
    dropped = send(client, third("claude-opus-5-5", back))["input_transformations"]
    assert {t["reason"] for t in dropped} == {"model_binding_mismatch"}


def test_signature_the_fake_never_issued_is_refused(client: anthropic.Anthropic) -> None:
    forged = [
        *USER,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "", "signature": "sig-opaque-123"},
                {"type": "text", "text": "It is in notes/q3.md."},
            ],
        },
        {"role": "user", "content": "Thanks."},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(client, third("claude-opus-5-5", forged))
    assert caught.value.body["error"]["message"] == bound_elsewhere(1, 0)  # type: ignore[index]
    redacted = copy.deepcopy(forged)
    redacted[1]["content"][0] = {"type": "redacted_thinking", "data": "opaque"}
    with pytest.raises(anthropic.BadRequestError, match="`redacted_thinking` block"):
        send(client, third("claude-opus-5-5", redacted))
    # models without bound thinking accept any signature
    assert send(client, third("claude-sonnet-5", forged))["stop_reason"] == "end_turn"
    assert send(client, third("claude-opus-4-6", forged))["stop_reason"] == "end_turn"


def test_redacted_thinking_is_signed_and_checked() -> None:
    script = [Stream([RedactedThinking(), Thinking("plan"), Text("Done.")])]
    with FakeAnthropic(script) as server:
        client = client_of(server)
        first = send(client, req("claude-mythos-5-2"))
        assert [b["type"] for b in first["content"]] == ["redacted_thinking", "thinking", "text"]
        assert first["content"][0]["data"] != "redacted-opaque-123"
        history = [*USER, sent_back(first), {"role": "user", "content": "More."}]
        assert send(client, req("claude-mythos-5-2", messages=history))["stop_reason"]
        history[1]["content"][0]["data"] = first["content"][1]["signature"]
        with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0"):
            send(client, req("claude-mythos-5-2", messages=history))


# --------------------------------------------------------------------------- display


def stream_events(client: anthropic.Anthropic, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The raw SSE events of a streamed answer, as dicts."""
    with client.messages.stream(**params) as events:
        return [e.model_dump() for e in events if e.type.startswith(("message", "content"))]


def delta_types(events: list[dict[str, Any]]) -> list[str]:
    return [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"]


def test_display_omitted_sends_only_a_signature() -> None:
    script = [Stream([Text("The answer."), Thinking("Secret reasoning.")])]
    with FakeAnthropic(script) as server:
        client = client_of(server)
        events = stream_events(client, req("claude-opus-5-5"))
        assert "thinking_delta" not in delta_types(events)
        assert delta_types(events)[0] == "signature_delta"
        final = server.requests[-1].response
        assert final is not None
        assert [b["type"] for b in final["content"]] == ["thinking", "text"]  # thinking first
        assert final["content"][0]["thinking"] == ""
        assert final["content"][0]["signature"]
        summarized = {"thinking": {"type": "adaptive", "display": "summarized"}}
        events = stream_events(client, req("claude-opus-5-5", **summarized))
        assert delta_types(events)[:3] == ["thinking_delta", "thinking_delta", "signature_delta"]
        final = server.requests[-1].response
        assert final is not None
        assert final["content"][0]["thinking"] == "Secret reasoning."
        # Claude 4.6 and earlier show it by default; thinking off sends none
        shown = send(
            client,
            req(
                "claude-opus-4-6",
                max_tokens=4096,
                thinking={"type": "enabled", "budget_tokens": 2048},
            ),
        )
        assert shown["content"][0]["thinking"] == "Secret reasoning."
        for params in (
            req("claude-opus-4-8", thinking={"type": "disabled"}),
            req("claude-haiku-4-5"),
            req("claude-sonnet-5-5", thinking={"type": "between_tools"}),
        ):
            assert [b["type"] for b in send(client, params)["content"]] == ["text"]


@pytest.mark.parametrize(
    ("model", "thinking", "expected"),
    [
        pytest.param(
            "claude-sonnet-5-5",
            None,
            [("thinking", ""), ("thinking", ""), ("tool_use", "")],
            id="sonnet-5-5 default",
        ),
        pytest.param(
            "claude-sonnet-5-5",
            {"type": "between_tools"},
            [("thinking", "Searching the notes."), ("tool_use", "")],
            id="sonnet-5-5 between_tools",
        ),
        pytest.param(
            "claude-opus-5-5",
            {"type": "adaptive", "display": "summarized"},
            [
                ("thinking", "I should search the notes first."),
                ("thinking", "Searching the notes."),
                ("tool_use", ""),
            ],
            id="opus-5-5 summarized",
        ),
        pytest.param(
            "claude-fable-5-2",
            None,
            [("thinking", ""), ("thinking", ""), ("tool_use", "")],
            id="fable-5-2 default",
        ),
        pytest.param(
            "claude-sonnet-5",
            {"type": "disabled"},
            [("text", "Searching the notes."), ("tool_use", "")],
            id="sonnet-5 keeps text",
        ),
        pytest.param(
            "claude-haiku-5-5",
            None,
            [("thinking", ""), ("text", "Searching the notes."), ("tool_use", "")],
            id="haiku-5-5 keeps text",
        ),
    ],
)
def test_progress_text_between_tool_calls(
    client: anthropic.Anthropic,
    model: str,
    thinking: dict[str, Any] | None,
    expected: list[tuple[str, str]],
) -> None:
    params = req(model, tools=TOOLS, **({"thinking": thinking} if thinking else {}))
    message = stream(client, params)
    shown = [(b["type"], b.get("thinking") or b.get("text") or "") for b in message["content"]]
    assert shown == expected


# --------------------------------------------------------------------------- compaction


def test_compaction_returns_a_single_signed_block() -> None:
    script = [Stream([Compaction("We looked for the Q3 report; it is in notes/q3.md.")])]
    with FakeAnthropic(script) as server:
        client = client_of(server)
        params = req("claude-opus-5-5", compaction={"type": "summarize"})
        message = stream(client, params, (BETA_COMPACTION,))
    assert message["stop_reason"] == "compaction"
    [block] = message["content"]
    assert block["type"] == "compaction"
    assert block["content"] == "We looked for the Q3 report; it is in notes/q3.md."
    assert block["signature"]
    assert message["usage"]["output_tokens"] == math.ceil(len(block["content"]) / 4)


def compacted(
    client: anthropic.Anthropic, model: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A compaction block of the first turn, and the conversation that went on meanwhile."""
    messages = converse(client, model)
    summarized = messages[:3]  # question, tool call, tool result
    block_params = third(model, summarized, compaction={"type": "summarize"})
    summary = send(client, block_params, (BETA_COMPACTION,))
    assert summary["stop_reason"] == "compaction"
    return sent_back(summary), messages


def test_kept_turns_after_a_compaction_block_stay_valid(client: anthropic.Anthropic) -> None:
    block, messages = compacted(client, "claude-sonnet-5-5")
    kept = [block, *messages[3:]]  # thinking of message 3 was produced after the summary
    message = send(client, third("claude-sonnet-5-5", kept), (BETA_COMPACTION,))
    assert message["stop_reason"] == "end_turn"
    assert message.get("input_transformations") is None
    # and the conversation goes on from there
    history = [*kept, sent_back(message), {"role": "user", "content": "And Q4?"}]
    assert send(client, third("claude-sonnet-5-5", history), (BETA_COMPACTION,))["stop_reason"]
    # a block that stands for other messages does not make the kept thinking valid
    other, _ = compacted(client, "claude-sonnet-5-5")
    other_turns = converse(client, "claude-sonnet-5-5", system=SYSTEM + " Be brief.")
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0"):
        send(client, third("claude-sonnet-5-5", [other, *other_turns[3:]]), (BETA_COMPACTION,))


@pytest.mark.parametrize(
    ("tamper", "error_type", "code"),
    [
        pytest.param(
            lambda m: m[0]["content"][0].update(content="Nothing happened."),
            anthropic.types.CompactionContentMismatchError,
            "compaction_content_mismatch",
            id="content altered",
        ),
        pytest.param(
            lambda m: m[0]["content"][0].update(signature="cmp.0.0.0"),
            anthropic.types.CompactionSignatureInvalidError,
            "compaction_signature_invalid",
            id="signature forged",
        ),
        pytest.param(
            lambda m: m.insert(0, {"role": "user", "content": "Hello."}),
            anthropic.types.CompactionBlockMisplacedError,
            "compaction_block_misplaced",
            id="block not first",
        ),
        pytest.param(
            lambda m: m.insert(1, copy.deepcopy(m[0])),
            anthropic.types.CompactionBlockAmbiguousError,
            "compaction_block_ambiguous",
            id="two blocks",
        ),
    ],
)
def test_compaction_block_errors(
    client: anthropic.Anthropic,
    tamper: Callable[[list[dict[str, Any]]], None],
    error_type: type[anthropic.APIStatusError],
    code: str,
) -> None:
    block, messages = compacted(client, "claude-sonnet-5-5")
    kept = [copy.deepcopy(block), *messages[3:]]
    tamper(kept)
    with pytest.raises(error_type) as caught:
        send(client, third("claude-sonnet-5-5", kept), (BETA_COMPACTION,))
    assert caught.value.status_code == 400
    assert caught.value.error_code == code


def test_compaction_block_needs_its_header(client: anthropic.Anthropic) -> None:
    block, messages = compacted(client, "claude-opus-5-5")
    with pytest.raises(anthropic.BadRequestError, match=BETA_COMPACTION):
        send(client, third("claude-opus-5-5", [block, *messages[3:]]))


def test_default_compaction_summary_is_deterministic(client: anthropic.Anthropic) -> None:
    block, messages = compacted(client, "claude-opus-5-5")
    params = third("claude-opus-5-5", messages[:3], compaction={"type": "summarize"})
    again = send(client, params, (BETA_COMPACTION,))
    summary = again["content"][0]
    assert (summary["content"], summary["signature"]) == (
        block["content"][0]["content"],
        block["content"][0]["signature"],
    )
    assert "3 messages" in summary["content"]


# --------------------------------------------------------------------------- prompt cache


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cached(clock: Clock) -> Iterator[anthropic.Anthropic]:
    with FakeAnthropic([Stream([Text("ok")])], cache=True, clock=clock) as server:
        yield client_of(server)


LONG_SYSTEM = "Rules of the research desk. " * 60


def cached_request(ttl: str = "5m", question: str = QUESTION, **params: Any) -> dict[str, Any]:
    system = [
        {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": ttl}}
    ]
    return req(
        "claude-sonnet-5-5",
        system=system,
        tools=TOOLS,
        messages=[{"role": "user", "content": question}],
        **params,
    )


def usage(message: dict[str, Any]) -> tuple[int, int, int]:
    """(input, cache write, cache read) tokens."""
    u = message["usage"]
    return u["input_tokens"], u["cache_creation_input_tokens"], u["cache_read_input_tokens"]


def test_cache_hit_after_an_unchanged_prefix(cached: anthropic.Anthropic) -> None:
    first = send(cached, cached_request())
    rest, written, read = usage(first)
    assert written > 0 and read == 0 and rest > 0
    assert first["usage"]["cache_creation"] == {
        "ephemeral_5m_input_tokens": written,
        "ephemeral_1h_input_tokens": 0,
    }
    assert usage(send(cached, cached_request())) == (rest, 0, written)
    # a different question after the breakpoint still reads the cached tools and system
    other = send(cached, cached_request(question="And the Q4 one?"))
    assert usage(other)[1:] == (0, written)


def test_cache_5m_entry_expires_after_6_minutes(cached: anthropic.Anthropic, clock: Clock) -> None:
    rest, written, _ = usage(send(cached, cached_request()))
    clock.advance(4)
    assert usage(send(cached, cached_request())) == (rest, 0, written)  # read refreshes
    clock.advance(4)
    assert usage(send(cached, cached_request())) == (rest, 0, written)
    clock.advance(6)
    assert usage(send(cached, cached_request())) == (rest, written, 0)


def test_cache_1h_entry_survives_50_minutes(cached: anthropic.Anthropic, clock: Clock) -> None:
    first = send(cached, cached_request("1h"))
    rest, written, _ = usage(first)
    assert first["usage"]["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": written,
    }
    clock.advance(50)
    assert usage(send(cached, cached_request("1h"))) == (rest, 0, written)
    clock.advance(61)
    assert usage(send(cached, cached_request("1h"))) == (rest, written, 0)


def test_cache_mixed_ttls_and_a_growing_conversation(
    cached: anthropic.Anthropic, clock: Clock
) -> None:
    def turn(messages: list[dict[str, Any]]) -> dict[str, Any]:
        marked = copy.deepcopy(messages)
        last = marked[-1]
        last["content"] = [
            {"type": "text", "text": last["content"], "cache_control": {"type": "ephemeral"}}
        ]
        return send(cached, cached_request("1h") | {"messages": marked})

    messages = [{"role": "user", "content": QUESTION}]
    first = turn(messages)
    split = first["usage"]["cache_creation"]
    head, tail = split["ephemeral_1h_input_tokens"], split["ephemeral_5m_input_tokens"]
    assert head > 0 and tail > 0 and first["usage"]["input_tokens"] == 0
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "More?"}]
    second = turn(messages)  # the new breakpoint looks back to the previous one
    assert second["usage"]["cache_read_input_tokens"] == head + tail
    clock.advance(50)  # the 5m entries are gone, the 1h one is not
    third_turn = turn(messages)
    assert third_turn["usage"]["cache_read_input_tokens"] == head
    assert third_turn["usage"]["cache_creation"]["ephemeral_5m_input_tokens"] > tail


def test_cache_is_per_model(cached: anthropic.Anthropic) -> None:
    _, written, _ = usage(send(cached, cached_request()))
    assert usage(send(cached, cached_request() | {"model": "claude-opus-5-5"}))[1:] == (written, 0)


def changed(params: dict[str, Any], change: str) -> dict[str, Any]:
    params = copy.deepcopy(params)
    if change == "model":
        params["model"] = "claude-opus-5-5"
    elif change == "system":
        params["system"][0]["text"] = LONG_SYSTEM + "Be brief."
    elif change == "tools":
        params["tools"] = [*TOOLS, {"name": "fetch", "input_schema": {"type": "object"}}]
    elif change == "messages":
        params["messages"][0]["content"] = "Where is the Q4 report?"
    elif change == "thinking":
        params["thinking"] = {"type": "adaptive", "display": "summarized"}
    elif change == "appended":
        params["messages"] += [
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "Thanks."},
        ]
    return params


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param("appended", None, id="messages appended"),
        pytest.param("model", "model_changed", id="model changed"),
        pytest.param("system", "system_changed", id="system changed"),
        pytest.param("tools", "tools_changed", id="tools changed"),
        pytest.param("messages", "messages_changed", id="earlier message changed"),
        pytest.param("thinking", "unavailable", id="other parameter changed"),
    ],
)
def test_cache_diagnostics(cached: anthropic.Anthropic, change: str, reason: str | None) -> None:
    params = cached_request()
    params["messages"][0]["content"] = [
        {"type": "text", "text": QUESTION, "cache_control": {"type": "ephemeral"}}
    ]
    first = send(cached, params | {"diagnostics": {"previous_message_id": None}})
    assert first["diagnostics"] is None
    diagnostics = {"diagnostics": {"previous_message_id": first["id"]}}
    second = send(cached, changed(params, change) | diagnostics)
    if reason is None:
        assert second["diagnostics"] is None
        return
    miss = second["diagnostics"]["cache_miss_reason"]
    assert miss["type"] == reason
    if reason != "unavailable":
        # the tokens the previous request cached that this one could not read
        assert miss["cache_missed_input_tokens"] == sum(usage(first)[1:]) - usage(second)[2]
        assert miss["cache_missed_input_tokens"] > 0


def test_cache_diagnostics_unknown_previous_message(cached: anthropic.Anthropic) -> None:
    params = cached_request(diagnostics={"previous_message_id": "msg_unknown"})
    reason = send(cached, params)["diagnostics"]["cache_miss_reason"]
    assert reason == {"type": "previous_message_not_found"}


def test_usage_is_in_message_start(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    events = stream_events(client, req("claude-sonnet-5-5"))
    start = events[0]
    assert start["type"] == "message_start"
    assert start["message"]["usage"]["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": 0,
    }


# --------------------------------------------------------------------------- Models API


def test_models_list_pages_through_the_sdk(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    before = len(fake.side_requests)
    models = list(client.models.list(limit=3))
    assert [m.id for m in models] == [m.id for m in contract.catalogue()]
    pages = [r for r in fake.side_requests[before:] if r.path.startswith("/v1/models")]
    assert len(pages) == math.ceil(len(models) / 3)
    by_id = {m.id: m for m in models}
    sonnet = by_id["claude-sonnet-5-5"].capabilities
    assert sonnet is not None
    assert sonnet.thinking.types.between_tools.supported
    assert not sonnet.thinking.types.disabled.supported
    assert sonnet.effort.xhigh is not None and sonnet.effort.xhigh.supported
    assert sonnet.context_management.compact_20260112 is not None
    assert sonnet.context_management.compact_20260112.supported
    haiku = by_id["claude-haiku-5-5"].capabilities
    assert haiku is not None
    assert haiku.thinking.types.adaptive.supported and not haiku.thinking.types.disabled.supported
    opus_45 = by_id["claude-opus-4-5"].capabilities
    assert opus_45 is not None and opus_45.thinking.types.enabled.supported
    assert not opus_45.thinking.types.adaptive.supported
    deprecated = by_id["claude-sonnet-4-5"]
    assert deprecated.lifecycle == "deprecated"
    assert (
        deprecated.retires_at is not None
        and deprecated.retires_at.date().isoformat() == "2026-11-30"
    )
    assert by_id["claude-sonnet-4-0"].lifecycle == "retired"
    assert by_id["claude-opus-5-5"].max_tokens == 128_000
    assert by_id["claude-opus-5-5"].max_input_tokens == 1_000_000


def test_models_list_before_id(client: anthropic.Anthropic) -> None:
    ids = [m.id for m in contract.catalogue()]
    at = ids.index("claude-opus-4-5")
    page = client.models.list(before_id="claude-opus-4-5", limit=2)
    assert [m.id for m in page.data] == ids[at - 2 : at]
    assert page.has_more
    assert page.first_id == ids[at - 2]


def test_models_retrieve(client: anthropic.Anthropic) -> None:
    assert client.models.retrieve("claude-sonnet-4-5-20250929").id == "claude-sonnet-4-5"
    assert client.models.retrieve("claude-fable-5-2").display_name == "Claude Fable 5.2"
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.models.retrieve("claude-nonexistent-9")
    assert caught.value.body["error"]["message"] == "model: claude-nonexistent-9"  # type: ignore[index]


def test_models_compaction_capability_is_beta_only(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    beta = client.beta.models.retrieve("claude-opus-5-5", betas=[BETA_COMPACTION])
    assert beta.capabilities is not None and beta.capabilities.compaction is not None
    assert beta.capabilities.compaction.summarize.supported
    raw = fake.side_requests[-1].response
    assert raw is not None and raw["capabilities"]["compaction"]["supported"] is True
    assert ModelInfo.model_validate(raw).id == "claude-opus-5-5"
    plain = client.models.retrieve("claude-opus-5-5")
    assert plain.capabilities is not None
    assert "compaction" not in plain.capabilities.model_dump()
    no = client.beta.models.retrieve("claude-haiku-4-5", betas=[BETA_COMPACTION]).capabilities
    assert no is not None and no.compaction is not None and not no.compaction.supported


# --------------------------------------------------------------------------- count_tokens


def test_count_tokens(clock: Clock) -> None:
    with FakeAnthropic([Stream([Text("ok")])], cache=True, clock=clock) as server:
        client = client_of(server)
        params = cached_request()
        params["messages"] += [
            {"role": "assistant", "content": "It is in notes/q3.md."},
            {"role": "user", "content": "And the Q4 one?"},
        ]
        prompt = {k: params[k] for k in ("model", "system", "tools", "messages")}
        counted = client.messages.count_tokens(**prompt).input_tokens
        assert counted > 0
        assert sum(usage(send(client, params))) == counted
        assert server.side_requests[0].body.get("max_tokens") is None
        assert server.side_requests[0].response == {"input_tokens": counted}
        with pytest.raises(anthropic.BadRequestError, match="between_tools"):
            refused = req("claude-sonnet-5-5", thinking={"type": "disabled"})
            del refused["max_tokens"]
            client.messages.count_tokens(**refused)
        ignored = client.beta.messages.count_tokens(
            betas=[BETA_COMPACTION],
            **prompt,
            compaction={"type": "summarize"},
            context_management={"edits": [{"type": "compact_20260112"}]},
        )
        assert ignored.input_tokens == counted


# --------------------------------------------------------------------------- bookkeeping


def test_refused_requests_are_recorded_and_count_in_the_script() -> None:
    script = [Stream([Text("first")]), Stream([Text("second")])]
    with FakeAnthropic(script) as server:
        client = client_of(server)
        with pytest.raises(anthropic.BadRequestError):
            send(client, req("claude-sonnet-5-5", temperature=0.5))
        assert server.requests[0].status == 400
        assert server.requests[0].error is not None
        assert "temperature" in server.requests[0].error.message
        assert send(client, req("claude-sonnet-5-5"))["content"][-1]["text"] == "second"


def test_lenient_mode_answers_any_request() -> None:
    script = [Stream([Text("ok"), Thinking("shown", signature="sig-opaque-123")])]
    with FakeAnthropic(script, strict=False) as server:
        client = client_of(server)
        message = stream(
            client, req("claude-sonnet-5-5", thinking={"type": "disabled"}, temperature=0.1)
        )
        assert [b["type"] for b in message["content"]] == ["text", "thinking"]
        assert message["content"][1]["signature"] == "sig-opaque-123"
        with pytest.raises(anthropic.BadRequestError, match="the fake only streams"):
            send(client, req("claude-sonnet-5-5"))
