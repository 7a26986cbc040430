"""Batches through the real window, run by a worker with its scheduler in a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.domain.errors import PermanentError
from desktop_agent.domain.scheduling import ItemStatus
from desktop_agent.engine.ports import ModelPort, ModelRequest
from desktop_agent.gui.dialogs.templates import BatchDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.scheduling import BatchColumn, ItemColumn
from desktop_agent.scheduler.service import SchedulerConfig
from desktop_agent.worker.scheduling import attach_scheduler
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.gui.test_schedules import click, double_click
from tests.helpers.fakes import Reply, ScriptedModel

StartScheduler = Callable[..., Worker]


@pytest.fixture
def start_scheduler(client: Client, make_executor: MakeExecutor) -> Iterator[StartScheduler]:
    """Start a worker with its scheduler (which starts batch items) in threads.

    The demo model does not stop for approvals here (``ask_overwrite`` is off).
    """
    started: list[tuple[Worker, threading.Thread, object]] = []

    def start(model: ModelPort | None = None) -> Worker:
        client.settings.ask_overwrite = False
        worker = Worker(client.store, make_executor(model), WorkerConfig(max_runs=4, poll_s=0.05))
        config = SchedulerConfig(sync_s=0.1, housekeeping_s=0.2, stuck_after_s=None)
        service = attach_scheduler(worker, client.settings, config=config)
        service.start()
        thread = threading.Thread(target=worker.run, name="gui-test-worker", daemon=True)
        thread.start()
        started.append((worker, thread, service))
        return worker

    yield start
    for worker, thread, service in started:
        worker.stop()
        thread.join(timeout=20)
        service.stop()  # type: ignore[attr-defined]
        assert not thread.is_alive()


def test_start_a_batch_over_a_folder_and_watch_it_reach_five_of_five(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for name in ("acme", "bolt", "cirrus", "delta", "echo"):
        (reports / f"{name}.md").write_text(f"# {name}\n{name} grew 4% in 2025.\n")
    (reports / "readme.txt").write_text("not a report")
    start_scheduler()
    views = window.scheduling
    view = views.batches
    window.side.setCurrentWidget(view)
    click(view.bar, view.start_action)
    dialog = views.template_dialog
    assert isinstance(dialog, BatchDialog) and dialog.isVisible()
    QTest.keyClicks(dialog.goal, "Summarise {item} and list its key figures")
    assert dialog.check.text() == "✘ choose a folder" and not dialog.start.isEnabled()
    dialog.folder.setText(str(reports))
    qtbot.waitUntil(lambda: dialog.check.text() == "✔ 6 files: 6 runs")
    dialog.pattern.setText("*.pdf")
    qtbot.waitUntil(lambda: dialog.check.text().startswith("✘ no file in"))
    assert not dialog.start.isEnabled()
    dialog.pattern.setText("*.md")
    qtbot.waitUntil(lambda: dialog.check.text() == "✔ 5 files: 5 runs")
    dialog.concurrency.setValue(2)
    assert dialog.start.isEnabled()
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: views.batch_model.rowCount() == 1)
    [batch] = Scheduling(client).batches()
    assert (batch.total, batch.concurrency, batch.from_folder) == (5, 2, True)
    qtbot.waitUntil(lambda: view.current() is not None)  # the new batch is selected
    qtbot.waitUntil(lambda: views.item_model.rowCount() == 5)
    assert [views.item_model.index(i, ItemColumn.ITEM).data() for i in range(5)] == [
        "acme.md",
        "bolt.md",
        "cirrus.md",
        "delta.md",
        "echo.md",
    ]
    progress = views.batch_model.index(0, BatchColumn.PROGRESS)
    seen: set[str] = set()

    def finished() -> bool:
        seen.add(str(progress.data()))
        return bool(progress.data() == "5 / 5")

    qtbot.waitUntil(finished, timeout=30_000)
    assert seen <= {f"{n} / 5" for n in range(6)}
    assert progress.data(Qt.ItemDataRole.UserRole + 3) == (5, 0, 0, 5)
    assert not view.table.grab().isNull()  # the progress bar paints
    qtbot.waitUntil(
        lambda: all(
            views.item_model.index(i, ItemColumn.STATUS).data() == "Completed" for i in range(5)
        )
    )
    assert view.item_title.full_text().startswith("5 / 5 done")
    assert views.batch_model.index(0, BatchColumn.FAILED).data() == "—"
    assert not view.retry_action.isEnabled()
    runs = {r.id: r for r in client.runs() if r.parent_id == batch.id}
    assert len(runs) == 5
    assert {r.goal for r in runs.values()} == {
        f"Summarise {n}.md and list its key figures"
        for n in ("acme", "bolt", "cirrus", "delta", "echo")
    }

    # Double-clicking an item opens its run in the Runs tab.
    item = views.item_model.row_at(2).item
    assert item.run_id in runs
    double_click(view.item_table, views.item_model.index(2, ItemColumn.ITEM))
    assert window.side.currentWidget() is window.run_list
    assert window.selected is not None and window.selected.run.id == item.run_id


def test_batch_dialog_takes_the_lines_of_a_file(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    companies = tmp_path / "companies.txt"
    companies.write_text("Acme Corp\n\nBolt Ltd\n  \nCirrus SA\n")
    views = window.scheduling
    window.side.setCurrentWidget(views.batches)
    dialog = views.open_start_batch()
    QTest.keyClicks(dialog.goal, "Profile {item}: products, size, last funding round")
    QTest.mouseClick(dialog.from_lines, Qt.MouseButton.LeftButton)
    assert dialog.lines.isVisible() and not dialog.folder.isVisible()
    assert not dialog.pattern.isVisible()
    assert dialog.check.text() == "✘ choose a file of lines"
    dialog.lines.setText(str(tmp_path / "missing.txt"))
    qtbot.waitUntil(lambda: dialog.check.text().startswith("✘ cannot read"))
    dialog.lines.setText(str(companies))
    qtbot.waitUntil(lambda: dialog.check.text() == "✔ 3 lines: 3 runs")
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: views.item_model.rowCount() == 3)
    [batch] = Scheduling(client).batches()
    assert batch.source == f"lines of {companies}" and not batch.from_folder
    assert [views.item_model.index(i, ItemColumn.ITEM).data() for i in range(3)] == [
        "Acme Corp",
        "Bolt Ltd",
        "Cirrus SA",
    ]
    assert views.batch_model.index(0, BatchColumn.PROGRESS).data() == "0 / 3"  # no worker


def test_retry_failed_items_reruns_only_them(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    broken = {"cirrus.md"}

    def script(request: ModelRequest) -> Reply:
        text = str(request.messages)
        if any(name in text for name in broken):
            return Reply(raises=PermanentError("this document cannot be read"))
        return Reply("Done: summarised.")

    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("acme", "bolt", "cirrus"):
        (folder / f"{name}.md").write_text(name)
    start_scheduler(ScriptedModel(script))
    sched = Scheduling(client)
    batch = sched.start_batch(
        "Summarise {name}", folder=folder, concurrency=3, options=RunOptions(model="demo")
    )
    views = window.scheduling
    view = views.batches
    window.side.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.select(batch.id))
    progress = views.batch_model.index(0, BatchColumn.PROGRESS)
    qtbot.waitUntil(lambda: views.batch_model.row_at(0).progress.finished, timeout=20_000)
    assert progress.data() == "2 / 3"
    assert views.batch_model.index(0, BatchColumn.FAILED).data() == "1"
    qtbot.waitUntil(lambda: views.item_model.index(2, ItemColumn.STATUS).data() == "Failed")
    assert "cannot be read" in str(views.item_model.index(2, ItemColumn.ERROR).data())
    first_runs = {i: views.item_model.row_at(i).item.run_id for i in range(3)}
    assert view.retry_action.isEnabled()
    assert view.retry_action.text() == "Retry 1 failed item"

    broken.clear()
    said: list[str] = []  # every message: a notice may replace it before a poll sees it
    window.statusBar().messageChanged.connect(said.append)
    click(view.bar, view.retry_action)
    qtbot.waitUntil(lambda: "Retrying 1 item: 3" in said)
    qtbot.waitUntil(lambda: progress.data() == "3 / 3", timeout=20_000)
    qtbot.waitUntil(lambda: views.item_model.index(2, ItemColumn.STATUS).data() == "Completed")
    items = sched.batch_items(batch.id)
    assert [i.status for i in items] == [ItemStatus.COMPLETED] * 3
    assert [i.attempts for i in items] == [1, 1, 2]
    assert items[0].run_id == first_runs[0] and items[1].run_id == first_runs[1]
    assert items[2].run_id != first_runs[2]
    assert views.item_model.index(2, ItemColumn.ATTEMPTS).data() == "2"
    assert views.item_model.index(2, ItemColumn.ERROR).data() == ""
    assert len([r for r in client.runs() if r.parent_id == batch.id]) == 4
    assert not view.retry_action.isEnabled()
