"""Prices per model, in dollars per million tokens, and context windows.

One table for the whole program; cache writes and reads are priced separately (DESIGN.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass

from desktop_agent.domain import Usage


@dataclass(frozen=True)
class ModelInfo:
    """What we know of a model.

    Attributes:
        id: model id as the API takes it.
        label: name shown to the user.
        input: $ per million uncached input tokens.
        output: $ per million output tokens.
        cache_write: $ per million tokens written to the prompt cache (5-minute TTL).
        cache_read: $ per million tokens read from the prompt cache.
        context_window: tokens per request.
        max_output: output tokens per call.
        thinking: whether the model can think before answering.
        thinking_mode: ``budget`` (thinking enabled with a token budget), ``adaptive``
            (the model decides; optional) or ``always`` (adaptive and cannot be disabled).
        long_prompt_tokens: prompts above this many tokens are billed at
            ``long_prompt_factor`` times every rate (0: no such tier).
        long_prompt_factor: see ``long_prompt_tokens``.
        legacy: superseded by a newer model (still offered, listed last).
    """

    id: str
    label: str
    input: float
    output: float
    cache_write: float
    cache_read: float
    context_window: int = 200_000
    max_output: int = 64_000
    thinking: bool = True
    thinking_mode: str = "budget"
    long_prompt_tokens: int = 0
    long_prompt_factor: float = 1.0
    legacy: bool = False

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage``."""
        base = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        ) / 1_000_000
        prompt = usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens
        if self.long_prompt_tokens and prompt > self.long_prompt_tokens:
            return base * self.long_prompt_factor
        return base


def _m(
    id_: str,
    label: str,
    inp: float,
    out: float,
    *,
    read: float | None = None,
    window: int = 200_000,
    max_out: int = 64_000,
    thinking_mode: str = "budget",
    legacy: bool = False,
    long_prompt: tuple[int, float] = (0, 1.0),
) -> ModelInfo:
    return ModelInfo(
        id_,
        label,
        inp,
        out,
        inp * 1.25,
        inp * 0.1 if read is None else read,
        window,
        max_out,
        True,
        thinking_mode,
        long_prompt[0],
        long_prompt[1],
        legacy,
    )


_1M = 1_000_000
_128K = 128_000

MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        # Current models (published prices, November 2026).
        _m(
            "claude-sonnet-5-5",
            "Claude Sonnet 5.5",
            2.0,
            10.0,
            read=0.20,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
        ),
        _m(
            "claude-opus-5-5",
            "Claude Opus 5.5",
            4.0,
            20.0,
            read=0.20,
            window=_1M,
            max_out=_128K,
            thinking_mode="always",
        ),
        _m(
            "claude-haiku-5-5",
            "Claude Haiku 5.5",
            0.10,
            0.50,
            read=0.01,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
            long_prompt=(100_000, 5.0),
        ),
        _m(
            "claude-fable-5-1",
            "Claude Fable 5.1",
            10.0,
            50.0,
            read=0.25,
            window=_1M,
            max_out=_128K,
            thinking_mode="always",
        ),
        # Earlier models, still served.
        _m(
            "claude-sonnet-5",
            "Claude Sonnet 5",
            2.0,
            10.0,
            read=0.20,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
            legacy=True,
        ),
        _m(
            "claude-opus-5",
            "Claude Opus 5",
            5.0,
            25.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
            legacy=True,
        ),
        _m(
            "claude-fable-5",
            "Claude Fable 5",
            10.0,
            50.0,
            read=1.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="always",
            legacy=True,
        ),
        _m(
            "claude-opus-4-8",
            "Claude Opus 4.8",
            5.0,
            25.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="always",
            legacy=True,
        ),
        _m(
            "claude-opus-4-7",
            "Claude Opus 4.7",
            5.0,
            25.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="always",
            legacy=True,
        ),
        _m(
            "claude-opus-4-6",
            "Claude Opus 4.6",
            5.0,
            25.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
            legacy=True,
        ),
        _m(
            "claude-sonnet-4-6",
            "Claude Sonnet 4.6",
            3.0,
            15.0,
            thinking_mode="adaptive",
            legacy=True,
        ),
        _m("claude-opus-4-5", "Claude Opus 4.5", 5.0, 25.0, legacy=True),
        _m("claude-sonnet-4-5", "Claude Sonnet 4.5 (retires 30 Nov 2026)", 3.0, 15.0, legacy=True),
        _m("claude-haiku-4-5", "Claude Haiku 4.5", 1.0, 5.0, legacy=True),
        _m("claude-opus-4-1", "Claude Opus 4.1", 15.0, 75.0, max_out=32_000, legacy=True),
        _m("claude-sonnet-4-0", "Claude Sonnet 4 (retired)", 3.0, 15.0, legacy=True),
        ModelInfo(
            "demo",
            "Demo model (offline, simulated cost)",
            1.0,
            5.0,
            1.25,
            0.1,
            200_000,
            8_000,
            False,
        ),
    )
}

DEFAULT_MODEL = "claude-sonnet-5-5"

_FALLBACK = _m(
    "unknown",
    "Unknown model (priced at the highest rates to be safe)",
    max(m.input for m in MODELS.values()),
    max(m.output for m in MODELS.values()),
)


def model_info(model: str) -> ModelInfo:
    """Info for ``model``; dated ids (``claude-sonnet-4-5-20250929``) map to their family.

    Unknown models are priced at the most expensive tier so that budgets stay safe.
    """
    if model in MODELS:
        return MODELS[model]
    for known in sorted(MODELS, key=len, reverse=True):
        if model.startswith(known + "-"):
            return MODELS[known]
    return ModelInfo(
        model,
        model,
        *(_FALLBACK.input, _FALLBACK.output),
        _FALLBACK.cache_write,
        _FALLBACK.cache_read,
    )


def is_known(model: str) -> bool:
    """Whether ``model`` has a price in the table."""
    return model_info(model).label != model
