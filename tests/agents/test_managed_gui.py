"""The app follows a Managed Agents session: File ▸ Follow…, the inbox, the approval dialog.

A real main window over the test's database, a worker in a thread driving the followed run
against the fake sessions API (the dialog reaches it through ``ANTHROPIC_BASE_URL`` and
``ANTHROPIC_API_KEY``, as the app would). The session stops on a tool confirmation: the
call waits in the inbox, is approved in the approval dialog, and the session goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from desktop_agent.agents.managed import AGENT, ManagedAgents
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.gui.dialogs.managed_sessions import ManagedSessionsDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.managed import ManagedDriver
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents, FakeSession
from tests.helpers.polling import qt_wait_until

FOUND = "Revenue grew twelve percent in the third quarter."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeManagedAgents]:
    with FakeManagedAgents() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def worker(client: Client, fake: FakeManagedAgents) -> Iterator[Worker]:
    api = ManagedAgents(lambda: KEY, base_url=fake.url)
    driver = ManagedDriver(client.store, api, client.settings, poll_s=0.2, idle_poll_s=0.5)
    executor = build_executor(client.store, client.settings, foreign={AGENT: driver})
    running = Worker(client.store, executor, WorkerConfig(max_runs=2, poll_s=0.02))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    yield running
    running.stop()
    thread.join(timeout=20)
    api.close()


@pytest.fixture
def window(qtbot: QtBot, client: Client) -> Iterator[MainWindow]:
    opened = MainWindow(client, spawn_workers=False, poll_ms=50)
    opened.resize(1280, 800)
    qtbot.addWidget(opened)
    opened.show()
    qtbot.waitExposed(opened)
    yield opened
    opened.shutdown()


def report(session: FakeSession) -> None:
    session.model_request(FOUND)
    session.idle()


def test_follow_a_session_from_the_app_and_approve_its_call_in_the_inbox(
    qtbot: QtBot, window: MainWindow, client: Client, fake: FakeManagedAgents, worker: Worker
) -> None:
    session = fake.add_session("Board pack")
    session.user_message("Summarise Q3 for the board")
    session.running()
    ids = session.model_request("Reading the file.", [("bash", {"command": "cat q3.csv"})])
    session.ask(ids, {ids[0]: "north,120"}, then=report)

    file_menu = window.menuBar().actions()[0].menu()
    assert isinstance(file_menu, QMenu) and window.follow_managed in file_menu.actions()
    window.follow_managed.trigger()
    [dialog] = window.findChildren(ManagedSessionsDialog)
    qt_wait_until(qtbot, lambda: dialog.model.rowCount() == 1, what="the sessions listed")
    assert dialog.model.item(0, 0).text() == "Board pack"
    assert dialog.model.item(0, 2).text() == "claude-opus-4-8"
    qtbot.waitUntil(dialog.follow_button.isEnabled)
    QTest.mouseClick(dialog.follow_button, Qt.MouseButton.LeftButton)
    qt_wait_until(qtbot, lambda: bool(dialog.model.item(0, 5).text()), what="followed")
    assert not dialog.follow_button.isEnabled()  # followed once
    dialog.reject()

    # The run is selected; the call waits in the inbox.
    qt_wait_until(qtbot, lambda: window.approvals_model.rowCount() == 1, what="the inbox")
    run_id = window.approvals[0].run_id
    assert window.selected is not None and window.selected.run.id == run_id
    window.acts["inbox"].trigger()
    table = window.inbox.table
    rect = table.visualRect(window.approvals_model.index(0, 0))
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    approval = window.approval_dialog
    assert approval is not None and approval.isVisible()
    facts = " ".join(label.text() for label in approval.findChildren(type(approval.check)))
    assert "bash" in facts and "Managed Agents" in facts
    QTest.mouseClick(approval.approve_button, Qt.MouseButton.LeftButton)

    def went_on() -> bool:
        run = client.run(run_id)
        return run.wait_reason == WaitReason.HUMAN_INPUT and run.status == RunStatus.WAITING

    qt_wait_until(qtbot, went_on, what="the session to end its turn")
    assert fake.received(session.id, "user.tool_confirmation", refused=True) == [
        {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
    ]
    qt_wait_until(qtbot, lambda: window.approvals_model.rowCount() == 0, what="an empty inbox")
