"""Approval flows that never decide blind, through the real window over a real database.

Each demo run is driven to its approval (an overwrite of report.md) by an in-thread worker
(``drain``) before the window acts; the database then says what was decided and what not.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus
from desktop_agent.gui.controls import Control
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.prompts import MessageDialog, TextPrompt
from desktop_agent.gui.mainwindow import MainWindow
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import select

SOURCES = {
    "alpha.md": "# Alpha\nAlpha says the market grew 4% in 2025.\n",
    "beta.txt": "Beta reports churn fell. More detail follows.\n",
}


def _waiting(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    make_executor: MakeExecutor,
    tmp_path: Path,
    n: int = 1,
) -> list[str]:
    """``n`` demo runs, each in its own workspace, waiting for their approval."""
    ids = []
    for i in range(n):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        for name, text in SOURCES.items():
            (ws / name).write_text(text)
        ids.append(client.start_run(f"Summarise the sources {i}", model="demo", workspace=ws).id)
    drain(client.store, make_executor())
    assert [client.run(i).status for i in ids] == [RunStatus.WAITING] * n
    qtbot.waitUntil(lambda: window.approvals_model.rowCount() == n)
    return ids


def _states(client: Client) -> dict[str, ApprovalState]:
    """Each run's approval state, counting a decision queued for the worker as made."""
    out = {}
    for a in client.store.list_approvals(None):
        queued = client.store.pending_commands(a.run_id)
        out[a.run_id] = ApprovalState.APPROVED if queued else a.state
    return out


def _inbox_rows(qtbot: QtBot, window: MainWindow, *rows: int) -> None:
    """Show the inbox and select exactly ``rows`` (Ctrl+click for the others)."""
    window.acts["inbox"].trigger()
    table = window.inbox.table
    table.clearSelection()
    for k, row in enumerate(rows):
        rect = table.visualRect(window.approvals_model.index(row, 0))
        mods = Qt.KeyboardModifier.ControlModifier if k else Qt.KeyboardModifier.NoModifier
        QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, mods, rect.center())
    qtbot.waitUntil(lambda: len(table.selectionModel().selectedRows()) == len(rows))


def _dialog(qtbot: QtBot, window: MainWindow) -> ApprovalDialog:
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: "pass the tool's checks" in dialog.check.text())
    return dialog


