"""The scheduling views' item models pass Qt's model tester and merge updates in place."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop_agent.client.scheduling_views import (
    BatchRow,
    ItemRow,
    ScheduleRow,
    WatchRow,
    cron_words,
    interval_words,
)
from desktop_agent.domain import AgentSpec, RunStatus
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    BatchProgress,
    FolderWatch,
    ItemStatus,
    OverlapPolicy,
    RunTemplate,
    Schedule,
)
from desktop_agent.gui.models.scheduling import (
    BatchColumn,
    BatchItemModel,
    BatchListModel,
    ItemColumn,
    Role,
    ScheduleColumn,
    ScheduleListModel,
    WatchColumn,
    WatchListModel,
    next_text,
)

ModelTesterFixture = Any
"""pytest-qt's ``qtmodeltester`` (its module has no type hints)."""

pytestmark = pytest.mark.usefixtures("qapp")

TEMPLATE = RunTemplate(goal="Check pricing pages", spec=AgentSpec(model="demo", system_prompt=""))


def schedule(i: int, **kw: Any) -> ScheduleRow:
    s = Schedule(id=f"sch-{i}", name=f"Schedule {i}", template=TEMPLATE, every_s=3600.0, **kw)
    return ScheduleRow(s, time.time() + 3000)


def test_schedule_list_model_merges_in_place(qtmodeltester: ModelTesterFixture) -> None:
    model = ScheduleListModel()
    model.set_rows([schedule(1), schedule(2), schedule(3)])
    qtmodeltester.check(model)
    assert model.columnCount() == len(ScheduleColumn) and model.rowCount() == 3
    assert model.index(0, ScheduleColumn.WHEN).data() == "Every hour"
    assert model.index(0, ScheduleColumn.NEXT).data().startswith("in 50m")
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    # Removed, moved, changed and inserted rows: no reset (views keep their selection).
    paused = replace(schedule(1).schedule, paused=True)
    fired = replace(
        schedule(3).schedule,
        cron="0 9 * * 1-5",
        every_s=None,
        overlap=OverlapPolicy.QUEUE,
        last_run_id="r1",
        last_fire_at=time.time() - 60,
    )
    model.set_rows(
        [ScheduleRow(fired, None, RunStatus.FAILED), ScheduleRow(paused, None), schedule(4)]
    )
    qtmodeltester.check(model)
    assert not resets
    assert [model.row_at(i).schedule.id for i in range(3)] == ["sch-3", "sch-1", "sch-4"]
    assert model.index(0, ScheduleColumn.WHEN).data() == "On weekdays at 09:00"
    assert model.index(0, ScheduleColumn.OVERLAP).data() == "Queue"
    assert model.index(0, ScheduleColumn.LAST).data().startswith("Failed · ")
    assert model.index(0, ScheduleColumn.NEXT).data() == "never"
    assert model.index(1, ScheduleColumn.STATE).data() == "Paused"
    assert model.index(1, ScheduleColumn.NEXT).data() == "paused"
    assert model.index(1, ScheduleColumn.STATE).data(Qt.ItemDataRole.DecorationRole) is not None
    assert model.index(2, 0).data(Role.KEY) == "sch-4"
    assert model.row_of("sch-2") == -1
    model.refresh_times()
    model.set_rows([])
    assert model.rowCount() == 0
    qtmodeltester.check(model)


def test_merging_random_lists_keeps_the_model_consistent(
    qtmodeltester: ModelTesterFixture,
) -> None:
    rng = random.Random(5)
    model = ScheduleListModel()
    qtmodeltester.check(model)
    for _ in range(60):
        keys = rng.sample(range(12), rng.randint(0, 8))
        rows = [schedule(k, paused=rng.random() < 0.3) for k in keys]
        model.set_rows(rows)
        assert [r.schedule.id for r in model.rows()] == [f"sch-{k}" for k in keys]
        assert list(model.rows()) == rows
    qtmodeltester.check(model)


def batch(i: int, done: int, failed: int = 0, running: int = 0, total: int = 10) -> BatchRow:
    b = Batch(
        id=f"bat-{i}",
        template=replace(TEMPLATE, goal="Summarise {item}\n\nFile: {name}"),
        source="files of /data/reports",
        concurrency=4,
        total=total,
        created_at=time.time() - 100,
        from_folder=True,
    )
    pending = total - done - failed - running
    return BatchRow(b, BatchProgress(total, done, failed, 0, running, pending))


