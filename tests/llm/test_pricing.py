"""The price table and how thinking is requested per model family."""

from __future__ import annotations

import pytest

from desktop_agent.domain import Usage
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.llm.claude import build_params
from desktop_agent.llm.pricing import DEFAULT_MODEL, MODELS, model_info


def _request(model: str, thinking: int) -> ModelRequest:
    return ModelRequest(
        model=model,
        system="s",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        tools=[],
        max_tokens=4096,
        thinking_budget=thinking,
    )


def test_cache_reads_and_writes_are_priced_separately() -> None:
    sonnet = model_info("claude-sonnet-5-5")
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        cache_read_tokens=1_000_000,
    )
    assert sonnet.cost(usage) == pytest.approx(2.0 + 10.0 + 2.5 + 0.2)


def test_long_prompts_on_haiku_5_5_cost_five_times_more() -> None:
    haiku = model_info("claude-haiku-5-5")
    short = Usage(input_tokens=100_000, output_tokens=1_000)
    long = Usage(input_tokens=100_001, output_tokens=1_000)
    assert haiku.cost(short) == pytest.approx((100_000 * 0.10 + 1_000 * 0.50) / 1e6)
    assert haiku.cost(long) == pytest.approx(5 * (100_001 * 0.10 + 1_000 * 0.50) / 1e6)


def test_dated_and_unknown_ids() -> None:
    assert model_info("claude-opus-5-20260724").id == "claude-opus-5"
    unknown = model_info("claude-future-9")
    assert unknown.input >= max(m.input for m in MODELS.values() if m.id != "demo")
    assert DEFAULT_MODEL in MODELS and not MODELS[DEFAULT_MODEL].legacy


@pytest.mark.parametrize(
    ("model", "budget", "expected"),
    [
        ("claude-opus-5-5", 0, {"type": "adaptive", "display": "summarized"}),
        ("claude-sonnet-5-5", 0, {"type": "disabled"}),
        ("claude-sonnet-5-5", 8000, {"type": "adaptive", "display": "summarized"}),
        ("claude-haiku-4-5", 8000, {"type": "enabled", "budget_tokens": 8000}),
        ("claude-haiku-4-5", 0, None),
    ],
)
def test_thinking_is_requested_the_way_each_model_accepts(
    model: str, budget: int, expected: dict[str, object] | None
) -> None:
    params = build_params(_request(model, budget), model)
    assert params.get("thinking") == expected


def test_server_side_web_searches_are_billed_per_search() -> None:
    from anthropic.types import Message

    from desktop_agent.llm.claude import WEB_SEARCH_USD, _response

    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "text", "text": "Found it."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1000,
                "output_tokens": 100,
                "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 0},
            },
        }
    )
    response = _response(message, "claude-sonnet-5-5")
    tokens = (1000 * 2.0 + 100 * 10.0) / 1e6
    assert response.cost_usd == pytest.approx(tokens + 3 * WEB_SEARCH_USD)
