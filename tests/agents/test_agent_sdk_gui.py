"""New run in the app: the choice between desktop-agent and a Claude Agent SDK session.

The "Agent" row offers both; choosing the SDK greys out what is desktop-agent's own (its
tools, thinking, economy mode, Anthropic's tools), reads the approval policy for Claude
Code's tools, and the run started from the dialog is an Agent SDK run. The choice lasts
one opening of the dialog; "Run again" keeps the run's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain.agents import AgentKind
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.gui.mainwindow import MainWindow
from tests.helpers.polling import qt_wait_until


@pytest.fixture
def window(qtbot: QtBot, client: Client) -> Iterator[MainWindow]:
    win = MainWindow(client, spawn_workers=False, poll_ms=50)
    win.resize(1280, 800)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.shutdown()
    assert not [t for t in win.findChildren(QTimer) if t.isActive()]


def choose_sdk(dialog: NewRunDialog) -> None:
    dialog.agent.combo.setCurrentIndex(dialog.agent.combo.findData(AgentKind.AGENT_SDK.value))


def test_the_dialog_starts_an_agent_sdk_run(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    dialog = window.open_new_run()
    assert dialog.agent.choice() == ""  # desktop-agent unless chosen
    dialog.goal.setPlainText("Tidy the notes")
    dialog.model.setCurrentIndex(dialog.model.findData("claude-sonnet-5-5"))
    choose_sdk(dialog)
    assert dialog.agent.note.isVisible()
    assert not dialog.tools.isEnabled() and not dialog.economy.isEnabled()
    assert not dialog.thinking.isEnabled() and not dialog.server_tools.isEnabled()
    dialog.policy.setCurrentIndex(dialog.policy.findData("all"))
    request = dialog.request()
    assert request.agent == "agent-sdk" and request.approval_overrides == {"*": "ask"}

    dialog.start.click()
    qt_wait_until(qtbot, lambda: client.runs(), what="the run created")
    [run] = client.runs()
    assert run.spec.agent == AgentKind.AGENT_SDK and run.spec.tools == ()
    assert run.spec.approval_overrides == (("*", "ask"),)


def test_the_choice_lasts_one_opening_and_run_again_keeps_it(
    window: MainWindow, client: Client
) -> None:
    run = client.start_run("Tidy", model="claude-sonnet-5-5", agent="agent-sdk")
    dialog = window.open_new_run()
    dialog.goal.setPlainText("Tidy the notes")
    choose_sdk(dialog)
    dialog.policy.setCurrentIndex(dialog.policy.findData("changes"))
    assert dialog.request().approval_overrides["Bash"] == "ask"
    dialog.done(0)  # closed (Cancel asks first, as a goal was typed)
    assert dialog.agent.choice() == "" and dialog.tools.isEnabled()

    again = window.open_new_run()
    again.prefill(run)
    assert again.agent.choice() == "agent-sdk"
    again.done(0)
