"""What a run is expected to cost and how long it is expected to take, before it starts.

:func:`forecast` reads past **completed** runs on the same model at the same effort (of
one schedule, watched folder or batch when ``template`` names one; all runs when it has
fewer than :data:`MIN_RUNS`), the newest :data:`HISTORY_RUNS` of each mode, and gives the
median and the 90th percentile of their cost (the run's total, as its header shows it)
and of their duration (from a worker's first claim to the end, waits included: what the
analyst waits for). Economy-mode runs (``"economy": true`` in their stored definition) and
streamed ones are read apart; when only one mode has enough runs, the other is derived
from it: the cost at :data:`~desktop_agent.llm.pricing.BATCH_DISCOUNT` of the price (or
divided by it), the time with each model call's time replaced by a turn in the batch
queue (or by a streamed call). With fewer than :data:`MIN_RUNS` runs in either mode, the
forecast is made from the model's prices and a stated default size (see
:data:`DEFAULT_CALLS` and below).

For ``items`` runs (a batch), costs are for all of them: the medians add up, and the
spread above the median grows with the square root of the count (as a sum of independent
runs' does). Durations are of one run; :meth:`Forecast.items_duration` is the time of all
of them ``concurrency`` at a time.

:func:`record_start_forecast` keeps the forecast made when a run is started with the run
(a run event, never changed afterwards); :func:`run_forecast` reads it back for the
header, ``show`` and the HTTP API.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from desktop_agent.domain import DEMO_MODEL, AgentSpec, Run, Usage
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.llm.pricing import BATCH_DISCOUNT, model_info
from desktop_agent.persistence import forecasts as rows
from desktop_agent.persistence.db import Database

if TYPE_CHECKING:
    from desktop_agent.persistence.store import SqlStore


class Client(Protocol):
    """What the forecast needs of the client: its store.

    Not the whole client, which records a forecast when it starts a run and so imports
    this module.
    """

    @property
    def store(self) -> SqlStore:
        """The client's store."""
        ...


log = logging.getLogger(__name__)

MIN_RUNS = 3
"""Completed runs a mode needs before its figures come from history."""

HISTORY_RUNS = 200
"""The newest matching runs of each mode that a forecast reads."""

SCAN_ROWS = 1000
"""Completed runs on the model read at most (the effort and the mode are checked here)."""

DEFAULT_CALLS = 12
"""Model calls of a run without history. The offline demo's research run makes 9; a run
over real sources reads and notes a few more."""

DEFAULT_PROMPT_TOKENS = 20_000
"""Prompt tokens of each of those calls (system prompt and tools, about 4k, plus the
conversation so far, which grows over the run)."""

DEFAULT_CACHE_SHARE = 0.85
"""Share of each prompt read from the prompt cache; the rest is written to it (for five
minutes streamed, for an hour in economy mode, as the engine does). A long run measured
96% (``bench/README.md``, cache share); a short one reads less."""

DEFAULT_OUTPUT_TOKENS = 1_500
"""Output tokens of each call: what the model writes between tools, and the tool call."""

STREAMED_CALL_S = 20.0
"""Seconds of one streamed model call, with the tool call that follows it."""

ECONOMY_TURN_S = 300.0
"""Seconds one economy-mode turn waits in the batch queue, typically: the batch window,
the batch's processing and the worker's first looks at it (30 s, then growing)."""

ECONOMY_TURN_P90_S = 1800.0
"""The same for a slow turn (most batches end within an hour; all within 24 hours)."""

P90_SIZE = 2.0
"""Without history, the 90th percentile is a run this many times the default size."""

HISTORY = "history"
PRICES = "prices"


@dataclass(frozen=True)
class ModeForecast:
    """The figures of one mode (streamed, or economy).

    Attributes:
        cost_median_usd: the median cost of all the items' runs together.
        cost_p90_usd: the cost they stay under nine times in ten.
        duration_median_s: the median duration of one run, start to end.
        duration_p90_s: the duration one run stays under nine times in ten.
        based_on: the past runs of this mode it comes from (0: derived, or from prices).
        derived: made from the other mode's runs.
    """

    cost_median_usd: float
    cost_p90_usd: float
    duration_median_s: float
    duration_p90_s: float
    based_on: int = 0
    derived: bool = False


