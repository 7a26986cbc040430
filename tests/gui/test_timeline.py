"""The live timeline: streaming output, following the newest step, big runs, charts."""

from __future__ import annotations

import time
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.charts import bars, cumulative, nice_ceiling
from tests.gui.conftest import StartWorker, select, wait_status


def _write_steps(client: Client, run_id: str, n: int) -> None:
    """A journal of ``n`` finished steps written directly (model call, tool call, ...)."""
    store = client.store
    store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()))
    for seq in range(1, n + 1):
        if seq % 2:
            content = [
                {"type": "text", "text": f"Looking at part {seq}."},
                {
                    "type": "tool_use",
                    "id": f"tu{seq}",
                    "name": "read_file",
                    "input": {"path": "a.md"},
                },
            ]
            store.commit(
                run_id,
                intents=[StepIntent(seq, StepKind.MODEL_CALL, "demo", {"model": "demo"})],
            )
            store.commit(
                run_id,
                outcome=StepOutcome(
                    seq,
                    StepStatus.COMPLETED,
                    {"content": content},
                    usage=Usage(900, 40),
                    cost_usd=0.0011,
                ),
            )
        else:
            store.commit(
                run_id,
                intents=[
                    StepIntent(
                        seq,
                        StepKind.TOOL_CALL,
                        "read_file",
                        {"tool_use_id": f"tu{seq - 1}", "arguments": {"path": "a.md"}},
                        status=StepStatus.COMPLETED,
                        output={"content": "alpha " * 20},
                    )
                ],
            )


def test_streaming_output_is_shown_while_the_model_writes(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Watch it think", model="demo", workspace=demo_ws)
    select(qtbot, window, run.id)
    start_worker(delay=1.5)  # slow enough that partial text is saved several times
    detail = window.detail
    qtbot.waitUntil(lambda: "plan" in detail.stream.toPlainText().lower(), timeout=10_000)
    assert detail.stream.isVisible()
    assert "step 1" in detail.stream_label.text()
    open_row = window.steps_model.entry(0)
    assert open_row.status == StepStatus.STARTED and open_row.partial_text
    client.pause(run.id)  # ends the activation at the next boundary: a quick teardown
    wait_status(qtbot, window, run.id, RunStatus.PAUSED)
    assert not detail.stream.isVisible()  # nothing streams any more


def test_follows_the_newest_step_unless_scrolled_away(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    run = client.start_run("Long journal", model="demo", workspace=demo_ws)
    _write_steps(client, run.id, 300)
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 300)
    bar = window.detail.timeline.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    assert window.acts["follow"].isChecked()

    bar.setValue(0)  # the analyst scrolls up to read
    assert not window.acts["follow"].isChecked()
    client.store.commit(
        run.id,
        intents=[
            StepIntent(
                301,
                StepKind.STEER,
                "steer",
                {"text": "look at 2025"},
                status=StepStatus.COMPLETED,
                output={},
            )
        ],
    )
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 301)
    assert bar.value() == 0  # not yanked to the bottom

    window.acts["follow"].trigger()  # back to following
    assert bar.value() == bar.maximum()
    client.store.commit(
        run.id,
        intents=[
            StepIntent(
                302,
                StepKind.STEER,
                "steer",
                {"text": "and 2026"},
                status=StepStatus.COMPLETED,
                output={},
            )
        ],
    )
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 302)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())


def test_a_big_run_opens_fast_and_the_inspector_finds_the_thought(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    run = client.start_run("Very long journal", model="demo", workspace=demo_ws)
    _write_steps(client, run.id, 2000)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    # How fast it opens is measured by bench/gui_bench.py (a 10,000-step run, with a
    # target); here: it opens whole, and the inspector works on it.
    assert window.select_run(run.id)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 2000, timeout=30_000)
    timeline = window.detail.timeline
    timeline.setCurrentIndex(window.steps_model.index(1000))  # seq 1001: a model call
    timeline.setCurrentIndex(window.steps_model.index(1001))  # seq 1002: its tool call
    details = window.detail.inspector.details.toPlainText()
    assert "Looking at part 1001." in details  # the thought of the call that asked
    assert "read_file" in details and f"{run.id}:1002" in details
    window.detail.inspector.setCurrentWidget(window.detail.charts)
    assert len(window.detail.charts.cost.series.times) == 2000
    window.detail.charts.grab()  # paints without error


def test_run_with_a_wait_shows_it(
    qtbot: QtBot, window: MainWindow, client: Client, start_worker: StartWorker, demo_ws: Path
) -> None:
    run = client.start_run("Summarise", model="demo", workspace=demo_ws)
    start_worker()
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == client.run(run.id).last_seq)
    last = window.steps_model.entry(window.steps_model.rowCount() - 1)
    assert last.kind == StepKind.APPROVAL and last.is_open
    assert "waiting for you" in window.steps_model.summary(window.steps_model.rowCount() - 1)
    window.detail.timeline.grab()


def test_chart_helpers() -> None:
    assert nice_ceiling(0.0037) == 0.005
    assert nice_ceiling(7) == 10
    assert nice_ceiling(0) == 1.0
    from tests.gui.test_models import entry

    entries = [entry(i) for i in range(1, 101)]
    series = cumulative(entries)
    assert abs(series.cost[-1] - 0.1) < 1e-9
    assert series.tokens[-1] == 100 * 110
    assert len(bars(entries, 10, now=0)) == 10
    assert len(bars(entries[:5], 10, now=0)) == 5