def test_toolbar_approve_opens_the_call_and_decides_only_in_the_dialog(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    (run_id,) = _waiting(qtbot, window, client, make_executor, tmp_path)
    select(qtbot, window, run_id)
    qtbot.waitUntil(lambda: window.acts[Control.APPROVE].isEnabled())
    window.acts[Control.APPROVE].trigger()
    dialog = _dialog(qtbot, window)
    assert dialog.approval.run_id == run_id and "write_file" in dialog.windowTitle()
    assert client.store.pending_commands(run_id) == []  # nothing decided by the action
    assert _states(client) == {run_id: ApprovalState.PENDING}

    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    drain(client.store, make_executor())
    assert client.store.list_approvals(None)[0].state == ApprovalState.APPROVED


def test_toolbar_reject_shows_the_call_under_the_reason_prompt(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    (run_id,) = _waiting(qtbot, window, client, make_executor, tmp_path)
    select(qtbot, window, run_id)
    qtbot.waitUntil(lambda: window.acts[Control.REJECT].isEnabled())
    window.acts[Control.REJECT].trigger()
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    prompt = dialog.reject_prompt
    assert prompt is not None and prompt.isVisible()
    QTest.keyClicks(prompt.text, "not now")
    QTest.mouseClick(prompt.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    (approval,) = client.store.list_approvals(None)
    assert client.store.pending_commands(run_id) != []
    drain(client.store, make_executor())
    (approval,) = client.store.list_approvals(None)
    assert approval.state == ApprovalState.REJECTED and approval.decision_note == "not now"


def test_inbox_buttons_are_off_without_a_selection(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path)
    window.acts["inbox"].trigger()
    window.inbox.table.clearSelection()
    inbox = window.inbox
    assert not inbox.approve.isEnabled() and not inbox.reject.isEnabled()
    assert not inbox.review.isEnabled()
    _inbox_rows(qtbot, window, 0)
    assert inbox.approve.isEnabled() and inbox.reject.isEnabled()
    # One selected call opens for review; nothing is decided by the button itself.
    QTest.mouseClick(inbox.approve, Qt.MouseButton.LeftButton)
    _dialog(qtbot, window)
    assert set(_states(client).values()) == {ApprovalState.PENDING}


def test_several_selected_are_approved_after_one_confirmation_and_only_they(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    ids = _waiting(qtbot, window, client, make_executor, tmp_path, n=3)
    chosen = {window.approvals_model.approval_at(r).run_id for r in (0, 2)}
    _inbox_rows(qtbot, window, 0, 2)
    QTest.mouseClick(window.inbox.approve, Qt.MouseButton.LeftButton)
    box = window.commands.dialog
    assert isinstance(box, MessageDialog) and box.isVisible() and box.confirm_button is not None
    assert box.text.text().startswith(
        "Approve 2 calls: write_file report.md, write_file report.md?"
    )
    assert set(_states(client).values()) == {ApprovalState.PENDING}  # asked, not decided

    QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.commands.last_batch is not None)
    outcome = window.commands.last_batch
    assert outcome is not None and outcome.message() == "Approved 2 of 2 calls"
    drain(client.store, make_executor())
    states = {a.run_id: a.state for a in client.store.list_approvals(None)}
    assert states == {
        i: ApprovalState.APPROVED if i in chosen else ApprovalState.PENDING for i in ids
    }


def test_a_call_decided_meanwhile_elsewhere_is_reported_not_counted(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path, n=2)
    _inbox_rows(qtbot, window, 0, 1)
    QTest.mouseClick(window.inbox.approve, Qt.MouseButton.LeftButton)
    box = window.commands.dialog
    assert isinstance(box, MessageDialog) and box.confirm_button is not None
    first = window.approvals_model.approval_at(0)
    elsewhere = Client(client.db_path)  # another terminal decides while the question is up
    try:
        elsewhere.reject(first.id, "not this week")
    finally:
        elsewhere.close()

    QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Approved 1 of 2 calls" in (window.last_error or ""))
    assert "already rejected" in (window.last_error or "")
    outcome = window.commands.last_batch
    assert outcome is not None and [a.id for a, _ in outcome.failed] == [first.id]


def test_return_on_the_inbox_opens_the_selected_call(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path, n=2)
    _inbox_rows(qtbot, window, 1)
    wanted = window.approvals_model.approval_at(1)
    window.inbox.table.setFocus()
    QTest.keyClick(window.inbox.table, Qt.Key.Key_Return)
    dialog = _dialog(qtbot, window)
    assert dialog.approval.id == wanted.id
    assert set(_states(client).values()) == {ApprovalState.PENDING}


def test_ctrl_return_after_an_edit_approves_the_edited_arguments(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    (run_id,) = _waiting(qtbot, window, client, make_executor, tmp_path)
    _inbox_rows(qtbot, window, 0)
    QTest.mouseClick(window.inbox.review, Qt.MouseButton.LeftButton)
    dialog = _dialog(qtbot, window)
    path = dialog.form.widget_for("path")
    content = dialog.form.widget_for("content")
    assert isinstance(path, QLineEdit) and isinstance(content, QPlainTextEdit)

    path.setText("../outside.md")  # invalid: Ctrl+Return says so and decides nothing
    content.setFocus()
    QTest.keyClick(content, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: "outside the workspace" in dialog.error.text())
    assert window.approval_dialog is dialog
    assert client.store.pending_commands(run_id) == []

    path.setText("report.md")
    content.setPlainText("EDITED WITH THE KEYBOARD\n")
    QTest.keyClick(content, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    drain(client.store, make_executor())
    (approval,) = client.store.list_approvals(None)
    assert approval.state == ApprovalState.EDITED
    assert isinstance(approval.decided_arguments, dict)
    assert approval.decided_arguments["content"] == "EDITED WITH THE KEYBOARD\n"
    assert (tmp_path / "ws0" / "report.md").read_text() == "EDITED WITH THE KEYBOARD\n"


def test_an_overwrite_shows_the_diff_against_the_file_on_disk(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path)
    on_disk = tmp_path / "ws0" / "report.md"
    on_disk.write_text("# Report\nA LINE ONLY ON DISK\n")  # the analyst changed the draft
    window.open_approval(window.approvals_model.approval_at(0))
    dialog = _dialog(qtbot, window)
    view = dialog.file_diff
    assert view is not None and dialog.tabs is not None
    assert dialog.tabs.currentWidget() is view
    qtbot.waitUntil(lambda: "A LINE ONLY ON DISK" in view.toPlainText())
    text = view.toPlainText()
    assert "report.md" in text and "overwrites" in text
    assert "-A LINE ONLY ON DISK" in text and "+## Conclusions" in text
    assert "new file" not in text


def test_a_write_to_a_missing_file_says_new_file(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path)
    (tmp_path / "ws0" / "report.md").unlink()
    window.open_approval(window.approvals_model.approval_at(0))
    dialog = _dialog(qtbot, window)
    view = dialog.file_diff
    assert view is not None
    qtbot.waitUntil(lambda: "new file" in view.toPlainText())
    assert "+## Conclusions" in view.toPlainText()


def _steer_prompt(window: MainWindow, client: Client, tmp_path: Path) -> TextPrompt:
    run = client.start_run("A run to steer", model="demo", workspace=tmp_path)
    window.commands.steer(run)
    prompt = window.commands.dialog
    assert isinstance(prompt, TextPrompt) and prompt.isVisible()
    return prompt


def test_escape_with_typed_text_asks_and_keep_editing_keeps_it(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    prompt = _steer_prompt(window, client, tmp_path)
    QTest.keyClicks(prompt.text, "focus on 2025")
    QTest.keyClick(prompt.text, Qt.Key.Key_Escape)
    question = prompt.discard_question
    assert question is not None and question.isVisible()
    assert question.windowTitle() == "Discard what you typed?"
    assert prompt.isVisible()
    QTest.mouseClick(question.keep_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: prompt.discard_question is None)
    assert prompt.isVisible() and prompt.text.toPlainText() == "focus on 2025"

    QTest.mouseClick(
        prompt.buttons.button(prompt.buttons.StandardButton.Cancel), Qt.MouseButton.LeftButton
    )
    question = prompt.discard_question
    assert question is not None and question.isVisible()
    QTest.mouseClick(question.discard_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not prompt.isVisible())
    assert client.store.pending_commands(client.runs()[0].id) == []  # nothing was sent


def test_escape_with_nothing_typed_closes_at_once(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    prompt = _steer_prompt(window, client, tmp_path)
    QTest.keyClicks(prompt.text, "   ")  # blanks only: nothing to lose
    QTest.keyClick(prompt.text, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not prompt.isVisible())
    assert prompt.discard_question is None


def test_escape_keeps_an_edit_in_the_approval_dialog_and_a_typed_goal(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    _waiting(qtbot, window, client, make_executor, tmp_path)
    dialog = window.open_approval(window.approvals_model.approval_at(0))
    content = dialog.form.widget_for("content")
    assert isinstance(content, QPlainTextEdit)
    content.setPlainText("A CAREFUL EDIT\n")
    QTest.keyClick(content, Qt.Key.Key_Escape)
    question = dialog.discard_question
    assert question is not None and question.isVisible()
    QTest.mouseClick(question.keep_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.discard_question is None)
    assert window.approval_dialog is dialog and content.toPlainText() == "A CAREFUL EDIT\n"
    QTest.mouseClick(dialog.reset_button, Qt.MouseButton.LeftButton)  # nothing typed now
    QTest.keyClick(content, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.approval_dialog is None)

    new_run = window.open_new_run()
    QTest.keyClicks(new_run.goal, "Compare the vendors")
    QTest.keyClick(new_run.goal, Qt.Key.Key_Escape)
    question = new_run.discard_question
    assert question is not None and question.isVisible()
    QTest.mouseClick(question.discard_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not new_run.isVisible())