@dataclass(frozen=True)
class Forecast:
    """A run's (or a batch's) expected cost and duration, and what it rests on.

    Attributes:
        basis: ``history`` (past completed runs) or ``prices`` (the model's prices and a
            default size).
        based_on: the past runs it comes from (0 with ``prices``).
        items: runs it is for (a batch's items); costs are of all of them.
        economy: the mode asked for (True: economy mode, False: streamed).
        model: the model id.
        effort: the effort level the runs work at ("" when the model has none).
        streamed: the figures for streamed runs.
        economy_mode: the figures for economy-mode runs.
        explain: one plain-English line saying what it comes from.
        template: the schedule, watched folder or batch whose runs were asked for.
        concurrency: runs at a time, for :meth:`items_duration`.
        made_at: when it was made.
    """

    basis: str
    based_on: int
    items: int
    economy: bool
    model: str
    effort: str
    streamed: ModeForecast
    economy_mode: ModeForecast
    explain: str
    template: str | None = None
    concurrency: int = 1
    made_at: float = 0.0

    @property
    def chosen(self) -> ModeForecast:
        """The figures of the mode asked for."""
        return self.economy_mode if self.economy else self.streamed

    @property
    def cost_median_usd(self) -> float:
        """Median cost of all items in the mode asked for."""
        return self.chosen.cost_median_usd

    @property
    def cost_p90_usd(self) -> float:
        """90th percentile of the cost of all items in the mode asked for."""
        return self.chosen.cost_p90_usd

    @property
    def duration_median_s(self) -> float:
        """Median duration of one run in the mode asked for."""
        return self.chosen.duration_median_s

    @property
    def duration_p90_s(self) -> float:
        """90th percentile of one run's duration in the mode asked for."""
        return self.chosen.duration_p90_s

    def items_duration(self, mode: ModeForecast | None = None) -> tuple[float, float]:
        """Median and 90th percentile of the time all items take, ``concurrency`` at a time."""
        m = mode or self.chosen
        waves = math.ceil(self.items / max(1, self.concurrency))
        return waves * m.duration_median_s, waves * m.duration_p90_s


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values``, linear between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def for_items(median: float, p90: float, items: int) -> tuple[float, float]:
    """Median and 90th percentile of ``items`` runs' total, from one run's."""
    return items * median, items * median + math.sqrt(items) * max(0.0, p90 - median)


def _mode(costs: Sequence[float], durations: Sequence[float], items: int) -> ModeForecast:
    """A mode's figures from its runs' costs and durations."""
    cost = for_items(percentile(costs, 0.5), percentile(costs, 0.9), items)
    return ModeForecast(
        cost[0], cost[1], percentile(durations, 0.5), percentile(durations, 0.9), len(costs)
    )


def default_call_usage() -> Usage:
    """One model call of the default size (see :data:`DEFAULT_PROMPT_TOKENS` and on)."""
    read = round(DEFAULT_PROMPT_TOKENS * DEFAULT_CACHE_SHARE)
    return Usage(
        input_tokens=0,
        output_tokens=DEFAULT_OUTPUT_TOKENS,
        cache_write_tokens=DEFAULT_PROMPT_TOKENS - read,
        cache_read_tokens=read,
    )


def effective_effort(model: str, effort: str) -> str:
    """The effort a run works at: the one it asked for, else the model's default."""
    return effort or ("" if model == DEMO_MODEL else model_info(model).default_effort)


def _label(model: str) -> str:
    return model_info(model).label if model != DEMO_MODEL else "the demo model"


# --------------------------------------------------------------------------- forecast


def forecast(
    client: Client,
    spec: AgentSpec,
    *,
    template: str | None = None,
    items: int = 1,
    concurrency: int | None = None,
) -> Forecast:
    """The forecast for ``items`` runs of ``spec`` (see the module's docstring).

    Args:
        client: the client whose database holds the past runs.
        spec: the runs' definition: its model, effort and mode count.
        template: a schedule's, watched folder's or batch's id whose runs are the history.
        items: how many runs (a batch's items); costs are for all of them.
        concurrency: runs at a time (default: all at once, up to the count).

    Raises:
        InvalidInputError: ``items`` or ``concurrency`` is below one.
    """
    if items < 1:
        raise InvalidInputError("a forecast is for one item or more")
    if concurrency is not None and concurrency < 1:
        raise InvalidInputError("concurrency must be at least 1")
    db = client.store.db
    model, effort = spec.model, effective_effort(spec.model, spec.effort)
    streamed, economy = _history(db, model, effort, template)
    scope, fell_back = template, False
    if template is not None and max(len(streamed), len(economy)) < MIN_RUNS:
        streamed, economy = _history(db, model, effort, None)
        scope, fell_back = None, True
    base = Forecast(
        basis=PRICES,
        based_on=0,
        items=items,
        economy=spec.economy,
        model=model,
        effort=effort,
        streamed=ModeForecast(0, 0, 0, 0),
        economy_mode=ModeForecast(0, 0, 0, 0),
        explain="",
        template=template,
        concurrency=concurrency or items,
        made_at=time.time(),
    )
    if max(len(streamed), len(economy)) < MIN_RUNS:
        return _from_prices(base, len(streamed) + len(economy))
    label = rows.template_label(db, template) if template is not None else None
    return _from_history(client, base, streamed, economy, scope, fell_back, label)


