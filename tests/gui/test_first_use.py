"""The first-time user's path: the empty list, the demo, the workspace warning, the header.

Real window offscreen, real database, runs executed by an in-thread worker with the demo
model; clicks are real mouse clicks on the widgets the analyst sees.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.views import RunRow
from desktop_agent.client.workspaces import DEMO_NOTES, create_demo_workspace
from desktop_agent.domain import AgentSpec, Budget, Run, RunStatus, StepKind, WaitReason
from desktop_agent.gui import fmt
from desktop_agent.gui.controls import Control
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.gui.dialogs.prompts import BudgetDialog, MessageDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.empty_state import EmptyMode
from desktop_agent.gui.widgets.timeline import duration_text
from tests.gui.conftest import StartWorker, select, wait_status


def click(button: QAbstractButton) -> None:
    """A real left click on a visible, enabled button."""
    assert button.isVisible() and button.isEnabled(), button.text()
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)


def empty_shown(window: MainWindow, mode: EmptyMode) -> bool:
    """Whether the run list shows its empty state, in ``mode``, instead of the table."""
    panel = window.run_list
    return (
        panel.stack.currentWidget() is panel.empty
        and panel.empty.isVisible()
        and panel.empty.mode == mode
    )


# ---------------------------------------------------------------- the sample workspace


def test_demo_workspace_is_created_once_and_never_overwritten(tmp_path: Path) -> None:
    folder = create_demo_workspace(tmp_path)
    assert folder == tmp_path / "demo-workspace"
    assert sorted(p.name for p in folder.iterdir()) == sorted(DEMO_NOTES)
    # The analyst edited a note and the demo wrote a report: both stay as they are.
    (folder / "supplier-acme.md").write_text("my own notes\n")
    (folder / "report.md").write_text("# earlier report\n")
    assert create_demo_workspace(tmp_path) == folder
    assert (folder / "supplier-acme.md").read_text() == "my own notes\n"
    assert (folder / "report.md").read_text() == "# earlier report\n"
    # A deleted note comes back; the others are not rewritten.
    (folder / "supplier-corvid.md").unlink()
    create_demo_workspace(tmp_path)
    assert (folder / "supplier-corvid.md").read_text() == DEMO_NOTES["supplier-corvid.md"]


def test_a_foreign_folder_of_that_name_is_left_alone(tmp_path: Path) -> None:
    foreign = tmp_path / "demo-workspace"
    foreign.mkdir()
    (foreign / "thesis.md").write_text("not a demo\n")
    folder = create_demo_workspace(tmp_path)
    assert folder == tmp_path / "demo-workspace-2"
    assert sorted(p.name for p in foreign.iterdir()) == ["thesis.md"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(DEMO_NOTES)


# ---------------------------------------------------------------- the empty run list


def test_empty_list_offers_the_demo_which_starts_and_is_selected(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    qtbot.waitUntil(lambda: empty_shown(window, EmptyMode.NO_RUNS))
    empty = window.run_list.empty
    assert "no API key" in empty.text.text() and "costs nothing" in empty.text.text()
    # Readable in the list area of a 1280x800 window: not cut, at most two lines.
    text = empty.text
    assert text.height() >= text.heightForWidth(text.width())
    assert text.height() <= 2 * text.fontMetrics().lineSpacing() + 4
    assert empty.new_run_button.isVisible() and not empty.clear_button.isVisible()
    # Not a dialog: the state sits in the list area, centered under the search bar.
    assert empty.window() is window
    assert window.run_list.stack.isAncestorOf(empty)

    click(empty.demo_button)
    qtbot.waitUntil(lambda: window.selected is not None)
    assert window.selected is not None
    run = window.selected.run
    assert run.model == "demo"
    data = client.db_path.parent
    assert Path(run.workspace) == data / "demo-workspace"
    assert sorted(p.name for p in Path(run.workspace).iterdir()) == sorted(DEMO_NOTES)
    assert window.run_list.stack.currentWidget() is window.run_list.table
    assert not empty.isVisible()
    assert window.run_list.current_run_id() == run.id


def test_new_run_button_opens_the_new_run_dialog(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: empty_shown(window, EmptyMode.NO_RUNS))
    click(window.run_list.empty.new_run_button)
    dialog = window.new_run_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    dialog.reject()


def test_filtered_to_nothing_says_no_match_and_clears(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    assert window.run_list.stack.currentWidget() is window.run_list.table

    window.run_list.search.setText("no such words anywhere")
    qtbot.waitUntil(lambda: empty_shown(window, EmptyMode.NO_MATCH))
    empty = window.run_list.empty
    assert empty.text.text() == "No run matches the search or the status filter."
    assert not empty.demo_button.isVisible() and not empty.new_run_button.isVisible()
    click(empty.clear_button)
    assert window.run_list.search.text() == ""
    assert window.run_list.stack.currentWidget() is window.run_list.table

    # The status filter alone, too: no completed run.
    window.run_list.filter.setCurrentText("Completed")
    qtbot.waitUntil(lambda: empty_shown(window, EmptyMode.NO_MATCH))
    click(empty.clear_button)
    assert window.run_list.filter.currentIndex() == 0
    assert window.run_list.proxy.rowCount() == 1


def test_the_empty_state_comes_back_when_every_run_is_archived(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    assert not window.run_list.empty.isVisible()
    client.cancel(run.id)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.CANCELLED)
    assert Scheduling(client).archive(0).run_ids == [run.id]
    qtbot.waitUntil(lambda: empty_shown(window, EmptyMode.NO_RUNS))


# ---------------------------------------------------------------- the workspace warning


def _new_run_dialog(qtbot: QtBot, window: MainWindow, workspace: str) -> NewRunDialog:
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    dialog.goal.setPlainText("Summarise the sources")
    dialog.model.setCurrentIndex(dialog.model.findData("demo"))
    dialog.workspace.setText(workspace)
    return dialog


def question_of(dialog: NewRunDialog) -> MessageDialog | None:
    """The dialog's "Start anyway?" question, if open (read afresh after each click)."""
    return dialog.confirm


