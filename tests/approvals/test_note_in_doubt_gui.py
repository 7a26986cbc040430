"""The app says what becomes of a note sent to a run whose step is in doubt.

A real main window (offscreen) over a real database; the run needs attention about its
step 2, as after a crash in the middle of an unsafe effect. The note dialog and the status
bar say that the note waits for the decision; the note is queued, not delivered.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import EffectClass, RunStatus, StepKind
from desktop_agent.engine.ports import RunPatch, StepIntent
from desktop_agent.gui.dialogs.prompts import TextPrompt
from desktop_agent.gui.mainwindow import MainWindow

WAITS = "it waits while step 2 is in doubt and is delivered once you decide about it"


@pytest.fixture
def window(qtbot: QtBot, client: Client) -> Iterator[MainWindow]:
    window = MainWindow(client, spawn_workers=False, poll_ms=50)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    yield window
    window.shutdown()


def test_the_note_dialog_and_the_status_bar_say_the_note_waits_for_the_decision(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    run_id = client.start_run("Send the order", model="demo").id
    post = {"tool_use_id": "t1", "arguments": {"url": "http://example.test/orders"}}
    client.store.commit(
        run_id,
        intents=[StepIntent(2, StepKind.TOOL_CALL, "http_post", post, EffectClass.UNSAFE)],
        patch=RunPatch(
            status=RunStatus.NEEDS_ATTENTION,
            attention_seq=2,
            status_message="Step 2 (http_post) was in flight when the worker stopped",
        ),
    )
    qtbot.waitUntil(
        lambda: (
            (r := window.runs_model.get(run_id)) is not None
            and r.run.status == RunStatus.NEEDS_ATTENTION
        )
    )
    run = client.run(run_id)

    window.commands.steer(run)
    prompt = window.commands.dialog
    assert isinstance(prompt, TextPrompt)
    (label,) = prompt.findChildren(QLabel)
    assert label.text().endswith(f": {WAITS}."), label.text()
    QTest.keyClicks(prompt.text, "mind the dates")
    with qtbot.waitSignal(window.commands.done) as sent:
        QTest.mouseClick(prompt.ok, Qt.MouseButton.LeftButton)
    assert sent.args == [f"Note queued; {WAITS}"]
    (note,) = client.store.pending_commands(run_id)
    assert (note.kind, note.payload) == ("steer", {"text": "mind the dates"})