def _history(
    db: Database, model: str, effort: str, template: str | None
) -> tuple[list[rows.PastRun], list[rows.PastRun]]:
    """The newest completed runs on ``model`` at ``effort``: streamed ones, economy ones."""
    streamed: list[rows.PastRun] = []
    economy: list[rows.PastRun] = []
    for past in rows.completed_runs(db, model, template=template, limit=SCAN_ROWS):
        try:
            spec = json.loads(past.spec)
        except ValueError:
            continue
        if not isinstance(spec, dict) or spec.get("model") != model:
            continue
        if effective_effort(model, str(spec.get("effort") or "")) != effort:
            continue
        bucket = economy if spec.get("economy") is True else streamed
        if len(bucket) < HISTORY_RUNS:
            bucket.append(past)
    return streamed, economy


def _duration(past: rows.PastRun) -> float:
    return max(0.0, (past.finished_at or 0.0) - (past.started_at or 0.0))


def _from_history(
    client: Client,
    base: Forecast,
    streamed: list[rows.PastRun],
    economy: list[rows.PastRun],
    scope: str | None,
    fell_back: bool,
    label: str | None,
) -> Forecast:
    items = base.items
    modes: dict[bool, ModeForecast] = {}
    notes = []
    for is_economy, runs in ((False, streamed), (True, economy)):
        if len(runs) >= MIN_RUNS:
            costs = [r.cost_usd for r in runs]
            modes[is_economy] = _mode(costs, [_duration(r) for r in runs], items)
    if len(modes) == 1:
        have = next(iter(modes))
        source = economy if have else streamed
        modes[not have] = _derived(client, source, to_economy=not have, items=items)
        if have:
            notes.append(
                f"streamed figures from the economy-mode runs at {1 / BATCH_DISCOUNT:g}x the "
                f"price, each turn a streamed call of ~{STREAMED_CALL_S:.0f} s"
            )
        else:
            notes.append(
                f"economy figures from the streamed runs at {BATCH_DISCOUNT:.0%} of the price, "
                f"each call ~{ECONOMY_TURN_S / 60:.0f} min in the batch queue"
            )
    used = sum(m.based_on for m in modes.values())
    of = f" of {_quoted(label, base.template)}" if scope is not None else ""
    at = f" at {base.effort} effort" if base.effort else ""
    head = f"from {used} completed run{'s' if used != 1 else ''}{of} on {_label(base.model)}{at}"
    if fell_back:
        head += f" (fewer than {MIN_RUNS} of {_quoted(label, base.template)} so far)"
    return replace(
        base,
        basis=HISTORY,
        based_on=used,
        streamed=modes[False],
        economy_mode=modes[True],
        explain="; ".join([head, *notes]),
    )


def _quoted(label: str | None, template: str | None) -> str:
    return f"'{label}'" if label else f"'{template}'"


def _derived(
    client: Client, runs: list[rows.PastRun], *, to_economy: bool, items: int
) -> ModeForecast:
    """One mode's figures from the other mode's runs (see the module's docstring)."""
    factor = BATCH_DISCOUNT if to_economy else 1 / BATCH_DISCOUNT
    times = rows.model_call_times(client.store.db, [r.run_id for r in runs])
    typical, slow = [], []
    for past in runs:
        calls, took = times.get(past.run_id, (0, 0.0))
        rest = max(0.0, _duration(past) - took)
        turn, slow_turn = (
            (ECONOMY_TURN_S, ECONOMY_TURN_P90_S) if to_economy else (STREAMED_CALL_S,) * 2
        )
        typical.append(rest + calls * turn)
        slow.append(rest + calls * slow_turn)
    costs = [r.cost_usd * factor for r in runs]
    cost = for_items(percentile(costs, 0.5), percentile(costs, 0.9), items)
    return ModeForecast(
        cost[0], cost[1], percentile(typical, 0.5), percentile(slow, 0.9), 0, derived=True
    )


