"""The run list's "Archived" and "Imported" filters: runs read from the archive files.

Real SQLite file, real archive files, the real window: an archived run, an imported one
and a live one. Selecting an archived run shows its header read-only (no control
enabled) and says how to read its steps; Unarchive brings it back into the list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.gui.actions import RUN_CONTROLS
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.runs import RunRole
from desktop_agent.gui.widgets.runlist import FILTERS
from tests.cli.test_archived_listing import _finished, _imported_bundle
from tests.export.conftest import cli
from tests.gui.conftest import OpenWindow
from tests.helpers.fakes import FakeClock
from tests.scheduler.test_retention import DAY


def _listed(window: MainWindow) -> set[str]:
    proxy = window.run_list.proxy
    return {str(proxy.index(r, 0).data(RunRole.RUN_ID)) for r in range(proxy.rowCount())}


def _choose(window: MainWindow, label: str) -> None:
    window.run_list.filter.setCurrentIndex([f[0] for f in FILTERS].index(label))


def _select(qtbot: QtBot, window: MainWindow, run_id: str) -> None:
    proxy = window.run_list.proxy
    rows = [r for r in range(proxy.rowCount()) if proxy.index(r, 0).data(RunRole.RUN_ID) == run_id]
    window.run_list.table.selectRow(rows[0])
    qtbot.waitUntil(lambda: window.detail.row is not None and window.detail.row.run.id == run_id)


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # offscreen: no stacking
def test_archived_and_imported_runs_are_listed_shown_read_only_and_brought_back(
    qtbot: QtBot, client: Client, open_window: OpenWindow, tmp_path: Path
) -> None:
    clock = FakeClock()
    archived = _finished(client, "Quokka census", "The census counted 41 quokkas.", clock)
    clock.advance(40 * DAY)
    assert Scheduling(client, clock.now).archive(30 * DAY).run_ids == [archived]
    live = _finished(client, "Numbat sightings", "Three numbats were seen.", clock)
    bundle, imported = _imported_bundle(tmp_path)
    assert cli(client.db_path, "import", str(bundle)).returncode == 0

    window = open_window()
    qtbot.waitUntil(lambda: _listed(window) == {live})  # the live list: no archived run

    _choose(window, "Archived")
    qtbot.waitUntil(lambda: _listed(window) == {archived, imported})
    assert window.run_list.count.text() == "2 archived runs"
    _choose(window, "Imported")
    qtbot.waitUntil(lambda: _listed(window) == {imported})

    _select(qtbot, window, imported)
    detail = window.detail
    assert detail.archived_bar.isVisibleTo(window) and detail.unarchive_button.isHidden()
    assert "Imported run, read-only" in detail.archived_label.text()
    assert not any(window.acts[c].isEnabled() for c in RUN_CONTROLS)
    (command,) = re.findall(r"`desktop-agent ([^`]+)`", detail.archived_label.text())
    shown = cli(client.db_path, *command.split())  # the command it names works
    assert shown.returncode == 0 and "Wombats dig 12 burrows a season." in shown.stdout

    _choose(window, "Archived")
    qtbot.waitUntil(lambda: _listed(window) == {archived, imported})
    _select(qtbot, window, archived)
    assert not detail.unarchive_button.isHidden()
    assert f"desktop-agent show {archived} --full" in detail.archived_label.text()
    assert not any(window.acts[c].isEnabled() for c in RUN_CONTROLS)
    detail.unarchive_button.click()
    qtbot.waitUntil(lambda: window.runs_model.get(archived) is not None, timeout=20_000)
    assert client.run(archived).goal == "Quokka census"
    qtbot.waitUntil(lambda: _listed(window) == {archived, live})  # back among the live runs
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == archived)
    assert detail.archived_bar.isHidden()