def test_the_workspace_note_follows_the_path_as_it_is_typed(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, demo_ws: Path
) -> None:
    dialog = _new_run_dialog(qtbot, window, "")
    note = dialog.workspace_note
    assert not note.isVisible()  # the default (a new folder in the data folder) is fine
    dialog.workspace.setText(str(tmp_path / "nowhere"))
    assert note.isVisible() and "does not exist" in note.text()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden").write_text("")
    dialog.workspace.setText(str(tmp_path / "empty"))
    assert note.isVisible() and "empty" in note.text()
    dialog.workspace.setText(str(demo_ws))
    assert not note.isVisible()
    dialog.workspace.setText(str(demo_ws / "alpha.md"))
    assert note.isVisible() and "file, not a folder" in note.text()
    dialog.reject()


def test_an_empty_workspace_asks_start_anyway_before_starting(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    dialog = _new_run_dialog(qtbot, window, str(empty))
    asked: list[object] = []
    dialog.start_requested.connect(asked.append)

    click(dialog.start)
    question = dialog.confirm
    assert question is not None and question.isVisible()
    assert question.windowTitle() == "Start anyway?"
    assert "empty" in question.text.text()
    assert asked == []  # nothing starts while the question is open
    click(question.cancel_button)
    assert dialog.confirm is None and asked == []
    assert dialog.isVisible() and dialog.start.isEnabled()

    click(dialog.start)
    question = question_of(dialog)
    assert question is not None and question.confirm_button is not None
    click(question.confirm_button)
    assert len(asked) == 1
    qtbot.waitUntil(lambda: window.selected is not None)
    assert window.selected is not None
    assert Path(window.selected.run.workspace) == empty
    qtbot.waitUntil(lambda: not dialog.isVisible())


def test_the_default_workspace_starts_without_a_question(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    dialog = _new_run_dialog(qtbot, window, "")
    click(dialog.start)
    assert dialog.confirm is None
    qtbot.waitUntil(lambda: window.selected is not None)


def test_a_workspace_that_is_a_file_is_refused_in_the_dialog(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    dialog = _new_run_dialog(qtbot, window, str(demo_ws / "alpha.md"))
    click(dialog.start)
    assert dialog.confirm is None
    qtbot.waitUntil(lambda: "is a file, not a folder" in dialog.error.text())
    assert dialog.isVisible() and dialog.start.isEnabled()
    assert client.runs() == []
    dialog.reject()


# ---------------------------------------------------------------- the header's banner


def opened_approval(window: MainWindow) -> ApprovalDialog | None:
    """The window's approval dialog, if open (read afresh after each click)."""
    return window.approval_dialog


def test_the_banner_says_an_approval_waits_and_review_opens_it(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws)
    select(qtbot, window, run.id)
    banner = window.detail.header.banner
    assert not banner.isVisible()
    start_worker()
    qtbot.waitUntil(banner.isVisible)
    assert banner.text.full_text() == "Waiting for your approval: write_file report.md"
    assert banner.button.text() == "Review"
    # Shown, not popped up: no dialog opened by itself, nothing modal.
    assert window.approval_dialog is None
    assert QApplication.activeModalWidget() is None

    click(banner.button)
    dialog = opened_approval(window)
    assert dialog is not None and dialog.isVisible()
    assert dialog.approval.id == client.approvals()[0].id
    click(dialog.approve_button)
    qtbot.waitUntil(lambda: not banner.isVisible())
    wait_status(qtbot, window, run.id, RunStatus.COMPLETED)
    assert not banner.isVisible()


def test_the_banner_says_the_budget_is_reached_and_offers_to_extend(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws, max_steps=2)
    select(qtbot, window, run.id)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    banner = window.detail.header.banner
    qtbot.waitUntil(banner.isVisible)
    assert banner.text.full_text().startswith("Budget reached: ")
    assert banner.button.text() == "Extend budget"
    assert QApplication.activeModalWidget() is None
    click(banner.button)  # whether the monthly cap holds it is read off the GUI thread
    qtbot.waitUntil(lambda: isinstance(window.commands.dialog, BudgetDialog))
    extend = window.commands.dialog
    assert isinstance(extend, BudgetDialog) and extend.isVisible()
    extend.reject()


def test_the_banner_says_the_agent_asks_a_question(window: MainWindow) -> None:
    header = window.detail.header
    now = time.time()
    run = Run(
        id="q1",
        goal="Plan the trip",
        status=RunStatus.WAITING,
        spec=AgentSpec(model="demo", system_prompt="", tools=()),
        workspace="/tmp",
        budget=Budget(),
        created_at=now,
        updated_at=now,
        wait_reason=WaitReason.HUMAN_INPUT,
        status_message="Question for you: Which city first?",
    )
    asked: list[object] = []
    header.control_requested.connect(asked.append)
    header.show_row(RunRow(run))
    assert header.banner.isVisible()
    assert header.banner.text.full_text() == "The agent asks you: Which city first?"
    click(header.banner.button)
    assert asked == [Control.ANSWER]
    header.show_row(RunRow(replace(run, status=RunStatus.RUNNING, wait_reason=None)))
    assert not header.banner.isVisible()


# ---------------------------------------------------------------- the time gauge


def test_the_time_gauge_says_the_time_worked_and_the_age_beside_it(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    run = client.start_run(
        "Summarise the sources", model="demo", workspace=demo_ws, max_time_s=1800
    )
    # Worked 3m 12s in a run created 2h 05m ago (it waited for the analyst meanwhile).
    with sqlite3.connect(client.db_path) as con:
        con.execute(
            "UPDATE runs SET active_seconds = 192, created_at = ? WHERE id = ?",
            (time.time() - 7500, run.id),
        )
    window.poller.refresh()
    qtbot.waitUntil(
        lambda: (row := window.runs_model.get(run.id)) is not None and row.run.active_seconds > 0
    )
    select(qtbot, window, run.id)
    gauge = window.detail.header.gauges["Worked"]
    assert gauge.label == "Worked"
    assert gauge.value_text == "3m 12s / 30m"
    assert gauge.fraction == 192 / 1800
    assert gauge.note == "age 2h 05m"
    assert "waits for you are not counted" in gauge.toolTip()
    # The age is painted under the bar, not only in the tooltip.
    assert gauge.height() >= gauge.sizeHint().height()
    image = gauge.grab().toImage()
    bar_bottom = gauge.fontMetrics().height() + 11
    below = {
        image.pixel(x, y)
        for x in range(0, min(image.width(), 80))
        for y in range(bar_bottom + 3, image.height())
    }
    assert len(below) > 1, "nothing is drawn under the bar"


# ---------------------------------------------------------------- title and durations


def test_a_title_that_fits_is_shown_whole_and_a_long_one_is_elided(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    assert window.width() == 1280
    goal = "Compare the three supplier notes and recommend one supplier for the pilot, citing them."
    run = client.start_run(goal, model="demo", workspace=demo_ws)
    select(qtbot, window, run.id)
    title = window.detail.header.title
    qtbot.waitUntil(lambda: title.full_text() == goal)
    assert title.text().replace("\n", " ") == goal  # whole, on at most two lines
    assert title.text().count("\n") <= 1
    widest = max(title.text().split("\n"), key=title.fontMetrics().horizontalAdvance)
    assert title.fontMetrics().horizontalAdvance(widest) <= title.width()

    long_goal = " ".join(f"supplier-{i:03d}" for i in range(40))
    other = client.start_run(long_goal, model="demo", workspace=demo_ws)
    select(qtbot, window, other.id)
    qtbot.waitUntil(lambda: title.full_text() == long_goal[:120])
    assert title.text().endswith("…") and len(title.text()) < 120
    assert title.text().count("\n") == 1  # two lines, the second cut
    assert title.toolTip() == long_goal


def test_an_open_step_says_running_or_waiting_and_for_how_long(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws)
    select(qtbot, window, run.id)
    start_worker()
    model = window.steps_model
    qtbot.waitUntil(
        lambda: model.rowCount() > 0 and model.entry(model.rowCount() - 1).kind == StepKind.APPROVAL
    )
    waiting = model.entry(model.rowCount() - 1)
    assert waiting.is_open
    assert duration_text(waiting, waiting.started_at + 72) == "for 1m 12s"
    working = replace(waiting, kind=StepKind.MODEL_CALL)
    assert duration_text(working, working.started_at + 12.4) == "running 12s"
    done = model.entry(0)
    assert done.duration_s is not None
    assert duration_text(done, done.started_at + 99) == fmt.short_duration(done.duration_s)