def _from_prices(base: Forecast, past: int) -> Forecast:
    """The forecast from the model's prices and the default size (no history)."""
    info = model_info(base.model)
    usage = default_call_usage()
    modes = {}
    for economy, write_1h, turn, slow in (
        (False, 0, STREAMED_CALL_S, P90_SIZE * STREAMED_CALL_S),
        (True, usage.cache_write_tokens, ECONOMY_TURN_S, ECONOMY_TURN_P90_S),
    ):
        per_run = DEFAULT_CALLS * info.cost(usage, cache_write_1h_tokens=write_1h, batch=economy)
        cost = for_items(per_run, P90_SIZE * per_run, base.items)
        modes[economy] = ModeForecast(cost[0], cost[1], DEFAULT_CALLS * turn, DEFAULT_CALLS * slow)
    none = "no past runs" if past == 0 else f"only {past} past run{'s' if past != 1 else ''}"
    at = f" at {base.effort} effort" if base.effort else ""
    explain = (
        f"{none} of {_label(base.model)}{at}: from its prices and a default of "
        f"{DEFAULT_CALLS} calls of ~{DEFAULT_PROMPT_TOKENS // 1000}k prompt tokens "
        f"({DEFAULT_CACHE_SHARE:.0%} read from the cache) and "
        f"~{DEFAULT_OUTPUT_TOKENS / 1000:g}k output tokens, "
        f"~{STREAMED_CALL_S:.0f} s a streamed call, ~{ECONOMY_TURN_S / 60:.0f} min a turn "
        "in the batch queue"
    )
    if not info.priced:
        explain += " (no published price: counted at the highest rates)"
    return replace(base, streamed=modes[False], economy_mode=modes[True], explain=explain)


# --------------------------------------------------------------------------- words


def range_words(median: float, p90: float, unit: str) -> str:
    """``≈ $0.42 (90%: $0.80)`` or ``≈ 6m (90%: 12m)``."""
    fmt = format_usd if unit == "usd" else format_duration
    return f"≈ {fmt(median)} (90%: {fmt(p90)})"


def mode_words(f: Forecast, mode: ModeForecast) -> str:
    """A mode's cost and time: ``≈ $0.42 (90%: $0.80) · ≈ 6m (90%: 12m)`` (per run)."""
    cost = range_words(mode.cost_median_usd, mode.cost_p90_usd, "usd")
    each = " a run" if f.items > 1 else ""
    return f"{cost} · {range_words(mode.duration_median_s, mode.duration_p90_s, 's')}{each}"


def basis_words(f: Forecast) -> str:
    """``from 14 runs`` or ``from prices``."""
    if f.basis == HISTORY:
        return f"from {f.based_on} run{'s' if f.based_on != 1 else ''}"
    return "from prices (no history)"


def summary(f: Forecast) -> str:
    """One line: the mode asked for, the other mode beside it, and the basis.

    ``≈ $0.42 (90%: $0.80) · ≈ 6m (90%: 12m) · economy ≈ $0.21 (90%: $0.40) · ≈ 1h
    (90%: 6h) · from 14 runs``.
    """
    other = f.streamed if f.economy else f.economy_mode
    other_name = "streamed" if f.economy else "economy"
    items = f"{f.items} items: " if f.items > 1 else ""
    return (
        f"{items}{mode_words(f, f.chosen)} · {other_name} {mode_words(f, other)} · {basis_words(f)}"
    )


def versus_words(f: Forecast, run: Run) -> str:
    """An ended run's actual beside its forecast.

    ``cost $0.51, forecast ≈ $0.42 (90%: $0.80) · took 7m, forecast ≈ 6m (90%: 12m)``.
    """
    cost = f"cost {format_usd(run.cost_usd)}, forecast " + range_words(
        f.cost_median_usd, f.cost_p90_usd, "usd"
    )
    if run.started_at is None or run.finished_at is None:
        return cost
    took = format_duration(max(0.0, run.finished_at - run.started_at))
    return f"{cost} · took {took}, forecast " + range_words(
        f.duration_median_s, f.duration_p90_s, "s"
    )


def kept_words(f: Forecast, run: Run) -> str:
    """The forecast kept with ``run``: beside the actual once it ended, else with its basis."""
    if run.status.is_terminal:
        return versus_words(f, run)
    return f"{mode_words(f, f.chosen)} · {basis_words(f)}"


