"""MCP servers in the app: the Settings page lists them, New run offers their tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.tools.mcp import CATALOGUE_FILE, start_hub
from tests.gui.conftest import OpenWindow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def declared(client: Client, monkeypatch: pytest.MonkeyPatch) -> Client:
    """The tests' MCP server declared in the settings (over stdio)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    client.settings.mcp_servers = [
        {"name": "glossary", "command": sys.executable, "args": ["-m", "tests.mcp.server"]}
    ]
    client.settings.save(client.db_path)
    return client


def test_settings_show_servers_and_check_now_lists_them(
    qtbot: QtBot, open_window: OpenWindow, declared: Client
) -> None:
    window = open_window()
    dialog = window.open_settings()
    page = dialog.mcp_page
    assert page.tree.topLevelItemCount() == 0
    assert "not listed yet" in page.note.text() and page.check.isEnabled()
    QTest.mouseClick(page.check, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.tree.topLevelItemCount() == 1, timeout=20_000)
    server = page.tree.topLevelItem(0)
    assert server is not None
    assert (server.text(0), server.text(1)) == ("glossary (stdio)", "connected")
    children = [server.child(i) for i in range(server.childCount())]
    tools = {c.text(0): c.text(1) for c in children if c is not None}
    assert tools["glossary__lookup"] == "read only" and tools["glossary__post"] == "unsafe"
    assert page.note.text().startswith("As listed at")
    assert (declared.db_path.parent / CATALOGUE_FILE).exists()
    dialog.close()


def test_new_run_offers_the_tools_a_worker_listed_after_the_app_started(
    open_window: OpenWindow, declared: Client
) -> None:
    window = open_window()
    assert "glossary__lookup" not in window.tools
    hub = start_hub(declared.settings.mcp_servers, declared.db_path.parent / CATALOGUE_FILE)
    assert hub is not None
    hub.close()  # as a worker that started after the app would have listed them
    dialog = window.open_new_run()
    offered = {
        dialog.tools.item(i).data(Qt.ItemDataRole.UserRole): dialog.tools.item(i)
        for i in range(dialog.tools.count())
    }
    lookup = offered["glossary__lookup"]
    assert lookup.checkState() == Qt.CheckState.Unchecked  # offered, not chosen for you
    assert "[MCP server glossary]" in lookup.toolTip()
    lookup.setCheckState(Qt.CheckState.Checked)
    assert "glossary__lookup" in dialog.chosen_tools()
    dialog.close()


def test_no_servers_says_how_to_declare_them(open_window: OpenWindow) -> None:
    window = open_window()
    dialog = window.open_settings()
    assert "No MCP servers" in dialog.mcp_page.note.text()
    assert not dialog.mcp_page.check.isEnabled()
    dialog.close()
