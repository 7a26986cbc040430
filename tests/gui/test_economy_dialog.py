"""Economy mode where a model cannot batch, and in the schedule dialog."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.views import model_choices
from desktop_agent.gui.dialogs.templates import ScheduleDialog
from desktop_agent.gui.mainwindow import MainWindow
from tests.economy.waits import NO_BATCH, without_batches
from tests.gui.conftest import OpenWindow, select
from tests.gui.test_forecast_gui import choose
from tests.gui.test_schedules import click
from tests.helpers.polling import qt_wait_until


def test_model_choices_say_which_models_take_batches(client: Client) -> None:
    offered = {c.id: c for c in model_choices(client.models())}
    assert offered[NO_BATCH].batches and offered[NO_BATCH].economy_refusal() == ""
    assert "runs on this machine" in offered["demo"].economy_refusal()
    without_batches(client)
    offered = {c.id: c for c in model_choices(client.models())}
    assert not offered[NO_BATCH].batches
    why = offered[NO_BATCH].economy_refusal()
    assert why.endswith(
        "does not take Message Batches (its catalogue entry does not list them): "
        "runs of it are streamed."
    )


def test_new_run_offers_no_economy_mode_for_a_model_without_batches_and_says_why(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    without_batches(client)
    window = open_window()
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    qt_wait_until(
        qtbot, lambda: not dialog.choices[NO_BATCH].batches, what="the stored catalogue read"
    )
    choose(dialog, "claude-haiku-5-5")
    assert dialog.economy.isEnabled() and not dialog.economy_note.isVisible()
    dialog.economy.setChecked(True)
    assert dialog.economy_checked()

    choose(dialog, NO_BATCH)
    note = dialog.economy_note.text()
    assert not dialog.economy.isEnabled() and not dialog.economy_checked()
    assert dialog.economy_note.isVisible() and "does not take Message Batches" in note
    assert dialog.economy.toolTip() == note
    dialog.goal.setPlainText("Summarise the notes")
    assert not dialog.request().economy
    dialog.start.click()
    qt_wait_until(qtbot, lambda: len(client.runs()) == 1, what="the run started")
    (run,) = client.runs()
    assert run.spec.model == NO_BATCH and not run.spec.economy

    dialog = window.open_new_run()
    choose(dialog, "demo")
    assert not dialog.economy.isEnabled() and dialog.economy_note.isVisible()
    assert "runs on this machine" in dialog.economy_note.text()
    choose(dialog, "claude-haiku-5-5")
    assert dialog.economy.isEnabled() and not dialog.economy_note.isVisible()
    dialog.reject()


def test_a_schedule_made_in_the_dialog_starts_economy_mode_runs(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    views = window.scheduling
    window.side.setCurrentWidget(views.schedules)
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    click(views.schedules.bar, views.schedules.new_action)
    dialog = views.template_dialog
    assert isinstance(dialog, ScheduleDialog) and dialog.isVisible()
    choose(dialog, "demo")
    assert not dialog.economy.isEnabled()
    choose(dialog, "claude-sonnet-5-5")
    assert dialog.economy.isEnabled() and not dialog.economy.isChecked()  # streamed by default
    dialog.economy.setChecked(True)
    QTest.keyClicks(dialog.goal, "Digest the week's filings")
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qt_wait_until(qtbot, lambda: views.template_dialog is None, what="the dialog closed")
    [schedule] = Scheduling(client).schedules()
    assert schedule.template.spec.economy and schedule.template.spec.model == "claude-sonnet-5-5"


def test_the_header_says_a_run_is_in_economy_mode_beside_its_effort(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    economy = client.start_run("Summarise", model="claude-sonnet-5-5", economy=True)
    streamed = client.start_run("Summarise", model="claude-sonnet-5-5")
    window = open_window()
    chip = window.detail.header.model
    select(qtbot, window, economy.id)
    qt_wait_until(
        qtbot,
        lambda: (
            "effort high (model default) · thinking off · economy (batches, half price)"
            in chip.text()
        ),
        what="economy mode in the header",
        last=chip.text,
    )
    select(qtbot, window, streamed.id)
    qt_wait_until(
        qtbot, lambda: "thinking off" in chip.text() and "economy" not in chip.text(),
        what="the streamed run's header", last=chip.text,
    )  # fmt: skip