def text_lines(f: Forecast) -> list[str]:
    """The forecast as ``run --estimate`` prints it."""
    at = f" at {f.effort} effort" if f.effort else ""
    items = f", {f.items} items ({f.concurrency} at a time)" if f.items > 1 else ""
    lines = [f"Forecast for {_label(f.model)}{at}{items}:"]
    for economy, name, mode in ((False, "streamed", f.streamed), (True, "economy", f.economy_mode)):
        mark = "→" if economy == f.economy else " "
        derived = "  (derived)" if mode.derived else ""
        lines.append(f" {mark} {name + ':':<10} {mode_words(f, mode)}{derived}")
        if f.items > 1:
            med, p90 = f.items_duration(mode)
            lines.append(f"   {'':<10} all items {range_words(med, p90, 's')}")
    lines.append(f"   {f.explain}")
    return lines


# --------------------------------------------------------------------------- JSON


def _pair(median: float, p90: float, digits: int) -> dict[str, float]:
    return {"median": round(median, digits), "p90": round(p90, digits)}


def _mode_json(f: Forecast, m: ModeForecast) -> dict[str, Any]:
    return {
        "cost_usd": _pair(m.cost_median_usd, m.cost_p90_usd, 6),
        "duration_s": _pair(m.duration_median_s, m.duration_p90_s, 1),
        "items_duration_s": _pair(*f.items_duration(m), 1),
        "based_on": m.based_on,
        "derived": m.derived,
    }


def forecast_json(f: Forecast) -> dict[str, Any]:
    """The forecast as plain data (``--json``, the HTTP API, the run's kept forecast).

    ``cost_usd`` is for all ``items`` in the mode asked for (``economy``), ``duration_s``
    for one run, ``items_duration_s`` for all of them ``concurrency`` at a time; ``modes``
    holds the same for ``streamed`` and ``economy``.
    """
    return {
        "basis": f.basis,
        "based_on": f.based_on,
        "items": f.items,
        "concurrency": f.concurrency,
        "economy": f.economy,
        "model": f.model,
        "effort": f.effort or None,
        "template": f.template,
        "cost_usd": _pair(f.cost_median_usd, f.cost_p90_usd, 6),
        "duration_s": _pair(f.duration_median_s, f.duration_p90_s, 1),
        "items_duration_s": _pair(*f.items_duration(), 1),
        "modes": {"streamed": _mode_json(f, f.streamed), "economy": _mode_json(f, f.economy_mode)},
        "explain": f.explain,
        "made_at": f.made_at,
    }


def _mode_from_json(data: Any) -> ModeForecast:
    cost, duration = data["cost_usd"], data["duration_s"]
    return ModeForecast(
        float(cost["median"]),
        float(cost["p90"]),
        float(duration["median"]),
        float(duration["p90"]),
        int(data.get("based_on", 0)),
        bool(data.get("derived", False)),
    )


def forecast_from_json(data: Any) -> Forecast | None:
    """Inverse of :func:`forecast_json` (None when ``data`` is not a forecast)."""
    try:
        modes = data["modes"]
        return Forecast(
            basis=str(data["basis"]),
            based_on=int(data["based_on"]),
            items=int(data["items"]),
            economy=bool(data["economy"]),
            model=str(data["model"]),
            effort=str(data.get("effort") or ""),
            streamed=_mode_from_json(modes["streamed"]),
            economy_mode=_mode_from_json(modes["economy"]),
            explain=str(data.get("explain", "")),
            template=data.get("template"),
            concurrency=int(data.get("concurrency", 1)),
            made_at=float(data.get("made_at", 0.0)),
        )
    except (KeyError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- kept with a run


def record_start_forecast(client: Client, run: Run) -> Forecast | None:
    """Make ``run``'s forecast now and keep it with the run (None when it could not be made).

    Never raises: a run starts with or without its forecast, and a failure is logged.
    """
    try:
        made = forecast(client, run.spec)
        db = client.store.db
        rows.record_forecast(db, run.id, made.explain, forecast_json(made), made.made_at)
    except Exception:
        log.warning("could not forecast run %s; it starts without one", run.id, exc_info=True)
        return None
    return made


def run_forecast(client: Client, run_id: str) -> Forecast | None:
    """The forecast kept with ``run_id`` when it was started (None: it has none)."""
    return forecast_from_json(rows.recorded_forecast(client.store.db, run_id))


__all__ = [
    "Forecast",
    "ModeForecast",
    "forecast",
    "forecast_from_json",
    "forecast_json",
    "kept_words",
    "record_start_forecast",
    "run_forecast",
    "summary",
    "text_lines",
    "versus_words",
]
