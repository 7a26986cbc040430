"""A failure the app shows to the analyst carries no SQL and no Python exception name."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from sqlalchemy.exc import IntegrityError

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import Run
from desktop_agent.gui.controls import Control
from desktop_agent.gui.mainwindow import MainWindow
from tests.gui.conftest import select

_DRIVER = "UNIQUE constraint failed: commands.id"


def _database_error() -> IntegrityError:
    """What SQLAlchemy raises for a failed statement: class name, statement and parameters."""
    return IntegrityError(
        "INSERT INTO commands (run_id, kind) VALUES (?, ?)",
        ("r-1", "pause"),
        Exception(_DRIVER),
    )


def test_plain_error_keeps_the_reason_and_drops_statement_and_class() -> None:
    raw = str(_database_error())
    assert "[SQL:" in raw and "(builtins.Exception)" in raw  # what would have been shown
    text = plain_error(_database_error())
    assert text == _DRIVER


def test_a_failed_command_shows_a_plain_message(
    qtbot: QtBot,
    window: MainWindow,
    client: Client,
    demo_ws: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = client.start_run("Held demo", model="demo", workspace=demo_ws)
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: window.acts[Control.PAUSE].isEnabled(), timeout=10_000)

    def refuse(run_id: str) -> Run:
        raise _database_error()

    monkeypatch.setattr(window.client, "pause", refuse)
    window.last_error = ""
    window.acts[Control.PAUSE].trigger()
    qtbot.waitUntil(lambda: bool(window.last_error), timeout=10_000)
    shown = window.last_error
    assert _DRIVER in shown
    assert "SQL" not in shown and "INSERT" not in shown
    assert "Error" not in shown.replace(_DRIVER, "")
