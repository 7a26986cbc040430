"""Search all runs in the app (Ctrl+K): results, opening one at its step, archived runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import OpenWindow
from tests.helpers.fakes import Reply, ScriptedModel

OFFSCREEN_NO_RAISE = pytest.mark.qt_log_ignore("This plugin does not support raise")
"""Bringing a window forward is a no-op the offscreen platform reports."""


def _two_runs(client: Client, make_executor: MakeExecutor, ws: Path) -> tuple[str, str]:
    (ws / "quokka.md").write_text("Field notes: the quokka population doubled on the island.\n")
    reader = client.start_run("Survey the island wildlife notes", model="demo", workspace=ws)
    read = [Reply("Reading.", [("read_file", {"path": "quokka.md"})]), Reply("Read.")]
    drain(client.store, make_executor(ScriptedModel(read)))
    other = client.start_run("Count the otters", model="demo", workspace=ws)
    drain(client.store, make_executor(ScriptedModel([Reply("Counted.")])))
    return reader.id, other.id


@OFFSCREEN_NO_RAISE
def test_a_phrase_in_a_tool_result_opens_its_run_at_that_step(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
) -> None:
    reader, _other = _two_runs(client, make_executor, workspace)
    window = open_window()
    assert window.acts["search_all"].shortcut().toString() == "Ctrl+K"
    window.acts["search_all"].trigger()
    search = window.search_window
    assert search is not None and search.isVisible()
    search.query.setText('"population doubled"')
    search.search()
    qtbot.waitUntil(lambda: search.status.text() != "Searching…")
    assert search.status.text() == "1 match in 1 run(s)"
    (hit,) = search.hits
    assert (hit.run_id, hit.seq, hit.kind) == (reader, 2, "tool_call")
    assert "<b>population doubled</b>" in search.snippet.text()
    search.open_hit(hit)
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == reader)
    qtbot.waitUntil(lambda: window.detail.timeline.currentIndex().isValid())
    row = window.detail.timeline.currentIndex().row()
    assert window.steps_model.entry(row).seq == 2
    search.query.setText("zeppelin")
    search.search()
    qtbot.waitUntil(lambda: search.status.text().startswith("No matches"))
    search.close()


@OFFSCREEN_NO_RAISE
def test_a_result_of_an_archived_run_brings_it_back_and_opens_it(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
) -> None:
    reader, _other = _two_runs(client, make_executor, workspace)
    clock_now = client.run(reader).finished_at or 0.0
    assert Scheduling(client, lambda: clock_now + 40 * 86400).archive(30 * 86400).run_ids
    window = open_window()
    search = window.open_search()
    search.query.setText("quokka")
    search.search()
    qtbot.waitUntil(lambda: any(h.run_id == reader for h in search.hits))
    hit = next(h for h in search.hits if h.run_id == reader and h.seq == 2)
    assert hit.archived
    search.open_hit(hit)
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == reader)
    assert client.run(reader).goal == "Survey the island wildlife notes"  # back in the db
    qtbot.waitUntil(lambda: window.detail.timeline.currentIndex().isValid())
    search.close()


@OFFSCREEN_NO_RAISE
def test_results_are_grouped_by_run_and_the_opened_step_marks_the_words(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
) -> None:
    reader, other = _two_runs(client, make_executor, workspace)
    window = open_window()
    search = window.open_search()
    search.query.setText("quokka")
    search.search()
    qtbot.waitUntil(lambda: bool(search.hits))
    model = search.model
    by_run = {h.run_id for h in search.hits}
    assert model.rowCount() == len(by_run)  # one row per run...
    run_row = model.index(0, 0)
    assert model.rowCount(run_row) == sum(h.run_id == search.hits[0].run_id for h in search.hits)
    matches = model.index(0, 2).data()
    assert matches.endswith("match" if model.rowCount(run_row) == 1 else "matches")
    assert search.table.isExpanded(run_row)  # ...its matches inside
    hit = next(h for h in search.hits if h.run_id == reader and h.seq == 2)
    search.open_hit(hit)
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == reader)
    qtbot.waitUntil(lambda: window.detail.timeline.currentIndex().isValid())
    details = window.detail.inspector.details
    qtbot.waitUntil(lambda: bool(details.extraSelections()))
    marked = [s.cursor.selectedText().lower() for s in details.extraSelections()]
    assert marked and set(marked) == {"quokka"}
    assert other not in by_run or model.rowCount() == 2
    search.close()
