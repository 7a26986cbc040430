"""The forecast of a run: from past completed runs, else from the model's prices.

Every figure expected here is computed in the test from the runs it wrote (``statistics``
for the median, the 90th percentile by linear interpolation between the closest ranks) or
from ``model_info``'s prices and the defaults the forecast states, never read back from
the module under test.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from desktop_agent.client import forecast as forecasting
from desktop_agent.client.api import Client
from desktop_agent.client.forecast import (
    Forecast,
    forecast,
    forecast_from_json,
    forecast_json,
    run_forecast,
    versus_words,
)
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.domain import AgentSpec, RunStatus, Usage
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import format_duration
from desktop_agent.engine.ports import SystemClock
from desktop_agent.llm.pricing import BATCH_DISCOUNT, model_info
from desktop_agent.worker.scheduling import DbSchedulerPort
from tests.forecast.history import past_run
from tests.helpers.timed_journal import Clock

SONNET = "claude-sonnet-5-5"
OPUS = "claude-opus-5-5"


def p90(values: Sequence[float]) -> float:
    """The 90th percentile as the inclusive method of ``statistics.quantiles`` gives it."""
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def spec(client: Client, model: str = SONNET, effort: str = "", economy: bool = False) -> AgentSpec:
    """The definition of a new run on ``model`` at ``effort``, in economy mode or not."""
    made, _ = client.prepare_run(model=model, effort=effort)
    return dataclasses.replace(made, economy=economy)


@pytest.fixture
def clock() -> Clock:
    return Clock(1_790_000_000.0)


STREAMED_SONNET_HIGH = [  # (cost, duration): the runs a Sonnet, high effort forecast reads
    (0.40, 300.0),
    (0.55, 420.0),
    (0.32, 240.0),
    (0.90, 900.0),
    (0.47, 360.0),
    (0.61, 480.0),
    (0.38, 330.0),
]


def _noise(client: Client, clock: Clock) -> None:
    """Runs a Sonnet, high effort, streamed forecast must leave out."""
    past_run(client, clock, model=OPUS, cost=5.0, duration=3000)  # another model
    past_run(client, clock, model=SONNET, effort="low", cost=0.05, duration=60)  # another effort
    past_run(client, clock, model=SONNET, effort="max", cost=3.0, duration=2000)
    past_run(client, clock, cost=9.0, duration=5000, status=RunStatus.FAILED)  # not completed
    past_run(client, clock, cost=8.0, duration=4000, status=RunStatus.CANCELLED)


def test_history_gives_the_median_and_90th_percentile_of_matching_completed_runs(
    client: Client, clock: Clock
) -> None:
    _noise(client, clock)
    for i, (cost, duration) in enumerate(STREAMED_SONNET_HIGH):
        # The model's default effort (high on Sonnet 5.5) and "high" asked for are the same.
        past_run(client, clock, effort="high" if i % 2 else "", cost=cost, duration=duration)
    _noise(client, clock)

    f = forecast(client, spec(client))

    costs = [c for c, _ in STREAMED_SONNET_HIGH]
    durations = [d for _, d in STREAMED_SONNET_HIGH]
    assert (f.basis, f.based_on, f.items, f.economy) == ("history", 7, 1, False)
    assert f.effort == "high" and f.model == SONNET
    assert f.cost_median_usd == pytest.approx(statistics.median(costs))
    assert f.cost_p90_usd == pytest.approx(p90(costs))
    assert f.duration_median_s == pytest.approx(statistics.median(durations))
    assert f.duration_p90_s == pytest.approx(p90(durations))
    assert f.explain == "from 7 completed runs on Claude Sonnet 5.5 at high effort; " + (
        "economy figures from the streamed runs at 50% of the price, each call ~5 min in the "
        "batch queue"
    )
    same = forecast(client, spec(client, effort="high"))
    assert (same.based_on, same.cost_median_usd) == (7, f.cost_median_usd)


def test_economy_and_streamed_runs_are_told_apart_and_each_mode_has_its_own_figures(
    client: Client, clock: Clock
) -> None:
    streamed = [(0.40, 300.0), (0.60, 500.0), (0.50, 400.0), (0.70, 650.0)]
    economy = [(0.21, 3000.0), (0.18, 2400.0), (0.33, 7200.0)]
    for cost, duration in streamed:
        past_run(client, clock, cost=cost, duration=duration)
    for cost, duration in economy:
        past_run(client, clock, economy=True, cost=cost, duration=duration)

    asked_streamed = forecast(client, spec(client))
    asked_economy = forecast(client, spec(client, economy=True))

    for f in (asked_streamed, asked_economy):
        assert f.basis == "history" and f.based_on == 7
        s, e = f.streamed, f.economy_mode
        assert (s.based_on, s.derived, e.based_on, e.derived) == (4, False, 3, False)
        assert s.cost_median_usd == pytest.approx(statistics.median(c for c, _ in streamed))
        assert s.cost_p90_usd == pytest.approx(p90([c for c, _ in streamed]))
        assert e.cost_median_usd == pytest.approx(statistics.median(c for c, _ in economy))
        assert e.duration_p90_s == pytest.approx(p90([d for _, d in economy]))
        assert "derived" not in f.explain and "figures from" not in f.explain
    assert asked_streamed.chosen is asked_streamed.streamed and not asked_streamed.economy
    assert asked_economy.economy and asked_economy.cost_median_usd == pytest.approx(
        statistics.median(c for c, _ in economy)
    )


def test_a_mode_without_history_is_derived_from_the_other_and_says_so(
    client: Client, clock: Clock
) -> None:
    # Streamed runs only: 3 model calls of 20 s each, the rest of the time tools.
    runs = [(0.30, 200.0), (0.50, 320.0), (0.40, 260.0)]
    for cost, duration in runs:
        past_run(client, clock, cost=cost, duration=duration, calls=3, call_s=20.0)

    f = forecast(client, spec(client, economy=True))

    e = f.economy_mode
    assert e.derived and e.based_on == 0 and not f.streamed.derived
    costs = [c * BATCH_DISCOUNT for c, _ in runs]
    assert e.cost_median_usd == pytest.approx(statistics.median(costs))
    assert e.cost_p90_usd == pytest.approx(p90(costs))
    # Each model call's 20 s becomes a turn in the batch queue: 5 minutes typically,
    # half an hour when slow (the 90th percentile).
    typical = [d - 3 * 20.0 + 3 * 300.0 for _, d in runs]
    slow = [d - 3 * 20.0 + 3 * 1800.0 for _, d in runs]
    assert e.duration_median_s == pytest.approx(statistics.median(typical))
    assert e.duration_p90_s == pytest.approx(p90(slow))
    assert f.cost_median_usd == e.cost_median_usd  # the mode asked for
    assert "economy figures from the streamed runs at 50% of the price" in f.explain


def test_streamed_figures_derived_from_economy_runs(client: Client, clock: Clock) -> None:
    runs = [(0.20, 4000.0), (0.25, 5000.0), (0.15, 3000.0), (0.30, 9000.0)]
    for cost, duration in runs:
        past_run(client, clock, economy=True, cost=cost, duration=duration, calls=4, call_s=600)

    s = forecast(client, spec(client)).streamed

    assert s.derived
    costs = [c / BATCH_DISCOUNT for c, _ in runs]
    assert s.cost_median_usd == pytest.approx(statistics.median(costs))
    streamed_times = [d - 4 * 600.0 + 4 * 20.0 for _, d in runs]
    assert s.duration_median_s == pytest.approx(statistics.median(streamed_times))
    assert s.duration_p90_s == pytest.approx(p90(streamed_times))


def test_a_templates_own_runs_first_then_every_run_of_the_model(
    client: Client, clock: Clock
) -> None:
    sched = Scheduling(client)
    digest = sched.add_schedule(
        "Digest", every_s=86400, name="weekly digest", options=RunOptions(model=SONNET)
    )
    scan = sched.add_schedule("Scan", every_s=3600, name="hourly scan")
    mine = [(1.20, 900.0), (1.50, 1200.0), (1.10, 800.0), (1.40, 1000.0)]
    for cost, duration in mine:
        past_run(client, clock, cost=cost, duration=duration, schedule_id=digest.id)
    others = [(0.10, 100.0), (0.12, 90.0), (0.11, 95.0)]
    for cost, duration in others:
        past_run(client, clock, cost=cost, duration=duration)
    past_run(client, clock, cost=0.5, duration=100.0, schedule_id=scan.id)
    past_run(client, clock, cost=0.7, duration=100.0, parent_id="bat-00000001")

    own = forecast(client, spec(client), template=digest.id)
    assert (own.basis, own.based_on, own.template) == ("history", 4, digest.id)
    assert own.cost_median_usd == pytest.approx(statistics.median(c for c, _ in mine))
    assert own.explain.startswith("from 4 completed runs of 'weekly digest' on Claude Sonnet 5.5")

    # One run of its own is too few: every completed Sonnet run at that effort instead.
    few = forecast(client, spec(client), template=scan.id)
    every = [*mine, *others, (0.5, 100.0), (0.7, 100.0)]
    assert few.based_on == len(every)
    assert few.cost_median_usd == pytest.approx(statistics.median(c for c, _ in every))
    assert "(fewer than 3 of 'hourly scan' so far)" in few.explain


def test_only_the_newest_runs_are_read(
    client: Client, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forecasting, "HISTORY_RUNS", 4)
    costs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    for cost in costs:
        past_run(client, clock, cost=cost, duration=100.0)
    f = forecast(client, spec(client))
    assert f.based_on == 4
    assert f.cost_median_usd == pytest.approx(statistics.median(costs[-4:]))


def _default_call() -> Usage:
    """The default call the forecast states: ~20k prompt tokens, 85% from the cache, 1.5k out."""
    return Usage(
        input_tokens=0, output_tokens=1500, cache_write_tokens=3000, cache_read_tokens=17000
    )


@pytest.mark.parametrize(("model", "effort"), [(SONNET, "high"), (OPUS, "low")])
def test_without_history_the_forecast_comes_from_the_models_prices(
    client: Client, clock: Clock, model: str, effort: str
) -> None:
    past_run(client, clock, model=model, effort=effort, cost=50.0, duration=9000)
    past_run(client, clock, model=model, effort=effort, cost=60.0, duration=9000)  # two: too few

    f = forecast(client, spec(client, model=model, effort=effort))

    info = model_info(model)
    call = _default_call()
    streamed = 12 * info.cost(call)  # streamed runs write the cache for five minutes
    economy = 12 * info.cost(call, cache_write_1h_tokens=3000, batch=True)  # for an hour
    assert (f.basis, f.based_on) == ("prices", 0)
    assert f.streamed.cost_median_usd == pytest.approx(streamed)
    assert f.streamed.cost_p90_usd == pytest.approx(2 * streamed)
    assert f.economy_mode.cost_median_usd == pytest.approx(economy)
    assert f.streamed.duration_median_s == pytest.approx(12 * 20.0)
    assert f.economy_mode.duration_median_s == pytest.approx(12 * 300.0)
    assert f.economy_mode.duration_p90_s == pytest.approx(12 * 1800.0)
    assert f.explain.startswith(
        f"only 2 past runs of {info.label} at {effort} effort: from its prices and a default "
        "of 12 calls of ~20k prompt tokens"
    )


def test_items_multiply_the_cost_and_widen_its_spread_by_the_square_root(
    client: Client, clock: Clock
) -> None:
    for cost, duration in STREAMED_SONNET_HIGH:
        past_run(client, clock, cost=cost, duration=duration)
    costs = [c for c, _ in STREAMED_SONNET_HIGH]
    durations = [d for _, d in STREAMED_SONNET_HIGH]
    median, high = statistics.median(costs), p90(costs)

    f = forecast(client, spec(client), items=10, concurrency=4)

    assert f.items == 10 and f.concurrency == 4
    assert f.cost_median_usd == pytest.approx(10 * median)
    assert f.cost_p90_usd == pytest.approx(10 * median + math.sqrt(10) * (high - median))
    assert f.economy_mode.cost_median_usd == pytest.approx(10 * median * BATCH_DISCOUNT)
    assert f.duration_median_s == pytest.approx(statistics.median(durations))  # one run's
    waves = 3  # 10 items 4 at a time
    assert f.items_duration() == pytest.approx(
        (waves * statistics.median(durations), waves * p90(durations))
    )
    with pytest.raises(InvalidInputError):
        forecast(client, spec(client), items=0)


def test_starting_a_run_keeps_the_forecast_of_that_moment(client: Client, clock: Clock) -> None:
    for cost, duration in STREAMED_SONNET_HIGH[:3]:
        past_run(client, clock, cost=cost, duration=duration)
    before = forecast(client, spec(client))

    run = client.start_run("Summarise the notes", model=SONNET)
    for cost, duration in STREAMED_SONNET_HIGH[3:]:  # more history after the start
        past_run(client, clock, cost=cost, duration=duration)

    kept = run_forecast(client, run.id)
    assert kept is not None and kept.based_on == 3
    assert kept.cost_median_usd == pytest.approx(before.cost_median_usd)
    assert forecast(client, spec(client)).based_on == 7  # a new forecast sees them
    assert client.events(run.id) == []  # kept as an event, but not something that happened
    assert run_forecast(client, past_run(client, clock, cost=1, duration=100).id) is None


def test_a_forecast_that_fails_never_stops_a_run_from_starting(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: object, **_kwargs: object) -> Forecast:
        raise RuntimeError("the history cannot be read")

    monkeypatch.setattr(forecasting, "forecast", broken)
    with caplog.at_level(logging.WARNING, logger="desktop_agent.client.forecast"):
        run = client.start_run("Summarise the notes", model="demo")
    assert client.run(run.id).status == RunStatus.QUEUED
    assert run_forecast(client, run.id) is None
    assert f"could not forecast run {run.id}" in caplog.text


def test_the_json_shape_and_back(client: Client, clock: Clock, tmp_path: Path) -> None:
    for cost, duration in STREAMED_SONNET_HIGH:
        past_run(client, clock, cost=cost, duration=duration)
    f = forecast(client, spec(client, economy=True), items=3)
    data = forecast_json(f)
    assert set(data) == {
        "basis", "based_on", "items", "concurrency", "economy", "model", "effort", "template",
        "cost_usd", "duration_s", "items_duration_s", "modes", "explain", "made_at",
    }  # fmt: skip
    assert data["cost_usd"] == data["modes"]["economy"]["cost_usd"]
    assert data["modes"]["economy"]["derived"] and not data["modes"]["streamed"]["derived"]
    back = forecast_from_json(data)
    assert back is not None and forecast_json(back) == data
    assert forecast_from_json({"basis": "history"}) is None


def test_an_ended_run_is_shown_beside_its_forecast(client: Client, clock: Clock) -> None:
    for cost, duration in STREAMED_SONNET_HIGH:
        past_run(client, clock, cost=cost, duration=duration)
    f = forecast(client, spec(client))
    ended = past_run(client, clock, cost=0.51, duration=420.0)
    costs = [c for c, _ in STREAMED_SONNET_HIGH]
    durations = [d for _, d in STREAMED_SONNET_HIGH]
    assert versus_words(f, ended) == (
        f"cost $0.51, forecast ≈ ${statistics.median(costs):.2f} (90%: ${p90(costs):.2f})"
        f" · took 7m, forecast ≈ {format_duration(statistics.median(durations))}"
        f" (90%: {format_duration(p90(durations))})"
    )


def test_runs_a_batch_starts_keep_the_forecast_its_template_made(
    client: Client, tmp_path: Path
) -> None:
    lines = tmp_path / "companies.txt"
    lines.write_text("Acme\nBolt\n")
    sched = Scheduling(client)
    batch = sched.start_batch(
        "Profile {item}",
        lines=lines,
        options=RunOptions(model="claude-sonnet-5-5", economy=True),
    )
    kept = batch.template.forecast
    assert isinstance(kept, dict) and kept["economy"] is True and kept["items"] == 1
    DbSchedulerPort(client.store, SystemClock(), client.db_path.parent).pump(time.time())  # worker
    runs = [i.run_id for i in sched.batch_items(batch.id) if i.run_id]
    assert len(runs) == 2
    for run_id in runs:
        made = run_forecast(client, run_id)
        assert made is not None and made.economy
        assert made == forecast_from_json(kept)  # the one the template made, not a new one
