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
        thinking: whether extended thinking is available.
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

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage``."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_read_tokens * self.cache_read
        ) / 1_000_000


def _m(
    id_: str, label: str, inp: float, out: float, *, window: int = 200_000, max_out: int = 64_000
) -> ModelInfo:
    return ModelInfo(id_, label, inp, out, inp * 1.25, inp * 0.1, window, max_out)


MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        _m("claude-opus-4-5", "Claude Opus 4.5", 5.0, 25.0),
        _m("claude-sonnet-4-5", "Claude Sonnet 4.5", 3.0, 15.0),
        _m("claude-haiku-4-5", "Claude Haiku 4.5", 1.0, 5.0),
        _m("claude-opus-4-1", "Claude Opus 4.1", 15.0, 75.0, max_out=32_000),
        _m("claude-sonnet-4-0", "Claude Sonnet 4", 3.0, 15.0),
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

DEFAULT_MODEL = "claude-sonnet-4-5"

_FALLBACK = _m("unknown", "Unknown model (priced as Opus 4.1 to be safe)", 15.0, 75.0)


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
