"""Prices per model, in dollars per million tokens, and context windows.

One table for the whole program; cache writes and reads are priced separately (DESIGN.md §5).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from desktop_agent.domain import Usage
from desktop_agent.domain.catalogue import undated


@dataclass(frozen=True)
class ModelInfo:
    """What we know of a model that the API's catalogue does not say: prices and defaults.

    What a model accepts (thinking types, effort levels, its window and largest output) is
    the catalogue's (``llm/catalogue.py``); this table keeps what only the documentation
    gives.

    Attributes:
        id: model id as the API takes it.
        label: name shown to the user.
        input: $ per million uncached input tokens.
        output: $ per million output tokens.
        cache_write: $ per million tokens written to the prompt cache (5-minute TTL).
        cache_read: $ per million tokens read from the prompt cache.
        context_window: tokens per request (used when the catalogue has no entry).
        max_output: output tokens per call (likewise).
        thinking: whether the model can think before answering.
        thinking_mode: ``budget``, ``adaptive`` or ``always`` (kept for the demo and for
            models the catalogue does not know).
        long_prompt_tokens: prompts above this many tokens are billed at
            ``long_prompt_factor`` times every rate (0: no such tier).
        long_prompt_factor: see ``long_prompt_tokens``.
        legacy: superseded by a newer model (still offered, listed last).
        cache_write_1h: $ per million tokens written with the 1-hour TTL (2x input).
        default_effort: the effort the model runs at when a request sets none (its page).
        replacement: the model its page recommends instead ("" for none).
        priced: False when no published price is known: shown as "price unknown", and
            budgets count it at the highest rates.
        task_budget: the model takes ``output_config.task_budget`` (beta).
        since: the day these prices took effect (ISO date; "" for always).
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
    cache_write_1h: float = -1.0
    default_effort: str = ""
    replacement: str = ""
    priced: bool = True
    task_budget: bool = False
    since: str = ""

    @property
    def write_1h(self) -> float:
        """$ per million tokens written to the cache for an hour."""
        return self.cache_write_1h if self.cache_write_1h >= 0 else self.input * 2

    def cost(self, usage: Usage, *, cache_write_1h_tokens: int = 0, batch: bool = False) -> float:
        """Dollars for ``usage``, ``cache_write_1h_tokens`` of its cache writes for an hour.

        ``batch``: the call was a request of a Message Batch, billed at
        :data:`BATCH_DISCOUNT` of every rate (input, output and the cache's).
        """
        write_1h = min(max(0, cache_write_1h_tokens), usage.cache_write_tokens)
        base = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + (usage.cache_write_tokens - write_1h) * self.cache_write
            + write_1h * self.write_1h
            + usage.cache_read_tokens * self.cache_read
        ) / 1_000_000
        prompt = usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens
        factor = BATCH_DISCOUNT if batch else 1.0
        if self.long_prompt_tokens and prompt > self.long_prompt_tokens:
            return base * self.long_prompt_factor * factor
        return base * factor


BATCH_DISCOUNT = 0.5
"""What a request of a Message Batch costs against the same streamed call: half, for
input, output and the prompt cache alike (the batch-processing page)."""


def _m(
    id_: str,
    label: str,
    inp: float,
    out: float,
    *,
    read: float | None = None,
    write_1h: float | None = None,
    window: int = 200_000,
    max_out: int = 64_000,
    thinking_mode: str = "budget",
    legacy: bool = False,
    long_prompt: tuple[int, float] = (0, 1.0),
    effort: str = "",
    replacement: str = "",
    priced: bool = True,
    task_budget: bool = False,
    since: str = "",
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
        inp * 2 if write_1h is None else write_1h,
        effort,
        replacement,
        priced,
        task_budget,
        since,
    )


_1M = 1_000_000
_128K = 128_000

MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        # Current models. Sources (26 Nov 2026): each model's page and the pricing page;
        # where they disagree, the newer page wins and PRICE_HISTORY keeps the older rate.
        _m(
            "claude-sonnet-5-5",
            "Claude Sonnet 5.5",
            2.0,
            10.0,
            read=0.10,  # the migration guide: $0.10 from 7 Oct 2026 (the model page: $0.20)
            thinking_mode="adaptive",
            effort="high",
            since="2026-10-07",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-opus-5-5",
            "Claude Opus 5.5",
            4.0,
            20.0,
            read=0.20,
            thinking_mode="always",
            effort="medium",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-haiku-5-5",
            "Claude Haiku 5.5",
            0.10,
            0.50,
            read=0.01,
            thinking_mode="always",
            long_prompt=(100_000, 5.0),
            effort="medium",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-fable-5-2",
            "Claude Fable 5.2",
            8.0,
            40.0,
            read=0.20,  # cache rates not published: read as Fable 5.1's share of input
            thinking_mode="always",
            effort="high",
            window=_1M,
            max_out=_128K,
        ),
        _m(
            "claude-fable-5-1",
            "Claude Fable 5.1",
            10.0,
            50.0,
            read=0.25,
            thinking_mode="always",
            effort="high",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-mythos-5-2",
            "Claude Mythos 5.2 (limited availability)",
            10.0,
            50.0,
            read=1.0,
            thinking_mode="always",
            effort="high",
            priced=False,  # no published price: budgets count it at the highest rates
            window=_1M,
            max_out=_128K,
        ),
        _m(
            "claude-mythos-5-1",
            "Claude Mythos 5.1 (limited availability)",
            10.0,
            50.0,
            read=0.25,
            thinking_mode="always",
            effort="high",
            window=_1M,
            max_out=_128K,
            task_budget=True,
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
            effort="high",
            legacy=True,
            replacement="claude-sonnet-5-5",
        ),
        _m(
            "claude-opus-5",
            "Claude Opus 5",
            5.0,
            25.0,
            thinking_mode="adaptive",
            effort="high",
            legacy=True,
            replacement="claude-opus-5-5",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-fable-5",
            "Claude Fable 5",
            10.0,
            50.0,
            read=1.0,
            thinking_mode="always",
            effort="high",
            legacy=True,
            replacement="claude-fable-5-1",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-mythos-5",
            "Claude Mythos 5",
            10.0,
            50.0,
            read=1.0,
            thinking_mode="always",
            effort="high",
            legacy=True,
            replacement="claude-mythos-5-1",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-opus-4-8",
            "Claude Opus 4.8",
            5.0,
            25.0,
            thinking_mode="always",
            effort="high",
            legacy=True,
            replacement="claude-opus-5-5",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-opus-4-7",
            "Claude Opus 4.7",
            5.0,
            25.0,
            thinking_mode="always",
            effort="high",
            legacy=True,
            replacement="claude-opus-5-5",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
        _m(
            "claude-opus-4-6",
            "Claude Opus 4.6",
            5.0,
            25.0,
            window=_1M,
            max_out=_128K,
            thinking_mode="adaptive",
            effort="high",
            legacy=True,
            replacement="claude-opus-5-5",
        ),
        _m(
            "claude-sonnet-4-6",
            "Claude Sonnet 4.6",
            3.0,
            15.0,
            thinking_mode="adaptive",
            effort="high",
            legacy=True,
            replacement="claude-sonnet-5-5",
        ),
        _m(
            "claude-opus-4-5",
            "Claude Opus 4.5",
            5.0,
            25.0,
            legacy=True,
            replacement="claude-opus-5-5",
        ),
        _m(
            "claude-sonnet-4-5",
            "Claude Sonnet 4.5 (retires 30 Nov 2026)",
            3.0,
            15.0,
            legacy=True,
            replacement="claude-sonnet-5-5",
        ),
        _m(
            "claude-haiku-4-5",
            "Claude Haiku 4.5",
            1.0,
            5.0,
            legacy=True,
            replacement="claude-haiku-5-5",
        ),
        _m(
            "claude-opus-4-1",
            "Claude Opus 4.1 (retired)",
            15.0,
            75.0,
            max_out=32_000,
            legacy=True,
            replacement="claude-opus-5-5",
        ),
        _m(
            "claude-sonnet-4-0",
            "Claude Sonnet 4 (retired)",
            3.0,
            15.0,
            legacy=True,
            replacement="claude-sonnet-5-5",
        ),
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

PRICE_HISTORY: dict[str, tuple[ModelInfo, ...]] = {
    # Before 7 Oct 2026 Sonnet 5.5's cache reads cost $0.20 per million tokens.
    "claude-sonnet-5-5": (
        _m(
            "claude-sonnet-5-5",
            "Claude Sonnet 5.5",
            2.0,
            10.0,
            read=0.20,
            thinking_mode="adaptive",
            effort="high",
            window=_1M,
            max_out=_128K,
            task_budget=True,
        ),
    ),
}
"""Earlier prices of a model, oldest first, each in force until the next one's ``since``.

Spend is recorded per call at the price of its day; this table lets a figure recomputed
for a past day (an estimate, a report) use that day's rate too.
"""

DEFAULT_MODEL = "claude-sonnet-5-5"

_FALLBACK = _m(
    "unknown",
    "Unknown model (priced at the highest rates to be safe)",
    max(m.input for m in MODELS.values()),
    max(m.output for m in MODELS.values()),
)


def model_info(model: str, on: str | None = None) -> ModelInfo:
    """Info for ``model``; dated ids (``claude-sonnet-4-5-20250929``) map to their family.

    Args:
        model: the model id.
        on: the day (ISO date) whose prices to use; None for today's.

    Unknown models are priced at the most expensive tier so that budgets stay safe, and
    are marked ``priced=False``.
    """
    info = _current(model)
    if on is None or not info.since or on >= info.since:
        return info
    for earlier in reversed(PRICE_HISTORY.get(info.id, ())):
        if not earlier.since or on >= earlier.since:
            return earlier
    return info


def _current(model: str) -> ModelInfo:
    known = MODELS.get(model) or MODELS.get(undated(model) or "")
    if known is not None:
        return known if known.priced else _at_highest_rates(known)
    return ModelInfo(
        model,
        model,
        *(_FALLBACK.input, _FALLBACK.output),
        _FALLBACK.cache_write,
        _FALLBACK.cache_read,
        priced=False,
    )


def _at_highest_rates(info: ModelInfo) -> ModelInfo:
    """A model without a published price, counted at the dearest rates so budgets hold."""
    return dataclasses.replace(
        info,
        input=_FALLBACK.input,
        output=_FALLBACK.output,
        cache_write=_FALLBACK.cache_write,
        cache_read=_FALLBACK.cache_read,
        cache_write_1h=_FALLBACK.write_1h,
    )


def is_known(model: str) -> bool:
    """Whether ``model`` is in the table."""
    return model_info(model).label != model


def price_label(model: str) -> str:
    """A model's prices in a line (input / output per million tokens), or "price unknown"."""
    info = model_info(model)
    if not info.priced:
        return "price unknown"
    return f"${info.input:g} / ${info.output:g} per million tokens"


SERVER_TOOL_USD: dict[str, float] = {
    "web_search_requests": 10.0 / 1000,
    "web_fetch_requests": 0.0,
}
"""Price of one use of each server tool, by its count's name in ``usage.server_tool_use``.

Web search: $10 per 1,000 searches, on top of the tokens its results add (the figure this
program used before, as the web search tool's page gave it; the pricing page itself was
not re-read on 2026-11-27). Web fetch: no charge beyond the tokens of the fetched content,
as the web fetch tool's page put it (not confirmed in the pages read on 2026-11-27); kept
here so the count is shown and a price, should one be set, reaches every step. A count not
listed costs nothing. Code execution is not counted per use: its container's time is
priced (:func:`code_execution_cost`).
"""


def server_tool_cost(counts: dict[str, int]) -> float:
    """Dollars for the server tool uses a call reports (``{"web_search_requests": 2}``)."""
    return sum(SERVER_TOOL_USD.get(name, 0.0) * n for name, n in counts.items())


CONTAINER_HOUR_USD = 0.05
"""Price of one hour of a code execution container.

Carried over from the code execution tool's page as this program knew it ($0.05 per
container hour, at least five minutes per use, a monthly allowance of free hours per
organization); the 2026 pages read on 2026-11-27 did not state the figure. The free hours
are not subtracted here (their use is the organization's, across all its keys): a step's
price is the most it can cost.
"""
CONTAINER_MIN_S = 300.0
"""The least container time a call that used a container is billed (five minutes)."""
FREE_CONTAINER_WITH = "20260209"
"""Code execution costs nothing beyond tokens in a request that also carries web search or
web fetch of this version or later (their dynamic filtering runs in the container): the
code execution tool's page, read 2026-11-27, for the 20260209 versions."""


def billed_seconds(elapsed_s: float) -> float:
    """The container time a call that used a container is billed.

    Its length, five minutes at least: the API does not report the container's own time.
    """
    return max(CONTAINER_MIN_S, float(elapsed_s))


def code_execution_cost(elapsed_s: float, tools: Sequence[Mapping[str, Any]] = ()) -> float:
    """Dollars of container time for a call that used a container and took ``elapsed_s``.

    Nothing when the request's ``tools`` hold web search or web fetch of a version from
    :data:`FREE_CONTAINER_WITH` on.
    """
    for tool in tools:
        kind = str(tool.get("type", ""))
        family, _, date = kind.rpartition("_")
        if family in ("web_search", "web_fetch") and date.isdigit() and date >= FREE_CONTAINER_WITH:
            return 0.0
    return billed_seconds(elapsed_s) / 3600.0 * CONTAINER_HOUR_USD
