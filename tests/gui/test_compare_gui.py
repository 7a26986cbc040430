"""Comparing two runs in the app: two selected runs, the compare window, a row's diff."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.compare import RowKind
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.views.compare import CompareWindow
from tests.compare.conftest import Pair, make_pair
from tests.conftest import MakeExecutor
from tests.gui.conftest import OpenWindow


def opened_with_two_runs(
    qtbot: QtBot, open_window: OpenWindow, client: Client, make_executor: MakeExecutor, tmp: Path
) -> tuple[MainWindow, Pair]:
    pair = make_pair(client, make_executor, tmp)
    window = open_window()
    qtbot.waitUntil(lambda: all(window.runs_model.get(r) for r in (pair.a, pair.b)))
    return window, pair


def test_two_selected_runs_open_a_window_of_aligned_steps_totals_and_diffs(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    tmp_path: Path,
) -> None:
    window, pair = opened_with_two_runs(qtbot, open_window, client, make_executor, tmp_path)
    compare = window.acts["compare"]
    assert compare in window.run_list.table.actions()  # the run list's context menu
    assert window.select_run(pair.a)
    assert not compare.isEnabled()  # one run selected
    window.run_list.select_runs([pair.b, pair.a])
    assert window.run_list.selected_run_ids() and compare.isEnabled()

    compare.trigger()
    view = window.compare_windows[-1]
    assert isinstance(view, CompareWindow) and view.isVisible()
    qtbot.waitUntil(lambda: view.model.rowCount() == 7)
    assert view.comparison is not None and view.comparison.run_a.id == pair.a  # older is A
    kinds = [r.kind for r in view.model.rows]
    assert kinds.count(RowKind.ONLY_B) == 2 and kinds.count(RowKind.CHANGED) == 2
    assert view.total("B", "Steps") == "7" and view.total("B − A", "Steps") == "+2"
    assert view.counts_label.text() == "3 same, 2 changed, 0 only in A, 2 only in B"

    # The changed append_note row: its arguments side by side.
    note = next(
        i for i, r in enumerate(view.model.rows) if r.a is not None and r.a.name == "append_note"
    )
    assert view.model.index(note, 5).data() == "arguments, result"  # the note said differs
    view.table.setCurrentIndex(view.proxy.mapFromSource(view.model.index(note, 1)))
    qtbot.waitUntil(lambda: "alpha" in view.diff.toPlainText())
    text = view.diff.toPlainText()
    assert "Arguments" in text and "beta" in text and "text" in text

    # Only the differences: the same rows go, the others stay.
    view.only_differences.setChecked(True)
    assert view.proxy.rowCount() == 4
    view.close()
    qtbot.waitUntil(lambda: not view.isVisible())


def test_compare_is_off_unless_exactly_two_runs_are_selected(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    tmp_path: Path,
) -> None:
    window, pair = opened_with_two_runs(qtbot, open_window, client, make_executor, tmp_path)
    compare = window.acts["compare"]
    assert not compare.isEnabled()  # nothing selected
    window.run_list.select_runs([pair.a, pair.b])
    assert compare.isEnabled()
    window.run_list.select_runs([pair.b])
    assert not compare.isEnabled()
    assert window.selected is not None and window.selected.run.id == pair.b


def test_a_fork_and_its_parent_show_the_shared_steps_apart(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    tmp_path: Path,
) -> None:
    from tests.compare.test_fork_totals import _fork_pair

    parent, fork, at = _fork_pair(client, make_executor, tmp_path)
    window = open_window()
    qtbot.waitUntil(lambda: all(window.runs_model.get(r) for r in (parent, fork)))
    view = window.open_compare(parent, fork)
    qtbot.waitUntil(lambda: view.comparison is not None)
    assert view.total("Shared", "Steps") == str(at)
    assert view.total("A (own)", "Steps") == str(client.run(parent).last_seq - at)
    assert view.total("B − A (own)", "Cost") != ""
    assert view.total("A", "Cost") == ""  # no whole-run row to misread
    view.close()
