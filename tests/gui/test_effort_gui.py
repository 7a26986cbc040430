"""Effort, thinking and the prompt cache in the window: New run, the header, the inspector."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QComboBox
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.stepkinds import cache_miss_words
from desktop_agent.client.views import (
    THINKING_ON_BUDGET,
    cache_share,
    model_choices,
    timeline_entries,
)
from desktop_agent.domain import JSON, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import StepIntent, StepOutcome
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.gui.dialogs.templates import ScheduleDialog, run_options
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.inspector import StepInspector
from tests.gui.conftest import select

ALL_LEVELS = ["low", "medium", "high", "xhigh", "max"]


def items(combo: QComboBox) -> list[tuple[str, str]]:
    return [(combo.itemText(i), str(combo.itemData(i))) for i in range(combo.count())]


def choose(dialog: NewRunDialog, model: str) -> None:
    index = dialog.model.findData(model)
    assert index >= 0, f"{model} is not offered"
    dialog.model.setCurrentIndex(index)


def opened(qtbot: QtBot, window: MainWindow) -> NewRunDialog:
    """New run, once the catalogue was read from the database (off the GUI thread)."""
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    qtbot.waitUntil(lambda: window.model_list is not None and not window.tasks.busy)
    return dialog


def test_the_new_run_dialog_offers_each_models_efforts_at_its_default_first(
    qtbot: QtBot, window: MainWindow
) -> None:
    dialog = opened(qtbot, window)
    choose(dialog, "claude-sonnet-5-5")
    assert items(dialog.effort) == [("Model default (high)", "")] + [(e, e) for e in ALL_LEVELS]
    assert dialog.effort.currentData() == "" and dialog.effort.isEnabled()
    assert "$2 / $10 per million tokens" in dialog.model.currentText()
    assert "$2 / $10 per million tokens" in dialog.model_note.text()

    dialog.effort.setCurrentIndex(dialog.effort.findData("xhigh"))
    choose(dialog, "claude-opus-4-5")  # takes low, medium, high; no documented default
    assert items(dialog.effort) == [("Model default", ""), *((e, e) for e in ALL_LEVELS[:3])]
    assert dialog.effort.currentData() == ""  # xhigh is not one of its levels

    dialog.effort.setCurrentIndex(dialog.effort.findData("medium"))
    choose(dialog, "claude-opus-5-5")
    assert dialog.effort.itemText(0) == "Model default (medium)"
    assert dialog.effort.currentData() == "medium"  # a level it takes stays chosen

    choose(dialog, "claude-haiku-4-5")  # no effort setting at all
    assert items(dialog.effort) == [("Model default", "")] and not dialog.effort.isEnabled()
    assert "no effort setting" in dialog.model_note.text()
    dialog.reject()


def test_retired_models_are_not_offered_and_deprecated_ones_say_so(
    qtbot: QtBot, window: MainWindow
) -> None:
    dialog = opened(qtbot, window)
    offered = [str(dialog.model.itemData(i)) for i in range(dialog.model.count())]
    assert "claude-opus-4-1" not in offered and "claude-sonnet-4-0" not in offered
    assert offered[0] == "claude-fable-5-2" and offered[-1] == "demo"
    index = dialog.model.findData("claude-sonnet-4-5")
    assert dialog.model.itemText(index) == (
        "Claude Sonnet 4.5 (deprecated)  · $3 / $15 per million tokens"
    )
    tip = dialog.model.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert "retires 2026-11-30; use claude-sonnet-5-5 instead" in str(tip)
    assert dialog.model_notice.isHidden()
    choose(dialog, "claude-sonnet-4-5")
    assert dialog.model_notice.isVisible()
    assert dialog.model_notice.text() == (
        "⚠ claude-sonnet-4-5 is deprecated, retires 2026-11-30; use claude-sonnet-5-5 instead"
    )
    choose(dialog, "claude-sonnet-5-5")
    assert dialog.model_notice.isHidden()
    dialog.reject()


def test_starting_from_the_dialog_records_the_effort_and_thinking(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    dialog = opened(qtbot, window)
    QTest.keyClicks(dialog.goal, "Summarise the sources")
    choose(dialog, "claude-sonnet-5-5")
    dialog.effort.setCurrentIndex(dialog.effort.findData("low"))
    assert not dialog.thinking.isChecked()  # off unless asked for
    dialog.thinking.setChecked(True)
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.selected is not None)
    assert window.selected is not None
    run = client.run(window.selected.run.id)
    assert (run.model, run.spec.effort, run.spec.thinking_budget) == (
        "claude-sonnet-5-5",
        "low",
        THINKING_ON_BUDGET,
    )
    # Run again fills the form as the run was started.
    again = window.run_again(run)
    qtbot.waitUntil(lambda: not window.tasks.busy)
    assert again.effort.currentData() == "low" and again.thinking.isChecked()
    again.reject()


def test_a_deprecated_model_starts_with_its_notice_in_the_status_bar(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    dialog = opened(qtbot, window)
    dialog.goal.setPlainText("Summarise the sources")
    choose(dialog, "claude-sonnet-4-5")
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "deprecated" in window.statusBar().currentMessage())
    (run,) = client.runs()
    assert window.statusBar().currentMessage() == (
        f"Started run {run.id} · Note: claude-sonnet-4-5 is deprecated, retires 2026-11-30; "
        "use claude-sonnet-5-5 instead"
    )
    assert run.spec.effort == "" and run.spec.thinking_budget == 0


def test_a_template_takes_the_effort_and_thinking(qtbot: QtBot, client: Client) -> None:
    dialog = ScheduleDialog(model_choices(), [], client.settings, ())
    qtbot.addWidget(dialog)
    dialog.goal.setPlainText("Check the prices")
    choose(dialog, "claude-opus-5-5")
    dialog.effort.setCurrentIndex(dialog.effort.findData("max"))
    dialog.thinking.setChecked(True)
    options = run_options(dialog.make_request(dialog.request()).run)
    assert (options.model, options.effort, options.thinking_budget) == (
        "claude-opus-5-5",
        "max",
        THINKING_ON_BUDGET,
    )


# ---------------------------------------------------------------- the header


def _model_call(client: Client, run_id: str, seq: int, output: JSON, usage: Usage) -> None:
    store = client.store
    store.commit(run_id, intents=[StepIntent(seq, StepKind.MODEL_CALL, "m", {"model": "m"})])
    store.commit(
        run_id, outcome=StepOutcome(seq, StepStatus.COMPLETED, output, usage=usage, cost_usd=0.01)
    )


def test_the_header_shows_the_effort_thinking_and_cache_share(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    run = client.start_run("Compare the notes", model="claude-sonnet-5-5", thinking_budget=16000)
    _model_call(client, run.id, 1, {"content": []}, Usage(1500, 800, 4600, 41000))
    window.poller.refresh()
    qtbot.waitUntil(
        lambda: (row := window.runs_model.get(run.id)) is not None and row.run.usage.total > 0
    )
    select(qtbot, window, run.id)
    header = window.detail.header
    chip = header.model.text()
    assert "Claude Sonnet 5.5" in chip and "effort high (model default) · thinking on" in chip
    tokens = header.gauges["Tokens"]
    assert tokens.note == "cache 87%"  # 41,000 of 47,100 prompt tokens read from the cache
    assert "share of the prompt read from the prompt cache" in tokens.toolTip()

    other = client.start_run("Quick look", model="demo", effort="low")
    select(qtbot, window, other.id)
    assert "effort low · thinking off" in header.model.text()
    assert tokens.note == ""  # no prompt yet: no share to show


def test_cache_share_is_reads_over_every_prompt_token() -> None:
    assert cache_share(Usage()) is None
    assert cache_share(Usage(output_tokens=50)) is None
    assert cache_share(Usage(100, 10, 0, 0)) == 0.0
    assert cache_share(Usage(10, 99, 30, 60)) == pytest.approx(0.6)


# ---------------------------------------------------------------- the inspector

CACHE_API: JSON = {
    "message_id": "msg_1",
    "cache_write_5m": 1200,
    "cache_write_1h": 3400,
    "cache_miss": {"type": "messages_changed", "cache_missed_input_tokens": 5400},
}


def test_the_inspector_says_why_the_cache_was_missed_and_shows_the_thinking(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    run = client.start_run("Compare the notes", model="claude-sonnet-5-5")
    output: JSON = {
        "content": [{"type": "text", "text": "Reading the notes."}],
        "thinking": "The second note contradicts the first; read both.",
        "api": CACHE_API,
    }
    _model_call(client, run.id, 1, output, Usage(1500, 800, 4600, 41000))
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 1)
    window.detail.timeline.setCurrentIndex(window.steps_model.index(0))
    shown = window.detail.inspector.details.toPlainText()
    assert "Thinking and progress notes" in shown
    assert "The second note contradicts the first; read both." in shown
    assert "Written to the cache: 1,200 tokens for 5 minutes, 3,400 tokens for 1 hour" in shown
    assert (
        "Cache missed: the messages changed before the newest turn "
        "(~5,400 tokens not read from the cache)"
    ) in shown


@pytest.mark.parametrize(
    ("miss", "words"),
    [
        ({"type": "model_changed", "cache_missed_input_tokens": 20}, "the model (or its speed)"),
        ({"type": "system_changed", "cache_missed_input_tokens": 7}, "the system prompt differs"),
        ({"type": "tools_changed", "cache_missed_input_tokens": 9}, "the tools differ"),
        ({"type": "previous_message_not_found"}, "kept no record of the previous call"),
        ({"type": "unavailable"}, "could not say why"),
        ({"type": "something_new"}, "something new"),
    ],
)
def test_each_cache_miss_reason_reads_as_one_plain_sentence(miss: JSON, words: str) -> None:
    said = cache_miss_words(miss)
    assert said.startswith("cache missed: ") and words in said and "\n" not in said
    tokens = miss.get("cache_missed_input_tokens") if isinstance(miss, dict) else None
    assert (f"(~{tokens} tokens not read from the cache)" in said) == bool(tokens)


def test_a_server_compaction_shows_the_summary_the_api_wrote(qtbot: QtBot, client: Client) -> None:
    run = client.start_run("Long work", model="claude-sonnet-5-5")
    output: JSON = {
        "mode": "server",
        "compaction_block": {"type": "compaction", "content": "Read a.md and b.md; b wins."},
        "summary": "Read a.md and b.md; b wins.",
        "keep_messages": 2,
    }
    intent = StepIntent(1, StepKind.COMPACTION, "claude-sonnet-5-5", {"summarized_messages": 9},
                        status=StepStatus.COMPLETED, output=output)  # fmt: skip
    client.store.commit(run.id, intents=[intent])
    inspector = StepInspector()
    qtbot.addWidget(inspector)
    (entry,) = timeline_entries(client, run.id)
    inspector.show_entry(entry)
    shown = inspector.details.toPlainText()
    assert "Summary (written by the API; it replaces the older turns)" in shown
    assert "Read a.md and b.md; b wins." in shown
