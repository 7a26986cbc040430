"""The forecast in the window: New run's line before a run starts, the header after it ends."""

from __future__ import annotations

import statistics
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, Usage
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.llm.pricing import BATCH_DISCOUNT, model_info
from tests.conftest import MakeExecutor, drain
from tests.forecast.history import past_run
from tests.gui.conftest import OpenWindow, select
from tests.helpers.polling import qt_wait_until
from tests.helpers.timed_journal import Clock

SONNET = [(0.40, 300.0), (0.55, 420.0), (0.32, 240.0), (0.90, 900.0), (0.47, 360.0)]
OPUS_ECONOMY = [(1.10, 4000.0), (0.80, 3000.0), (1.30, 6000.0)]


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def cost_words(pairs: list[tuple[float, float]], factor: float = 1.0) -> str:
    """``≈ $0.47 (90%: $0.76)``: these runs' costs (times ``factor``)."""
    costs = [c * factor for c, _ in pairs]
    return f"≈ {format_usd(statistics.median(costs))} (90%: {format_usd(p90(costs))})"


def figures(pairs: list[tuple[float, float]]) -> str:
    """``≈ $0.47 (90%: $0.76) · ≈ 6m (90%: 12m)`` of these runs' costs and durations."""
    durations = [d for _, d in pairs]
    return (
        f"{cost_words(pairs)} · ≈ {format_duration(statistics.median(durations))} "
        f"(90%: {format_duration(p90(durations))})"
    )


def choose(dialog: NewRunDialog, model: str, effort: str = "") -> None:
    index = dialog.model.findData(model)
    assert index >= 0, f"{model} is not offered"
    dialog.model.setCurrentIndex(index)
    dialog.effort.setCurrentIndex(dialog.effort.findData(effort))


def test_new_run_shows_the_forecast_of_the_model_and_effort_chosen(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    clock = Clock(1_790_000_000.0)
    for cost, duration in SONNET:
        past_run(client, clock, model="claude-sonnet-5-5", cost=cost, duration=duration)
    for cost, duration in OPUS_ECONOMY:
        past_run(client, clock, model="claude-opus-5-5", effort="low", economy=True,
                 cost=cost, duration=duration)  # fmt: skip
    window = open_window()
    dialog = window.open_new_run()
    line = dialog.forecast_line
    qtbot.waitUntil(dialog.isVisible)

    choose(dialog, "claude-sonnet-5-5")
    sonnet = f"Forecast: {figures(SONNET)} · economy "
    qt_wait_until(
        qtbot, lambda: line.text().startswith(sonnet), what="Sonnet's forecast", last=line.text
    )
    assert line.isVisible()
    assert line.text().endswith("· from 5 runs")
    assert f"economy ≈ {format_usd(statistics.median(c for c, _ in SONNET) * BATCH_DISCOUNT)}" in (
        line.text()
    )
    assert line.toolTip().startswith("From 5 completed runs on Claude Sonnet 5.5 at high effort")

    choose(dialog, "claude-opus-5-5", "low")
    qt_wait_until(
        qtbot, lambda: "· from 3 runs" in line.text(), what="Opus's forecast", last=line.text
    )
    # Streamed leads (economy is off), derived from the economy runs; economy beside it.
    assert f"· economy {figures(OPUS_ECONOMY)} · from 3 runs" in line.text()
    line.set_economy(True)  # what the economy checkbox does: no read, the other mode leads
    assert line.text().startswith(f"Forecast: {figures(OPUS_ECONOMY)} · streamed ≈ ")
    assert not line.busy

    choose(dialog, "claude-haiku-5-5")  # no past runs: from its prices
    info = model_info("claude-haiku-5-5")
    call = Usage(0, 1500, 3000, 17000)
    economy = 12 * info.cost(call, cache_write_1h_tokens=3000, batch=True)
    qt_wait_until(
        qtbot, lambda: "from prices" in line.text(), what="Haiku's forecast", last=line.text
    )
    assert line.text().startswith(f"Forecast: ≈ {format_usd(economy)} (90%: ")
    dialog.reject()

    # Run again of a streamed run of a schedule: its mode leads, its schedule's runs first.
    again = past_run(client, clock, model="claude-opus-5-5", effort="low", cost=1.0,
                     duration=100.0, schedule_id="sch-digest")  # fmt: skip
    dialog = window.run_again(again)
    assert dialog.forecast_template == "sch-digest" and not line.economy
    qt_wait_until(
        qtbot,
        lambda: "(fewer than 3 of 'sch-digest' so far)" in line.toolTip(),
        what="Run again's forecast",
        last=line.toolTip,
    )
    # Its one streamed run is too few: streamed figures come from the 3 economy-mode runs.
    assert line.text().startswith(f"Forecast: {cost_words(OPUS_ECONOMY, 1 / BATCH_DISCOUNT)} · ")
    assert line.text().endswith("· from 3 runs")
    dialog.reject()


def test_the_header_shows_an_ended_runs_forecast_beside_what_it_cost(
    qtbot: QtBot,
    client: Client,
    open_window: OpenWindow,
    make_executor: MakeExecutor,
    demo_ws: Path,
) -> None:
    run = client.start_run("Summarise the notes", model="demo", workspace=demo_ws)
    client.settings.ask_overwrite = False
    drain(client.store, make_executor())
    ended = client.run(run.id)
    assert ended.status == RunStatus.COMPLETED and ended.started_at and ended.finished_at
    queued = client.start_run("Not taken yet", model="demo")
    window = open_window()
    label = window.detail.header.forecast_label

    select(qtbot, window, run.id)
    qt_wait_until(qtbot, label.isVisible, what="the forecast beside the cost", last=label.text)
    info = model_info("demo")
    streamed = 12 * info.cost(Usage(0, 1500, 3000, 17000))  # no history: the demo's prices
    took = format_duration(ended.finished_at - ended.started_at)
    assert label.text() == (
        f"cost {format_usd(ended.cost_usd)}, forecast ≈ {format_usd(streamed)} "
        f"(90%: {format_usd(2 * streamed)}) · took {took}, forecast ≈ 4m (90%: 8m)"
    )

    select(qtbot, window, queued.id)  # not ended: nothing to set beside it yet
    header = window.detail.header
    qt_wait_until(qtbot, lambda: header.forecast is not None, what="the queued run's forecast")
    assert header.row is not None and header.row.run.id == queued.id
    assert not label.isVisible()
