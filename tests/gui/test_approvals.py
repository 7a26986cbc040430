"""Approvals through the real dialog: approve, edit (only the edited call runs), reject."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPlainTextEdit
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus, StepKind
from desktop_agent.gui.controls import Control
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.notify import NoticeKind
from tests.gui.conftest import StartWorker, select, wait_status


def _waiting_run(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, ws: Path
) -> str:
    run = client.start_run("Summarise the sources", model="demo", workspace=ws)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.approvals_model.rowCount() == 1)
    return run.id


def _open_from_inbox(qtbot: QtBot, window: MainWindow) -> ApprovalDialog:
    window.acts["inbox"].trigger()
    assert window.side.currentWidget() is window.inbox
    table = window.inbox.table
    rect = table.visualRect(window.approvals_model.index(0, 0))
    QTest.mouseClick(
        table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, rect.center()
    )
    QTest.mouseDClick(
        table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, rect.center()
    )
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def test_inbox_badge_and_approve_through_the_dialog(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run_id = _waiting_run(qtbot, window, client, start_worker, demo_ws)
    assert window.side.tabText(window.side.indexOf(window.inbox)) == "Approvals (1)"
    assert "1 approval waiting" in window.windowTitle()
    dialog = _open_from_inbox(qtbot, window)
    # What the analyst needs to decide: tool, rule, stated reason, arguments, check, deadline.
    facts = " ".join(label.text() for label in dialog.findChildren(type(dialog.check)))
    assert "write_file" in facts
    assert "overwrite report.md" in facts
    assert "No deadline" in dialog.deadline.text()
    assert "Revising the report" in dialog.findChildren(type(dialog.diff))[0].toPlainText()
    qtbot.waitUntil(lambda: "pass the tool's checks" in dialog.check.text())
    assert dialog.approve_button.text() == "Approve"
    assert "No changes" in dialog.diff.toPlainText()

    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    wait_status(qtbot, window, run_id, RunStatus.COMPLETED)
    assert window.approvals_model.rowCount() == 0
    assert window.side.tabText(window.side.indexOf(window.inbox)) == "Approvals"
    assert "## Conclusions" in (demo_ws / "report.md").read_text()
    assert client.store.list_approvals(None)[0].state == ApprovalState.APPROVED
    qtbot.waitUntil(
        lambda: (
            window.notifier.last is not None and window.notifier.last.kind == NoticeKind.FINISHED
        )
    )


def test_edited_arguments_run_only_the_edited_call(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run_id = _waiting_run(qtbot, window, client, start_worker, demo_ws)
    select(qtbot, window, run_id)
    qtbot.waitUntil(lambda: window.acts[Control.EDIT].isEnabled())
    window.acts[Control.EDIT].trigger()
    dialog = window.approval_dialog
    assert dialog is not None
    content = dialog.form.widget_for("content")
    assert isinstance(content, QPlainTextEdit)
    assert "Conclusions" in content.toPlainText()
    content.setPlainText("EDITED BY ANALYST\n")
    # The diff shows the edit and the button says what will happen.
    assert dialog.approve_button.text() == "Approve with edits"
    diff = dialog.diff.toPlainText()
    assert "+EDITED BY ANALYST" in diff and "-## Conclusions" in diff
    assert "@@ content @@" in diff and "@@ path @@" not in diff

    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    wait_status(qtbot, window, run_id, RunStatus.COMPLETED)
    assert (demo_ws / "report.md").read_text() == "EDITED BY ANALYST\n"
    writes = [s for s in client.steps(run_id) if s.name == "write_file"]
    assert len(writes) == 2  # the draft, then only the edited revision
    assert writes[1].input["arguments"]["content"] == "EDITED BY ANALYST\n"
    assert client.store.list_approvals(None)[0].state == ApprovalState.EDITED


def test_invalid_edit_is_caught_by_the_tools_check(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    _waiting_run(qtbot, window, client, start_worker, demo_ws)
    dialog = _open_from_inbox(qtbot, window)
    path = dialog.form.widget_for("path")
    path.setText("../outside.md")  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: "✘" in dialog.check.text(), timeout=5000)
    assert "outside" in dialog.check.text() or "workspace" in dialog.check.text()
    QTest.mouseClick(dialog.close_button, Qt.MouseButton.LeftButton)
    assert client.store.list_approvals()[0].state == ApprovalState.PENDING


def test_reject_asks_for_a_reason_that_reaches_the_agent(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run_id = _waiting_run(qtbot, window, client, start_worker, demo_ws)
    dialog = _open_from_inbox(qtbot, window)
    QTest.mouseClick(dialog.reject_button, Qt.MouseButton.LeftButton)
    prompt = dialog.reject_prompt
    assert prompt is not None and prompt.isVisible()
    assert not prompt.ok.isEnabled()  # a reason is required
    QTest.keyClicks(prompt.text, "keep the draft wording")
    assert prompt.ok.isEnabled()
    QTest.mouseClick(prompt.ok, Qt.MouseButton.LeftButton)

    wait_status(qtbot, window, run_id, RunStatus.COMPLETED)
    (approval,) = client.store.list_approvals(None)
    assert approval.state == ApprovalState.REJECTED
    assert approval.decision_note == "keep the draft wording"
    assert "Conclusions" not in (demo_ws / "report.md").read_text()  # the draft stays
    decided = next(s for s in client.steps(run_id) if s.kind == StepKind.APPROVAL)
    assert decided.output["decisions"][0]["state"] == "rejected"
    assert decided.output["decisions"][0]["note"] == "keep the draft wording"
