"""A run held by the monthly cap, as the analyst meets it: raise the cap, resume, done.

The header's banner of a run the cap holds offers *Raise the cap…* (not *Extend budget*,
which cannot lift a cap); the dialog shows this month's spend, the cap and the runs held;
*Raise the cap* saves it and then offers *Resume the N held runs*. Three clicks from the
banner to the runs going on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.gui.dialogs.cap import CapDialog
from desktop_agent.gui.mainwindow import MainWindow
from tests.budgets.test_cap_raise import held_runs
from tests.budgets.test_monthly_cap import _model
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import select
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.spend import million_token_api


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """Every call reads a million prompt tokens ($1 on Haiku) and answers at once."""
    with million_token_api() as server:
        yield server


def click(button: QAbstractButton) -> None:
    assert button.isVisible() and button.isEnabled(), button.text()
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)


def test_from_the_banner_to_the_held_runs_going_on_in_three_clicks(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    make_executor: MakeExecutor,
    fake: FakeAnthropic,
) -> None:
    held = held_runs(client, make_executor, fake, n=2)
    select(qtbot, window, held[0].id)
    banner = window.detail.header.banner
    qtbot.waitUntil(banner.isVisible)
    assert banner.text.full_text().startswith("Monthly spend cap reached: $1.00 of $1.01")
    assert banner.button.text() == "Raise the cap…"

    click(banner.button)  # 1
    qtbot.waitUntil(lambda: isinstance(window.commands.dialog, CapDialog))
    dialog = window.commands.dialog
    assert isinstance(dialog, CapDialog) and dialog.isVisible()
    assert "so far: $1.00 of the $1.01 cap (99%)" in dialog.month.text()
    assert dialog.held.text().startswith("2 runs wait for it:")
    assert "Held 0" in dialog.held.text() and "Held 1" in dialog.held.text()
    assert dialog.cap.value() == 11.0  # suggested: $10 above this month's spend, rounded up
    assert dialog.raise_button.isVisible() and not dialog.resume_button.isVisible()

    dialog.cap.setValue(0.50)  # below what the month spent: refused, nothing saved
    click(dialog.raise_button)
    assert dialog.error.isVisible() and "already spent $1.00" in dialog.error.text()
    assert Settings.load(client.db_path).monthly_spend_cap_usd == pytest.approx(1.01)

    dialog.cap.setValue(20.0)
    click(dialog.raise_button)  # 2
    qtbot.waitUntil(dialog.resume_button.isVisible)
    assert Settings.load(client.db_path).monthly_spend_cap_usd == 20.0
    assert dialog.resume_button.text() == "Resume the 2 held runs"
    assert dialog.month.text() == "The monthly cap is now $20.00."

    click(dialog.resume_button)  # 3
    qtbot.waitUntil(lambda: not dialog.isVisible())
    assert all(client.has_pending_commands(r.id) for r in held)
    drain(client.store, make_executor(_model(fake)))
    assert [client.run(r.id).status for r in held] == [RunStatus.COMPLETED] * 2


def test_a_run_held_by_its_own_budget_still_gets_the_budget_dialog(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor
) -> None:
    from desktop_agent.gui.dialogs.prompts import BudgetDialog
    from tests.helpers.fakes import Reply, ScriptedModel

    run = client.start_run("Two steps at most", model="claude-haiku-4-5", max_steps=1)
    plan = ("update_plan", {"items": [{"text": "look"}]})
    drain(client.store, make_executor(ScriptedModel([Reply("Plan.", [plan]), Reply("Done.")])))
    assert client.run(run.id).status == RunStatus.WAITING
    select(qtbot, window, run.id)
    banner = window.detail.header.banner
    qtbot.waitUntil(banner.isVisible)
    assert banner.button.text() == "Extend budget"
    click(banner.button)
    qtbot.waitUntil(lambda: isinstance(window.commands.dialog, BudgetDialog))
