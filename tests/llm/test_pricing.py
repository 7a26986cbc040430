"""The price table, and requests built from each model's catalogue entry."""

from __future__ import annotations

import pytest

from desktop_agent.domain import Usage
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.llm.claude import build_params
from desktop_agent.llm.pricing import DEFAULT_MODEL, MODELS, ModelInfo, model_info


def _request(model: str, thinking: int, effort: str = "") -> ModelRequest:
    return ModelRequest(
        model=model,
        system="s",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        tools=[],
        max_tokens=4096,
        thinking_budget=thinking,
        effort=effort,
    )


MILLION = Usage(
    input_tokens=1_000_000,
    output_tokens=1_000_000,
    cache_write_tokens=1_000_000,
    cache_read_tokens=1_000_000,
)


def test_cache_reads_and_writes_are_priced_separately_and_dated() -> None:
    # Sonnet 5.5's cache reads cost $0.10 from 7 Oct 2026 (the migration guide), $0.20 before.
    assert model_info("claude-sonnet-5-5").cost(MILLION) == pytest.approx(2.0 + 10.0 + 2.5 + 0.1)
    before = model_info("claude-sonnet-5-5", on="2026-10-06")
    assert before.cost(MILLION) == pytest.approx(2.0 + 10.0 + 2.5 + 0.2)
    assert model_info("claude-sonnet-5-5", on="2026-10-07").cache_read == 0.10


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    opus = model_info("claude-opus-5-5")
    usage = Usage(cache_write_tokens=1_000_000)
    assert opus.cost(usage) == pytest.approx(5.0)  # 5 minutes: 1.25 x $4
    assert opus.cost(usage, cache_write_1h_tokens=400_000) == pytest.approx(0.6 * 5.0 + 0.4 * 8.0)


def test_a_model_without_a_published_price_says_so() -> None:
    from desktop_agent.llm.pricing import price_label

    assert price_label("claude-mythos-5-2") == "price unknown"
    assert price_label("claude-future-9") == "price unknown"
    assert price_label("claude-opus-5-5") == "$4 / $20 per million tokens"


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


ADAPTIVE = {"type": "adaptive", "display": "summarized"}


@pytest.mark.parametrize(
    ("model", "budget", "effort", "expected"),
    [
        # Thinking "off": between_tools where the model takes it (only up to high) ...
        ("claude-sonnet-5-5", 0, "", {"type": "between_tools"}),
        ("claude-sonnet-5-5", 0, "high", {"type": "between_tools"}),
        ("claude-sonnet-5-5", 0, "xhigh", ADAPTIVE),
        ("claude-sonnet-5-5", 0, "max", ADAPTIVE),
        # ... disabled where it takes that (Opus 5: only up to high), else adaptive.
        ("claude-opus-5", 0, "medium", {"type": "disabled"}),
        ("claude-opus-5", 0, "max", ADAPTIVE),
        ("claude-opus-5-5", 0, "", ADAPTIVE),
        ("claude-haiku-5-5", 0, "", ADAPTIVE),
        ("claude-fable-5-2", 0, "low", ADAPTIVE),
        # Thinking "on": adaptive with readable text, or a budget where only that exists.
        ("claude-sonnet-5-5", 8000, "", ADAPTIVE),
        ("claude-mythos-5-1", 8000, "max", ADAPTIVE),
        ("claude-haiku-4-5", 8000, "", {"type": "enabled", "budget_tokens": 8000}),
        ("claude-haiku-4-5", 0, "", None),
        ("claude-future-9", 0, "", None),  # unknown to the catalogue: the API's default
    ],
)
def test_thinking_is_requested_the_way_each_model_accepts(
    model: str, budget: int, effort: str, expected: dict[str, object] | None
) -> None:
    params = build_params(_request(model, budget, effort), model)
    assert params.get("thinking") == expected


def test_effort_is_sent_only_where_the_model_takes_it() -> None:
    assert build_params(_request("claude-opus-5-5", 0, "xhigh"), "claude-opus-5-5")[
        "output_config"
    ] == {"effort": "xhigh"}
    # Haiku 4.5 has no effort setting: nothing is sent rather than a refused field.
    assert "output_config" not in build_params(
        _request("claude-haiku-4-5", 0, "high"), "claude-haiku-4-5"
    )
    assert "output_config" not in build_params(
        _request("claude-sonnet-5-5", 0), "claude-sonnet-5-5"
    )


def test_max_tokens_never_exceeds_the_models_maximum() -> None:
    request = ModelRequest("claude-opus-4-1", "s", [{"role": "user", "content": "x"}], [], 100_000)
    assert build_params(request, "claude-opus-4-1")["max_tokens"] == 32_000


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


def test_a_model_without_a_published_price_is_counted_at_the_highest_rates() -> None:
    dearest = max(m.input for m in MODELS.values() if m.priced)
    assert model_info("claude-mythos-5-2").input == dearest
    assert model_info("claude-mythos-5-2").cost(Usage(input_tokens=1_000_000)) == dearest
    assert model_info("claude-mythos-5-2-20261109").id == "claude-mythos-5-2"


def test_a_request_of_a_message_batch_costs_half_of_every_rate() -> None:
    info = model_info("claude-sonnet-5-5")
    usage = Usage(
        input_tokens=120_000,
        output_tokens=9_000,
        cache_write_tokens=40_000,
        cache_read_tokens=800_000,
    )
    streamed = info.cost(usage, cache_write_1h_tokens=10_000)
    batched = info.cost(usage, cache_write_1h_tokens=10_000, batch=True)
    assert streamed > 0
    assert batched == pytest.approx(streamed * 0.5)
    # The long-prompt tier still applies on top of the discount.
    long = ModelInfo("x", "X", 3, 15, 3.75, 0.3, long_prompt_tokens=100_000, long_prompt_factor=2)
    assert long.cost(usage, batch=True) == pytest.approx(long.cost(usage) * 0.5)
    assert long.cost(usage) == pytest.approx(2 * ModelInfo("x", "X", 3, 15, 3.75, 0.3).cost(usage))
