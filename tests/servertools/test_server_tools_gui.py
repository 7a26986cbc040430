"""New run's "Anthropic tools" row: the choices reach the run's definition."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.gui.dialogs.new_run_request import ServerToolsChoice, domain_list
from tests.gui.conftest import OpenWindow
from tests.gui.test_forecast_gui import choose
from tests.helpers.polling import qt_wait_until


def test_domains_are_read_as_typed() -> None:
    assert domain_list(" example.com, example.org\nnews.test;") == (
        "example.com",
        "example.org",
        "news.test",
    )
    blocked = ServerToolsChoice(web_search=True, domains=("spam.test",), blocked=True)
    assert blocked.options()["search_blocked_domains"] == ("spam.test",)
    assert blocked.options()["search_domains"] == ()


def test_the_choices_reach_the_run_and_run_again_keeps_them(
    qtbot: QtBot, client: Client, open_window: OpenWindow, tmp_path: Path
) -> None:
    window = open_window()
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    field = dialog.server_tools
    # Anthropic's tools are chosen here, not in the tool list.
    offered = [dialog.tools.item(i).text() for i in range(dialog.tools.count())]
    assert not any("run by Anthropic" in text for text in offered)
    assert not field.search.isChecked()  # as the web_search setting says
    assert not field.domains.isEnabled()
    choose(dialog, "claude-sonnet-5-5")
    field.search.setChecked(True)
    assert field.domains.isEnabled()
    field.domains.setText("example.com, example.org")
    field.fetch.setChecked(True)
    field.code.setChecked(True)
    dialog.goal.setPlainText("Sum the revenue by region")
    dialog.workspace.setText(str(tmp_path))
    dialog.start.click()
    qt_wait_until(qtbot, lambda: len(client.runs()) == 1, what="the run started")
    (run,) = client.runs()
    spec = run.spec
    assert spec.web_search is True and "web_search" in spec.tool_names
    assert spec.search_domains == ("example.com", "example.org")
    assert spec.server_web_fetch and "server_web_fetch" in spec.tool_names
    assert "web_fetch" not in spec.tool_names
    assert spec.code_execution and "code_execution" in spec.tool_names

    again = window.run_again(run)
    assert again.server_tools.choice() == ServerToolsChoice(
        web_search=True,
        domains=("example.com", "example.org"),
        web_fetch=True,
        code_execution=True,
    )
    again.reject()
    fresh = window.open_new_run()
    assert fresh.server_tools.choice() == ServerToolsChoice(web_search=False)
    fresh.reject()


def test_a_model_that_does_not_take_code_execution_is_refused_in_the_form(
    qtbot: QtBot, client: Client, open_window: OpenWindow
) -> None:
    window = open_window()
    dialog = window.open_new_run()
    qtbot.waitUntil(dialog.isVisible)
    choose(dialog, "demo")
    dialog.server_tools.code.setChecked(True)
    dialog.goal.setPlainText("Sum it")
    dialog.start.click()
    qt_wait_until(qtbot, lambda: bool(dialog.error.text()), what="the refusal shown")
    assert "no Anthropic server tools" in dialog.error.text()
    assert client.runs() == []
    dialog.reject()
