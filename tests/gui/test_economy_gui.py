"""Economy mode in the window: New run's and Start batch's checkbox, a run in a batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.economy import BatchWait, batch_wait_words
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import RunStatus, StepKind, WaitReason
from desktop_agent.engine.ports import BatchEntry, RunPatch, StepIntent, batch_custom_id
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.forecast import ForecastLine, ForecastQuestion, estimate_with
from desktop_agent.persistence.batches import BatchBook, SqlBatchQueue
from tests.gui.conftest import OpenWindow, select
from tests.gui.test_forecast_gui import choose
from tests.helpers.polling import qt_wait_until


def test_new_run_starts_an_economy_run_and_offers_none_for_the_demo(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    window = open_window()
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    choose(dialog, "demo")
    assert not dialog.economy.isEnabled() and not dialog.economy.isChecked()
    assert "runs on this machine" in dialog.economy.toolTip()

    choose(dialog, "claude-sonnet-5-5")
    assert dialog.economy.isEnabled() and "half price" in dialog.economy.toolTip()
    dialog.economy.setChecked(True)
    assert dialog.forecast_line.economy  # the forecast leads with economy mode now
    dialog.goal.setPlainText("Summarise the quarterly notes")
    request = dialog.request()
    assert request.economy and request.model == "claude-sonnet-5-5"
    dialog.start.click()
    qt_wait_until(qtbot, lambda: len(client.runs()) == 1, what="the run started")
    (run,) = client.runs()
    assert run.spec.economy

    # Run again keeps the mode; choosing the demo then drops it.
    again = window.run_again(run)
    assert again.economy.isChecked()
    choose(again, "demo")
    assert not again.economy.isChecked() and not again.request().economy
    again.reject()


def test_the_header_says_where_a_runs_turn_is_in_the_batch_queue(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    run = client.start_run("Summarise", model="claude-sonnet-5-5", economy=True)
    now = client.run(run.id).created_at
    custom_id = batch_custom_id(run.id, 1, 1)
    SqlBatchQueue(client.store.db).enqueue(
        BatchEntry(custom_id, run.id, 1, 1, "queued", now), "claude-sonnet-5-5", {"x": 1}
    )
    intent = StepIntent(1, StepKind.MODEL_CALL, "claude-sonnet-5-5", {"mode": "economy"})
    client.store.commit(
        run.id,
        intents=[intent],
        patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.BATCH, status_message="q"),
    )
    window = open_window()
    status = window.detail.header.status
    select(qtbot, window, run.id)
    qt_wait_until(
        qtbot,
        lambda: "queued for the next batch" in status.text(),
        what="the queued turn in the header",
        last=status.text,
    )
    # The open call streams nothing: no streaming panel, and its row says where it is.
    qt_wait_until(qtbot, lambda: window.steps_model.rowCount() == 1, what="the open call")
    assert not window.detail.stream.isVisible()
    summary = window.steps_model.index(0, 0).data(Qt.ItemDataRole.DisplayRole)
    assert "in a batch (economy mode)" in str(summary), summary
    book = BatchBook(client.store.db)
    claim = book.claim(now, 10, 10_000_000)
    assert claim is not None
    book.submitted(claim, "msgbatch_1", now, now, now + 30)
    # Sent by a worker, the run's row unchanged: the header looks again by itself.
    qt_wait_until(
        qtbot,
        lambda: "In economy mode: in a batch, submitted" in status.text(),
        what="the submitted turn in the header",
        last=status.text,
    )


def test_batch_wait_words_say_how_long_ago() -> None:
    submitted = BatchWait("submitted", 1000.0, 1100.0, "msgbatch_1", 3)
    assert batch_wait_words(submitted, 1100.0 + 12 * 60 + 5) == "in a batch, submitted 12 min ago"
    assert batch_wait_words(submitted, 1130.0) == "in a batch, submitted just now"
    assert batch_wait_words(submitted, 1100.0 + 3 * 3600 + 300) == (
        "in a batch, submitted 3 h 5 min ago"
    )
    queued = BatchWait("queued", 1000.0, None, None, 3)
    assert batch_wait_words(queued, 1000.0 + 2 * 86400) == "queued for the next batch (2 d ago)"
    assert "result is in (succeeded)" in batch_wait_words(
        BatchWait("succeeded", 1000.0, 1100.0, "msgbatch_1", 3), 2000.0
    )


def test_a_batch_is_in_economy_mode_by_default_with_every_item_at_once(
    qtbot: QtBot, window: MainWindow, client: Client, tmp_path: Path
) -> None:
    companies = tmp_path / "companies.txt"
    companies.write_text("Acme Corp\nBolt Ltd\nCirrus SA\n")
    views = window.scheduling
    window.side.setCurrentWidget(views.batches)
    dialog = views.open_start_batch()
    choose(dialog, "claude-sonnet-5-5")
    assert dialog.economy.isChecked()
    QTest.keyClicks(dialog.goal, "Profile {item}")
    QTest.mouseClick(dialog.from_lines, Qt.MouseButton.LeftButton)
    dialog.lines.setText(str(companies))
    qtbot.waitUntil(lambda: dialog.check.text() == "✔ 3 lines: 3 runs")
    assert dialog.concurrency.value() == 3  # every item at once: their turns share batches
    line = dialog.forecast_line
    qt_wait_until(
        qtbot, lambda: "3 items" in line.text(), what="the batch's forecast", last=line.text
    )
    # For every item, economy mode (chosen) leading, streamed beside it.
    assert line.text().startswith("Forecast: 3 items: ≈ $") and "· streamed ≈ $" in line.text()
    dialog.economy.setChecked(False)
    assert dialog.concurrency.value() == 4
    dialog.economy.setChecked(True)
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: views.item_model.rowCount() == 3)
    [batch] = Scheduling(client).batches()
    assert batch.template.spec.economy and batch.concurrency == 3

    again = views.open_start_batch()
    choose(again, "demo")  # runs here: no batches to wait in
    assert not again.economy.isChecked() and again.concurrency.value() == 4
    again.reject()


def test_a_forecast_read_that_ends_after_its_dialog_was_deleted_is_dropped(
    qtbot: QtBot, client: Client
) -> None:
    pending: list[Callable[[], None]] = []

    def later(
        fn: Callable[[], Any], done: Callable[[Any], None], _failed: Callable[[Exception], None]
    ) -> None:
        pending.append(lambda: done(fn()))

    line = ForecastLine()
    line.set_source(later, estimate_with(client))
    line.ask(ForecastQuestion("claude-sonnet-5-5"))
    assert len(pending) == 1 and line.busy
    shiboken6.delete(line)  # a Start batch dialog closed (and deleted) while it read
    pending[0]()  # the read ends: nothing is shown anywhere, and nothing raises
    assert not shiboken6.isValid(line)
