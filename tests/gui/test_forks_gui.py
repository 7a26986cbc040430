"""Fork from a step and Run again in the app, on a journal built through the store."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QItemSelectionModel, Qt
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.engine.ports import StepIntent
from desktop_agent.gui.models.runs import RunColumn
from tests.gui.conftest import OpenWindow, StartWorker, wait_status


def _parent(client: Client) -> str:
    """A finished run: the model reads a file (steps 1-2), then answers (step 3)."""
    run = client.start_run("Read the notes", model="demo", tools=["read_file"])
    use = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.md"}}
    answer = {"type": "text", "text": "ok"}
    call = {"tool_use_id": "t1", "arguments": {"path": "a.md"}}
    model = {"model": "demo"}
    journal = [
        (StepKind.MODEL_CALL, "demo", model, {"content": [use], "stop_reason": "tool_use"}),
        (StepKind.TOOL_CALL, "read_file", call, {"content": "A"}),
        (StepKind.MODEL_CALL, "demo", model, {"content": [answer], "stop_reason": "end_turn"}),
    ]
    for seq, (kind, name, input_, output) in enumerate(journal, start=1):
        intent = StepIntent(
            seq=seq, kind=kind, name=name, input=input_, status=StepStatus.COMPLETED, output=output
        )
        client.store.commit(run.id, intents=[intent])
    return run.id


def test_fork_from_the_timeline_menu_then_links_both_ways_and_run_again(
    qtbot: QtBot, open_window: OpenWindow, client: Client
) -> None:
    parent = _parent(client)
    window = open_window()
    qtbot.waitUntil(lambda: window.runs_model.get(parent) is not None)
    assert window.select_run(parent)
    timeline = window.detail.timeline
    assert window.acts["fork_step"] in timeline.actions()
    assert timeline.contextMenuPolicy() == Qt.ContextMenuPolicy.ActionsContextMenu
    qtbot.waitUntil(lambda: timeline.model().rowCount() == 3)
    index = timeline.model().index(1, 0)  # step 2: the tool call's answer
    timeline.selectionModel().select(
        index,
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    window.acts["fork_step"].trigger()
    qtbot.waitUntil(lambda: window.fork_dialog is not None)  # read off the GUI thread
    dialog = window.fork_dialog
    assert dialog is not None and (dialog.run_id, dialog.at_seq) == (parent, 2)
    assert not dialog.with_args.isEnabled()  # step 3 is a model call
    dialog.note.setPlainText("Read b.md too")
    dialog.fork_button.click()
    qtbot.waitUntil(lambda: len(client.forks_of(parent)) == 1)
    (child,) = client.forks_of(parent)
    assert child.forked_at_seq == 2
    steer = client.store.get_step(child.id, 3)
    assert steer.kind == StepKind.STEER and steer.input["text"] == "Read b.md too"

    # J7: the new fork opens at once, and the list marks it and its parent.
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == child.id)
    model = window.runs_model

    def goal_of(run_id: str) -> str:
        return str(model.index(model.row_of(run_id), RunColumn.GOAL).data())

    qtbot.waitUntil(lambda: goal_of(parent).endswith("· 1 fork"))
    assert goal_of(child.id).startswith("⑂ ")
    header = window.detail.header
    qtbot.waitUntil(
        lambda: "Forked from <a" in header.lineage.text() and header.lineage.isVisible()
    )
    assert f">{parent}</a> at step 2" in header.lineage.text()
    header.lineage.linkActivated.emit(parent)  # a click on the link
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == parent)
    qtbot.waitUntil(lambda: f">{child.id}</a> (step 2)" in header.lineage.text())

    window.acts["run_again"].trigger()
    again = window.new_run_dialog
    assert again is not None and again.windowTitle() == "Run again"
    assert again.goal.toPlainText() == "Read the notes" and again.again_of == parent
    window._on_new_run_dialog_start_requested(again.request())
    qtbot.waitUntil(lambda: len(client.forks_of(parent)) == 2)
    assert client.forks_of(parent)[1].forked_at_seq == 0
    again.close_discarding()


def test_a_refused_fork_is_shown_in_the_dialog(
    qtbot: QtBot, open_window: OpenWindow, client: Client
) -> None:
    parent = _parent(client)
    window = open_window()
    qtbot.waitUntil(lambda: window.runs_model.get(parent) is not None)
    window.fork_from_step(parent, 1)
    qtbot.waitUntil(lambda: window.fork_dialog is not None)
    dialog = window.fork_dialog
    assert dialog is not None
    assert dialog.with_args.isEnabled() and '"a.md"' in dialog.args.toPlainText()
    # A note at step 1 would leave the read unanswered: only the edit is offered.
    assert not dialog.with_note.isEnabled() and dialog.with_args.isChecked()
    assert "fork from 2" in dialog.with_note.text()
    assert client.forks_of(parent) == []
    dialog.args.setPlainText("not json")
    dialog.fork_button.click()  # refused in the dialog, what was typed kept
    qtbot.waitUntil(lambda: dialog.error.isVisible())
    assert "not valid JSON" in dialog.error.text()
    dialog.args.setPlainText('{"path": "b.md"}')
    dialog.fork_button.click()
    qtbot.waitUntil(lambda: len(client.forks_of(parent)) == 1)
    approval = client.store.get_step(client.forks_of(parent)[0].id, 2)
    assert approval.output["decisions"][0]["arguments"] == {"path": "b.md"}


def test_a_step_inside_a_model_turn_offers_the_nearest_step_that_can_be_forked(
    qtbot: QtBot, open_window: OpenWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    # The demo asks before overwriting its report: its last model call (step k-1) wants
    # write_file and step k is the approval, still open. After step k-1 neither a note
    # (the call would be left unanswered) nor an edit (step k is no tool call) can follow.
    run = client.start_run("Write the report", model="demo", workspace=str(demo_ws))
    window = open_window()
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    k = client.run(run.id).last_seq
    assert client.store.get_step(run.id, k).kind == StepKind.APPROVAL
    assert client.store.get_step(run.id, k - 1).kind == StepKind.MODEL_CALL
    window.fork_from_step(run.id, k - 1)
    qtbot.waitUntil(lambda: window.fork_dialog is not None)
    dialog = window.fork_dialog
    assert dialog is not None
    assert dialog.at_seq == k - 2, (dialog.at_seq, k)
    assert dialog.windowTitle() == f"Fork from step {k - 2}"
    assert dialog.moved.startswith(f"Fork from step {k - 2}, before this model turn")
    dialog.note.setPlainText("Keep the draft; write a summary beside it")
    dialog.fork_button.click()
    qtbot.waitUntil(lambda: len(client.forks_of(run.id)) == 1)
    child = client.forks_of(run.id)[0]
    assert child.forked_at_seq == k - 2
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == child.id)
