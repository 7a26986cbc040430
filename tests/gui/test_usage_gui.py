"""View > Usage: spend per day as a chart and totals per model, from the journal."""

from __future__ import annotations

import time

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.views import model_label
from desktop_agent.gui.views.usage import UsageWindow, days_of
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import OpenWindow
from tests.helpers.fakes import Reply, ScriptedModel


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