def test_batch_models(qtmodeltester: ModelTesterFixture) -> None:
    batches = BatchListModel()
    batches.set_rows([batch(1, 3, 1, 2)])
    qtmodeltester.check(batches)
    assert batches.index(0, BatchColumn.GOAL).data() == "Summarise {item}"
    assert batches.index(0, BatchColumn.PROGRESS).data() == "3 / 10"
    assert batches.index(0, BatchColumn.PROGRESS).data(Role.FRACTION) == (3, 1, 2, 10)
    assert batches.index(0, BatchColumn.FAILED).data() == "1"
    assert batches.index(0, BatchColumn.RUNNING).data() == "2"
    batches.set_rows([batch(2, 0), batch(1, 10)])  # a newer batch goes on top
    qtmodeltester.check(batches)
    assert batches.row_of("bat-2") == 0
    assert batches.index(1, BatchColumn.RUNNING).data() == "done"
    assert batches.index(1, BatchColumn.FAILED).data() == "—"

    items = BatchItemModel()
    qtmodeltester.check(items)

    def item(idx: int, status: ItemStatus, run: str | None, error: str = "") -> ItemRow:
        return ItemRow(BatchItem("bat-1", idx, f"/data/reports/r{idx}.md", status, run, 1), error)

    items.show_batch(
        "bat-1", True, [item(0, ItemStatus.COMPLETED, "ra"), item(1, ItemStatus.PENDING, None)]
    )
    assert items.index(0, ItemColumn.ITEM).data() == "r0.md"
    assert items.index(0, ItemColumn.INDEX).data() == "1"
    assert items.index(1, ItemColumn.RUN).data() == "—"
    items.show_batch(
        "bat-1",
        True,
        [
            item(0, ItemStatus.COMPLETED, "ra"),
            item(1, ItemStatus.FAILED, "rb", "Model call failed"),
        ],
    )
    assert items.index(1, ItemColumn.STATUS).data() == "Failed"
    assert items.index(1, ItemColumn.ERROR).data() == "Model call failed"
    assert "double-click" in items.index(1, ItemColumn.RUN).data(Qt.ItemDataRole.ToolTipRole)
    qtmodeltester.check(items)
    items.show_batch("bat-2", False, [ItemRow(BatchItem("bat-2", 0, "ACME Corp"))])
    assert items.rowCount() == 1 and items.index(0, ItemColumn.ITEM).data() == "ACME Corp"
    qtmodeltester.check(items)


def test_watch_list_model(qtmodeltester: ModelTesterFixture) -> None:
    w = FolderWatch(id="wat-1", folder="/data/inbox", pattern="*.pdf", template=TEMPLATE)
    model = WatchListModel()
    model.set_rows([WatchRow(w, 4, 2, time.time() - 120)])
    qtmodeltester.check(model)
    assert model.index(0, WatchColumn.SCAN).data() == "every 10 seconds"
    assert model.index(0, WatchColumn.STATE).data() == "Watching"
    assert model.index(0, WatchColumn.SEEN).data() == "4"
    assert model.index(0, WatchColumn.LAST).data() == "2m ago"
    model.set_rows([WatchRow(replace(w, paused=True), 4, 2, None)])
    assert model.index(0, WatchColumn.STATE).data() == "Paused"
    qtmodeltester.check(model)


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 9 * * 1-5", "On weekdays at 09:00"),
        ("30 8 * * *", "Every day at 08:30"),
        ("0 9,17 * * mon-fri", "On weekdays at 09:00 and 17:00"),
        ("*/15 * * * *", "Every 15 minutes"),
        ("0 * * * *", "Every hour"),
        ("15 * * * 1", "Every hour at :15, on Mondays"),
        ("0 6 1 * *", "On the 1st of every month at 06:00"),
        ("0 9 * * 6,0", "On weekends at 09:00"),
        ("0 9 * * 1,3,5", "On Mon, Wed and Fri at 09:00"),
        ("0 9 1-7 * 1", None),
        ("5 4 * 2 *", None),
    ],
)
def test_cron_in_words(expr: str, words: str | None) -> None:
    assert cron_words(expr) == words


def test_intervals_and_next_times_in_words() -> None:
    assert [interval_words(s) for s in (30, 60, 900, 3600, 21600, 86400, 172800, 5430)] == [
        "every 30 seconds",
        "every minute",
        "every 15 minutes",
        "every hour",
        "every 6 hours",
        "every day",
        "every 2 days",
        "every 1h30m",
    ]
    now = time.mktime((2026, 3, 2, 10, 0, 0, 0, 0, -1))  # a Monday, 10:00 local time
    assert next_text(now + 750, now) == "in 12m (10:12)"
    assert next_text(now + 5 * 3600, now) == "today 15:00"
    assert next_text(now + 23 * 3600, now) == "tomorrow 09:00"
    assert next_text(now + 71 * 3600, now) == "Thu 09:00"
    assert next_text(now - 5, now) == "due now"
    assert next_text(None, now) == "never"
    assert next_text(now + 60, now, paused=True) == "paused"
