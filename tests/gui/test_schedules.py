"""Schedules and watched folders through the real window; stuck flags and the disk warning."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView, QToolBar
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.client.scheduling_views import upcoming_firings
from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import OverlapPolicy
from desktop_agent.engine.ports import RunPatch
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.dialogs.templates import ScheduleDialog, WatchDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.runs import RunColumn
from desktop_agent.gui.models.scheduling import ScheduleColumn, WatchColumn, next_text
from desktop_agent.gui.toolbuttons import button_for
from desktop_agent.persistence.schedules import ScheduleStore
from tests.gui.conftest import OpenWindow


def click(bar: QToolBar, action: QAction) -> None:
    """Click the toolbar button of ``action``."""
    button = button_for(bar, action)
    assert button is not None and button.isEnabled(), f"{action} is not enabled"
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)


def double_click(table: QAbstractItemView, index: QModelIndex) -> None:
    """Double-click a cell the way the analyst does."""
    table.scrollTo(index)
    center = table.visualRect(index).center()
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=center)
    QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=center)


def cell(window: MainWindow, row: int, column: int) -> str:
    model = window.scheduling.schedule_model
    return str(model.index(row, column).data(Qt.ItemDataRole.DisplayRole))


def test_create_a_schedule_through_the_dialog_and_see_its_next_firing(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    views = window.scheduling
    window.side.setCurrentWidget(views.schedules)
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    assert views.schedules.pane.currentWidget() is views.schedules.pane.hint  # no schedule yet
    click(views.schedules.bar, views.schedules.new_action)
    dialog = views.template_dialog
    assert isinstance(dialog, ScheduleDialog) and dialog.isVisible()
    assert not dialog.start.isEnabled()  # no goal yet
    QTest.keyClicks(dialog.goal, "Check the competitors' pricing pages for changes")
    assert dialog.start.isEnabled()  # the default interval (1d) is valid
    assert "Every day — next:" in dialog.check.text()

    # Interval and cron problems are explained in the dialog, and block the button.
    dialog.every.setText("5 minutes")
    assert dialog.check.text().startswith("✘ invalid duration '5 minutes'")
    assert not dialog.start.isEnabled()
    QTest.mouseClick(dialog.by_cron, Qt.MouseButton.LeftButton)
    assert dialog.cron.isVisible() and not dialog.every.isVisible()
    QTest.keyClicks(dialog.cron, "0 25 * * *")
    assert "✘ invalid cron expression '0 25 * * *'" in dialog.check.text()
    assert "higher than the maximum" in dialog.check.text()
    assert not dialog.start.isEnabled()
    dialog.cron.setText("0 9 * * 1-5")
    dialog.timezone.setText("Mars/Olympus")
    assert "unknown time zone 'Mars/Olympus'" in dialog.check.text()
    dialog.timezone.clear()
    assert dialog.check.text().startswith("✔ On weekdays at 09:00 — next: ")
    assert dialog.start.isEnabled()
    dialog.overlap.setCurrentIndex(dialog.overlap.findData("queue"))

    # The backend's own checks come back into the dialog too.
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("x")
    dialog.workspace.setText(str(not_a_folder))
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "is a file, not a folder" in dialog.error.text())
    assert dialog.isVisible() and Scheduling(client).schedules() == []

    dialog.workspace.setText(str(tmp_path / "pricing"))
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: views.schedule_model.rowCount() == 1)
    qtbot.waitUntil(lambda: views.template_dialog is None)  # closed (and deleted)
    [schedule] = Scheduling(client).schedules()
    assert schedule.cron == "0 9 * * 1-5" and schedule.every_s is None
    assert schedule.overlap == OverlapPolicy.QUEUE and not schedule.paused
    assert schedule.template.workspace == str(tmp_path / "pricing")
    assert schedule.template.spec.model == "demo"
    assert "created" in window.statusBar().currentMessage()

    assert (
        cell(window, 0, ScheduleColumn.NAME) == "Check the competitors' pricing pages for changes"
    )
    assert cell(window, 0, ScheduleColumn.WHEN) == "On weekdays at 09:00"
    first = upcoming_firings(cron="0 9 * * 1-5")[0]
    model = views.schedule_model
    assert model.row_at(0).next_at == pytest.approx(first)
    assert cell(window, 0, ScheduleColumn.NEXT) == next_text(first, model.now)
    assert cell(window, 0, ScheduleColumn.OVERLAP) == "Queue"
    assert cell(window, 0, ScheduleColumn.STATE) == "Active"
    assert cell(window, 0, ScheduleColumn.LAST) == "not yet"
    qtbot.waitUntil(lambda: views.schedules.current_id() == schedule.id)  # selected
    assert views.schedules.summary.text() == "1 schedule"


def test_pause_resume_and_remove_through_the_buttons(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    sched = Scheduling(client)
    s = sched.add_schedule("Weekly digest", every_s=6 * 3600, options=RunOptions(model="demo"))
    views = window.scheduling
    view = views.schedules
    window.side.setCurrentWidget(view)
    qtbot.waitUntil(lambda: views.schedule_model.rowCount() == 1)
    assert cell(window, 0, ScheduleColumn.WHEN) == "Every 6 hours"
    assert cell(window, 0, ScheduleColumn.NEXT).startswith(("in ", "today ", "tomorrow "))
    assert not view.pause_action.isEnabled()  # nothing selected
    assert view.select(s.id)
    assert view.pause_action.isEnabled() and not view.resume_action.isEnabled()

    click(view.bar, view.pause_action)
    qtbot.waitUntil(lambda: cell(window, 0, ScheduleColumn.STATE) == "Paused")
    assert sched.schedule(s.id).paused
    assert cell(window, 0, ScheduleColumn.NEXT) == "paused"
    assert view.resume_action.isEnabled() and not view.pause_action.isEnabled()
    assert view.summary.text() == "1 schedule · 1 paused"
    assert "paused" in window.statusBar().currentMessage()

    click(view.bar, view.resume_action)
    qtbot.waitUntil(lambda: cell(window, 0, ScheduleColumn.STATE) == "Active")
    assert not sched.schedule(s.id).paused

    # Remove asks first; keeping it changes nothing.
    click(view.bar, view.remove_action)
    box = views.dialog
    assert isinstance(box, MessageDialog) and box.isVisible()
    assert "Weekly digest" in box.text.text()
    confirmed: list[bool] = []
    box.confirmed.connect(lambda: confirmed.append(True))
    QTest.mouseClick(box.cancel_button, Qt.MouseButton.LeftButton)
    assert not box.isVisible() and confirmed == []  # no removal was asked for
    assert [x.id for x in sched.schedules()] == [s.id]

    click(view.bar, view.remove_action)
    box = views.dialog
    assert isinstance(box, MessageDialog) and box.confirm_button is not None
    assert box.confirm_button.text() == "Remove schedule"
    QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: views.schedule_model.rowCount() == 0)
    assert sched.schedules() == []
    assert view.pane.currentWidget() is view.pane.hint
    assert not view.remove_action.isEnabled()


def test_double_click_a_schedule_selects_its_newest_run(
    qtbot: QtBot, open_window: OpenWindow, client: Client, demo_ws: Path
) -> None:
    sched = Scheduling(client)
    s = sched.add_schedule("Morning check", cron="30 8 * * *", options=RunOptions(model="demo"))
    never = sched.add_schedule("Never fired", every_s=3600, options=RunOptions(model="demo"))
    run = client.start_run("Morning check", model="demo", workspace=demo_ws)
    fired = time.time() - 60
    with client.store.db.write() as conn:  # as a firing records it
        conn.exec_driver_sql(
            "UPDATE schedules SET last_run_id = ?, last_fire_at = ?, fire_count = 1, "
            "version = version + 1, last_result = ? WHERE id = ?",
            (run.id, fired, f"started run {run.id} (on time)", s.id),
        )
        conn.exec_driver_sql("UPDATE runs SET schedule_id = ? WHERE id = ?", (s.id, run.id))
    window = open_window()
    views = window.scheduling
    window.side.setCurrentWidget(views.schedules)
    qtbot.waitUntil(lambda: views.schedule_model.rowCount() == 2)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    assert cell(window, 0, ScheduleColumn.WHEN) == "Every day at 08:30"
    assert cell(window, 0, ScheduleColumn.LAST).startswith("Queued · ")
    tip = views.schedule_model.index(0, ScheduleColumn.LAST).data(Qt.ItemDataRole.ToolTipRole)
    assert f"started run {run.id}" in tip

    # A schedule that never ran: double-clicking it goes nowhere.
    double_click(views.schedules.table, views.schedule_model.index(1, ScheduleColumn.NAME))
    assert window.side.currentWidget() is views.schedules
    assert views.schedule_model.row_at(1).schedule.id == never.id

    double_click(views.schedules.table, views.schedule_model.index(0, ScheduleColumn.NAME))
    assert window.side.currentWidget() is window.run_list
    assert window.selected is not None and window.selected.run.id == run.id


def test_watch_a_folder_through_the_dialog_then_pause_resume_and_remove(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    inbox = tmp_path / "invoices"
    inbox.mkdir()
    for name in ("a.pdf", "b.pdf", "notes.txt"):
        (inbox / name).write_text(name)
    views = window.scheduling
    view = views.watches
    window.side.setCurrentWidget(view)
    click(view.bar, view.new_action)
    dialog = views.template_dialog
    assert isinstance(dialog, WatchDialog)
    QTest.keyClicks(dialog.goal, "Extract the totals from invoice {name}")
    assert not dialog.start.isEnabled() and dialog.check.text() == "✘ choose a folder"
    dialog.folder.setText(str(inbox))
    dialog.pattern.setText("*.pdf")
    dialog.every.setText("0.1s")
    assert "✘ scan at most every half second" in dialog.check.text()
    dialog.every.setText("30s")
    assert dialog.check.text() == "✔ Looks for new files every 30 seconds"
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: views.watch_model.rowCount() == 1)
    [watch] = Scheduling(client).watches()
    assert (watch.folder, watch.pattern, watch.scan_s) == (str(inbox), "*.pdf", 30.0)
    model = views.watch_model
    # The two PDFs there now are seen (and start nothing: "include existing" was off).
    assert model.index(0, WatchColumn.SEEN).data() == "2"
    assert model.index(0, WatchColumn.RUNS).data() == "0"
    assert model.index(0, WatchColumn.SCAN).data() == "every 30 seconds"
    qtbot.waitUntil(lambda: view.current_id() == watch.id)

    click(view.bar, view.pause_action)
    qtbot.waitUntil(lambda: model.index(0, WatchColumn.STATE).data() == "Paused")
    assert Scheduling(client).watches()[0].paused
    click(view.bar, view.resume_action)
    qtbot.waitUntil(lambda: model.index(0, WatchColumn.STATE).data() == "Watching")
    assert not Scheduling(client).watches()[0].paused
    click(view.bar, view.remove_action)
    box = views.dialog
    assert isinstance(box, MessageDialog) and box.confirm_button is not None
    QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: model.rowCount() == 0)
    assert Scheduling(client).watches() == []


def _running_run_without_progress(client: Client, demo_ws: Path, minutes: float) -> str:
    run = client.start_run("Fetch the supplier catalogue", model="demo", workspace=demo_ws)
    client.store.commit(run.id, patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()))
    with client.store.db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE runs SET updated_at = ? WHERE id = ?", (time.time() - minutes * 60, run.id)
        )
    return run.id


def test_a_stuck_run_gets_a_badge_and_a_status_line(
    qtbot: QtBot, open_window: OpenWindow, client: Client, demo_ws: Path
) -> None:
    other = client.start_run("A run that is fine", model="demo", workspace=demo_ws)
    run_id = _running_run_without_progress(client, demo_ws, 35.2)
    window = open_window()
    views = window.scheduling
    qtbot.waitUntil(lambda: window.runs_model.rowCount() == 2)
    assert not views.stuck_note.isVisible()

    alerts = ScheduleStore(client.store.db)
    [flag] = alerts.flag_stuck(time.time(), 30 * 60)  # what the worker's scheduler does
    assert flag.run_id == run_id
    qtbot.waitUntil(lambda: run_id in views.badges.stuck)
    panel = window.run_list
    row = panel.proxy.mapFromSource(window.runs_model.index(window.runs_model.row_of(run_id), 0))
    goal = panel.proxy.index(row.row(), RunColumn.GOAL)
    assert views.badges.badge_of(goal) is not None
    fine = panel.proxy.mapFromSource(
        window.runs_model.index(window.runs_model.row_of(other.id), RunColumn.GOAL)
    )
    assert views.badges.badge_of(fine) is None
    assert not panel.table.grab().isNull()  # the badge paints
    assert views.stuck_note.isVisible()
    assert "1 run without progress" in views.stuck_note.text()

    assert window.select_run(run_id)
    qtbot.waitUntil(lambda: "no progress for 35 min" in views.stuck_note.text())
    assert views.stuck_note.text().startswith(f"Run {run_id}: no progress for 35 min")
    assert "a tool or the model may hang" in views.stuck_note.toolTip()

    # The flag clears once the run moves on.
    client.store.commit(run_id, patch=RunPatch(status=RunStatus.CANCELLED))
    alerts.flag_stuck(time.time(), 30 * 60)
    qtbot.waitUntil(lambda: not views.stuck_note.isVisible())
    assert views.badges.badge_of(goal) is None


def test_storage_warning_in_the_status_bar(
    qtbot: QtBot, open_window: OpenWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.disk_usage

    def nearly_full(path: str) -> Any:
        return real(path)._replace(free=700 * 1024)

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    window = open_window()
    note = window.scheduling.storage_note
    qtbot.waitUntil(note.isVisible)
    # Low, not full: commits still fit in 700 KB.
    assert note.text().startswith("The disk holding the database is low on space (700 KB free)")
    assert note.toolTip().startswith("the disk holding the database is low on space")
