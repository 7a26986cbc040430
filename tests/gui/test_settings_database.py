"""The Settings dialog says which database the app uses: a SQLite file or a PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.gui.mainwindow import MainWindow
from tests.helpers import postgres


@pytest.fixture(params=postgres.BACKENDS)
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The app's database, as a SQLite file or on the tests' PostgreSQL server."""
    with postgres.database_for(tmp_path / "data", request.param):
        yield tmp_path / "data" / "desktop-agent.db"


def test_the_database_in_use_is_named(window: MainWindow, client: Client) -> None:
    dialog = window.open_settings()
    shown = dialog.database.text()
    pointer = client.db_path.parent / "database.url"
    if pointer.exists():
        assert shown == f"PostgreSQL: {pointer.read_text().strip()}"
        assert not client.db_path.exists()  # no SQLite file was made beside it
        # SQLite's durability choice would change nothing on a server: not offered.
        assert not dialog.durability.isEnabled()
        assert "server" in dialog.durability.toolTip()
    else:
        assert shown == f"SQLite file: {client.db_path}"
        assert dialog.durability.isEnabled()
    assert dialog.database.isReadOnly()
    assert dialog.database.cursorPosition() == 0  # "PostgreSQL:"/"SQLite file:" in view
    dialog.close()
