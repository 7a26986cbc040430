"""One inbox for every Claude agent: a call of each, approved together, and each goes on.

A Claude Agent SDK run (its bundled Claude Code against the contract fake of the Messages
API), a followed Managed Agents session (the fake sessions API) and an imported Claude Code
session (its hook started as Claude Code starts it) each wait on a tool call. The analyst
sees all three in the app's inbox, each named by its agent, selects them, clicks Approve
and confirms once. Then each agent goes on its own way: the Agent SDK run's command runs
once and the run completes, the session receives one ``allow`` and reports, the hook
answers Claude Code with ``allow``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.approvals import ApprovalColumn
from tests.helpers.claude_code_sessions import ClaudeCodeFolder
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.fake_managed_agents import FakeManagedAgents
from tests.helpers.other_agents import MANAGED_FOUND, SDK_DONE, sdk_script, waiting_calls
from tests.helpers.polling import wait_for


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeAnthropic, FakeManagedAgents]]:
    with FakeAnthropic(sdk_script) as messages, FakeManagedAgents() as managed:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", messages.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield messages, managed


def test_a_call_of_each_agent_is_approved_in_the_inbox_and_each_agent_goes_on(
    qtbot: QtBot,
    client: Client,
    claude_home: ClaudeCodeFolder,
    fakes: tuple[FakeAnthropic, FakeManagedAgents],
    tmp_path: Path,
) -> None:
    _, managed = fakes
    with waiting_calls(client, client.settings, tmp_path, managed, claude_home) as calls:
        window = MainWindow(client, spawn_workers=False, poll_ms=50)
        qtbot.addWidget(window)
        window.resize(1280, 800)
        window.show()
        try:
            model = window.approvals_model
            qtbot.waitUntil(lambda: model.rowCount() == 3, timeout=30_000)
            titles = sorted(str(model.data(model.index(r, ApprovalColumn.RUN))) for r in range(3))
            assert titles[0].startswith("Claude Agent SDK · Append the Q3 figures")
            assert titles[1].startswith("Claude Code · Find out why")
            assert titles[2].startswith("Q3 board pack") and "Managed Agents" in titles[2]

            window.acts["inbox"].trigger()
            window.inbox.table.selectAll()
            qtbot.waitUntil(lambda: len(window.inbox.selected()) == 3)
            QTest.mouseClick(window.inbox.approve, Qt.MouseButton.LeftButton)
            box = window.commands.dialog
            assert isinstance(box, MessageDialog) and box.confirm_button is not None
            QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: window.commands.last_batch is not None, timeout=30_000)
            outcome = window.commands.last_batch
            assert outcome is not None and outcome.message() == "Approved 3 of 3 calls"
        finally:
            window.shutdown()

        # Claude Code: the waiting hook answers with the decision and ends.
        out, err = calls.hook.communicate(timeout=120)
        assert calls.hook.returncode == 0, err
        answer = json.loads(out)["hookSpecificOutput"]
        assert (answer["hookEventName"], answer["permissionDecision"]) == ("PreToolUse", "allow")

        # The Agent SDK run and the Managed Agents session go on under a worker.
        def moved_on() -> bool:
            calls.drain()
            sdk = client.run(calls.sdk_run)
            followed = client.run(calls.managed_run)
            return sdk.status is RunStatus.COMPLETED and (
                followed.status is RunStatus.WAITING
                and followed.wait_reason is WaitReason.HUMAN_INPUT
            )

        wait_for(moved_on, 180, "the Agent SDK run to end and the session to report")
        notes = (calls.sdk_workspace / "board-notes.md").read_text()
        assert notes.count("north,120") == 1  # the approved command ran once
        sdk_text = " ".join(str(s.output) for s in client.steps(calls.sdk_run))
        assert SDK_DONE in sdk_text
        confirmations = managed.received(calls.session.id, "user.tool_confirmation")
        assert [c["result"] for c in confirmations] == ["allow"]
        managed_text = " ".join(str(s.output) for s in client.steps(calls.managed_run))
        assert MANAGED_FOUND in managed_text
        assert client.approvals() == []
