"""View > Usage: spend per day as a chart and totals per model, from the journal."""

from __future__ import annotations

import time

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.views import model_label
from desktop_agent.domain.units import format_usd
from desktop_agent.gui.views.usage import UsageWindow, days_of
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import OpenWindow
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import qt_wait_until
from tests.usage.spend_journal import write_journal


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # offscreen: no stacking
def test_usage_shows_todays_spend_and_the_models(
    qtbot: QtBot, open_window: OpenWindow, client: Client, make_executor: MakeExecutor
) -> None:
    for model in ("claude-haiku-4-5", "claude-sonnet-4-5"):
        client.start_run(f"Spend on {model}", model=model)
        drain(client.store, make_executor(ScriptedModel([Reply("Done.")])))
    spent = sum(r.cost_usd for r in client.runs())
    window = open_window()
    view = window.open_usage()
    qtbot.waitUntil(lambda: view.usage is not None)
    assert view.usage is not None
    assert view.usage.total.cost_usd == pytest.approx(spent) and spent > 0
    assert len(view.chart.bars) == 30  # every day of the period, today last
    today = time.strftime("%Y-%m-%d")
    assert view.chart.bars[-1][0] == today and view.chart.bars[-1][1] == pytest.approx(spent)
    assert all(v == 0 for _d, v in view.chart.bars[:-1])
    per_model = view.tree.topLevelItem(0)
    assert per_model is not None and per_model.text(0) == "Per model"
    assert per_model.childCount() == 2
    view.period.setCurrentIndex(0)  # the last 7 days
    qtbot.waitUntil(lambda: len(view.chart.bars) == 7)
    view.close()


def test_the_days_of_a_period_are_every_calendar_day_once() -> None:
    now = time.time()
    days = days_of(now - 29 * 86400, now)
    assert len(days) == len(set(days)) == 30 and days == sorted(days)


def _per_day(view: UsageWindow) -> bool:
    return view.chart.per_day


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # offscreen: no stacking
def test_bars_per_model_and_the_month_against_the_cap(
    qtbot: QtBot, open_window: OpenWindow, client: Client, make_executor: MakeExecutor
) -> None:
    costs = {"claude-haiku-4-5": 0.25, "claude-sonnet-4-5": 0.75}
    for model, cost in costs.items():
        client.start_run(f"Spend on {model}", model=model)
        drain(client.store, make_executor(ScriptedModel([Reply("Done.", cost=cost)])))
    client.settings.monthly_spend_cap_usd = 4.0
    window = open_window()
    view = window.open_usage()
    qtbot.waitUntil(lambda: view.usage is not None)
    assert view.month.text().endswith("so far: $1.00 of the $4.00 monthly cap (25%)")
    assert view.month_bar.isVisible() and view.month_bar.value() == 250
    view.group.setCurrentIndex(view.group.findData("model"))
    labels = {m: model_label(m) for m in costs}
    assert [name for name, _ in view.chart.bars] == [
        labels["claude-sonnet-4-5"],
        labels["claude-haiku-4-5"],
    ]
    assert [v for _, v in view.chart.bars] == pytest.approx([0.75, 0.25])
    assert not _per_day(view)
    view.group.setCurrentIndex(view.group.findData("day"))
    assert _per_day(view)
    assert view.chart.bars[-1][1] == pytest.approx(1.0)
    view.close()


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # offscreen: no stacking
def test_the_window_shows_the_split_by_mode_and_what_the_cache_saved(
    qtbot: QtBot, open_window: OpenWindow, client: Client
) -> None:
    j = write_journal(client)
    window = open_window()
    view = window.open_usage()
    qt_wait_until(qtbot, lambda: view.usage is not None, what="the usage read")
    assert view.modes.text() == (
        f"Streamed: {format_usd(j.streamed_cost)} in 3 call(s) · "
        f"Economy (batch, half price): {format_usd(j.economy_cost)} in 2 call(s) · "
        f"Archived, mode unknown: {format_usd(j.archived_cost)} in 1 run(s)"
    )
    saved = j.streamed_saving + j.economy_saving
    assert view.cache.text().startswith(f"The prompt cache saved {format_usd(saved)} (net:")
    assert not view.modes.isHidden() and not view.cache.isHidden()
    real = j.streamed_cost + j.economy_cost + j.archived_cost  # the demo's $1.50 apart
    assert view.total.text().startswith(f"{format_usd(real)} in 5 model call(s) of 3 run(s)")

    heads = [view.tree.topLevelItem(i) for i in range(view.tree.topLevelItemCount())]
    per_mode = next(h for h in heads if h is not None and h.text(0) == "Per mode")
    rows = [per_mode.child(i) for i in range(per_mode.childCount())]
    cells = [(r.text(0), r.text(1), r.text(4), r.text(6)) for r in rows if r is not None]
    assert cells == [
        ("Streamed", format_usd(j.streamed_cost), "3", format_usd(j.streamed_saving)),
        ("Economy (batch, half price)", format_usd(j.economy_cost), "2",
         format_usd(j.economy_saving)),
        ("Archived, mode unknown", format_usd(j.archived_cost), "", ""),
    ]  # fmt: skip

    view.group.setCurrentIndex(view.group.findData("mode"))
    assert [name for name, _ in view.chart.bars] == [
        "Streamed",
        "Economy (batch, half price)",
        "Archived, mode unknown",
    ]
    assert [v for _, v in view.chart.bars] == pytest.approx(
        [j.streamed_cost, j.economy_cost, j.archived_cost]
    )
    view.close()
