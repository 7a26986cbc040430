"""The app's approval dialog and inbox decide only what will take effect, and say so otherwise.

A real main window offscreen over the test database; the demo run is driven to its approval
(an overwrite of report.md) by an in-thread worker before the window decides, and again
after, to see what the decision did.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.mainwindow import MainWindow
from tests.conftest import MakeExecutor, drain


def _waiting(
    qtbot: QtBot, window: MainWindow, client: Client, make_executor: MakeExecutor, ws: Path
) -> str:
    run = client.start_run("Summarise the sources", model="demo", workspace=ws)
    drain(client.store, make_executor())
    assert client.run(run.id).status == RunStatus.WAITING
    qtbot.waitUntil(lambda: window.approvals_model.rowCount() == 1)
    return run.id


def _open(qtbot: QtBot, window: MainWindow) -> ApprovalDialog:
    window.acts["inbox"].trigger()
    window.inbox.table.selectRow(0)
    QTest.mouseClick(window.inbox.review, Qt.MouseButton.LeftButton)
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: "pass the tool's checks" in dialog.check.text())
    return dialog


def _path(dialog: ApprovalDialog) -> QLineEdit:
    path = dialog.form.widget_for("path")
    assert isinstance(path, QLineEdit)
    return path


def test_approve_is_off_with_the_reason_while_the_edit_would_be_refused(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    make_executor: MakeExecutor,
    demo_ws: Path,
) -> None:
    run_id = _waiting(qtbot, window, client, make_executor, demo_ws)
    dialog = _open(qtbot, window)
    assert dialog.approve_button.isEnabled()

    _path(dialog).setText("../outside.md")
    qtbot.waitUntil(lambda: not dialog.approve_button.isEnabled())
    reason = dialog.refusal()
    assert reason is not None and "outside the workspace" in reason
    assert "outside the workspace" in dialog.approve_button.toolTip()
    assert "would be refused" in dialog.error.text() and "✘" in dialog.check.text()

    _path(dialog).setText("final.md")  # a fix turns it back on once the check agrees
    qtbot.waitUntil(lambda: "pass the tool's checks" in dialog.check.text())
    assert dialog.approve_button.isEnabled() and dialog.refusal() is None
    assert dialog.error.text() == ""
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    drain(client.store, make_executor())
    assert client.run(run_id).status == RunStatus.COMPLETED
    assert "## Conclusions" in (demo_ws / "final.md").read_text()
    assert client.store.list_approvals(None)[0].state == ApprovalState.EDITED


def test_an_edit_approved_before_its_check_answered_is_refused_and_the_dialog_stays(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    make_executor: MakeExecutor,
    demo_ws: Path,
) -> None:
    _waiting(qtbot, window, client, make_executor, demo_ws)
    dialog = _open(qtbot, window)
    _path(dialog).setText("../outside.md")
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)  # before the check
    qtbot.waitUntil(lambda: "refused, nothing was approved" in dialog.error.text())
    assert window.approval_dialog is dialog and dialog.isVisible()
    assert "outside the workspace" in dialog.error.text()
    (approval,) = client.approvals()
    assert approval.state == ApprovalState.PENDING
    assert client.store.pending_commands(approval.run_id) == []
    assert window.approvals_model.rowCount() == 1  # shown again: it is still to decide


def test_the_inbox_says_when_an_approval_was_already_decided_elsewhere(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    make_executor: MakeExecutor,
    demo_ws: Path,
) -> None:
    run_id = _waiting(qtbot, window, client, make_executor, demo_ws)
    (approval,) = client.approvals()
    elsewhere = Client(client.db_path)  # another terminal: its decision waits for the worker
    try:
        elsewhere.reject(approval.id, "not this week")
    finally:
        elsewhere.close()

    window.acts["inbox"].trigger()
    window.inbox.table.selectRow(0)
    QTest.mouseClick(window.inbox.approve, Qt.MouseButton.LeftButton)  # opens the call
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "was already rejected" in dialog.error.text())
    assert len(client.store.pending_commands(run_id)) == 1  # only the other decision
    drain(client.store, make_executor())
    assert client.store.list_approvals(None)[0].state == ApprovalState.REJECTED
    assert "Conclusions" not in (demo_ws / "report.md").read_text()


def test_a_json_field_that_cannot_be_read_keeps_approve_off(qtbot: QtBot) -> None:
    """A field edited as JSON: nesting past the reader, or a lone surrogate, is a form error."""
    from desktop_agent.gui.widgets.schema_form import SchemaForm

    schema = {"type": "object", "properties": {"body": {"type": "object"}}}
    form = SchemaForm(schema, {"body": {"a": 1}})
    qtbot.addWidget(form)
    editor = form.widget_for("body")
    assert isinstance(editor, QPlainTextEdit)
    for text, said in (
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        ('"\\ud800"', "Unicode"),
    ):
        editor.setPlainText(text)
        try:
            form.values()
        except ValueError as exc:
            assert said in str(exc)
        else:
            raise AssertionError(f"{said}: the form accepted it")
