"""Tags and step notes in the app, on real widgets over a real SQLite file.

The run list's Tags…, tag:NAME in its search box and the header; the timeline's Note on
this step…, its ✎ mark and the inspector. Every write goes through the task runner and
comes back through the poll.
"""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.gui.models.runs import RunColumn, RunRole
from desktop_agent.gui.models.steps import StepRole
from tests.gui.conftest import OpenWindow
from tests.gui.test_forks_gui import _parent


def test_tags_show_filter_and_change_through_the_prompt(
    qtbot: QtBot, open_window: OpenWindow, client: Client
) -> None:
    tagged = client.start_run("Read the Q3 notes", model="demo", tags=["Q3"]).id
    plain = client.start_run("Something else", model="demo").id
    window = open_window()
    model, panel = window.runs_model, window.run_list
    qtbot.waitUntil(lambda: model.get(tagged) is not None and model.get(plain) is not None)
    goal = model.index(model.row_of(tagged), RunColumn.GOAL)
    assert goal.data(RunRole.TAGS) == "#q3"
    assert "Tags: q3" in str(goal.data(0x03))  # the tooltip

    panel.search.setText("tag:q3")
    assert panel.proxy.rowCount() == 1
    assert panel.proxy.index(0, 0).data(RunRole.RUN_ID) == tagged
    panel.search.setText("tag:q3 nothing-like-it")
    assert panel.proxy.rowCount() == 0
    panel.search.clear()

    assert window.tagging.action in panel.table.actions()
    assert window.select_run(tagged)
    window.tagging.action.trigger()
    prompt = window.tagging.prompt
    assert prompt is not None and prompt.text.toPlainText() == "q3"
    prompt.text.setPlainText("q3, Client:ACME")
    prompt.ok.click()
    qtbot.waitUntil(lambda: model.get(tagged).run.tags == ("client:acme", "q3"))  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: "#client:acme" in window.detail.header.details.text())
    assert client.run(tagged).tags == ("client:acme", "q3")

    window.tagging.action.trigger()
    bad = window.tagging.prompt
    assert bad is not None and bad.text.toPlainText() == "client:acme q3"
    bad.text.setPlainText("fine, not ok!")
    bad.ok.click()
    qtbot.waitUntil(lambda: "is not a tag" in window.last_error)
    assert client.run(tagged).tags == ("client:acme", "q3")


def test_a_note_on_a_step_marks_its_row_and_shows_in_the_inspector(
    qtbot: QtBot, open_window: OpenWindow, client: Client
) -> None:
    run_id = _parent(client)
    before = client.steps(run_id)
    window = open_window()
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    timeline = window.detail.timeline
    assert window.noting.action in timeline.actions()
    qtbot.waitUntil(lambda: timeline.model().rowCount() == 3)
    index = timeline.model().index(1, 0)
    timeline.selectionModel().select(
        index,
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    assert not str(index.data(StepRole.SUMMARY)).startswith("✎")
    window.noting.action.trigger()
    prompt = window.noting.prompt
    assert prompt is not None and prompt.windowTitle() == "Note on step 2"
    prompt.text.setPlainText("This file is last year's")
    prompt.ok.click()

    def marked(row: int) -> bool:
        return str(timeline.model().index(row, 0).data(StepRole.SUMMARY)).startswith("✎")

    qtbot.waitUntil(lambda: marked(1))
    assert [n.text for n in timeline.model().index(1, 0).data(StepRole.NOTES)] == [
        "This file is last year's"
    ]
    assert not marked(0)
    inspector = window.detail.inspector
    qtbot.waitUntil(lambda: "This file is last year's" in inspector.details.toPlainText())
    assert "never sent to the agent" in inspector.details.toPlainText()
    assert client.steps(run_id) == before  # the journal, all the agent is sent, is unchanged
