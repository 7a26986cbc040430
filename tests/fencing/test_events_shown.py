"""What a worker that lost its lease did is shown: by ``desktop-agent show`` and in the app."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.domain import RunEventKind
from desktop_agent.gui import theme
from desktop_agent.gui.mainwindow import MainWindow

MESSAGE = (
    "A worker that lost its lease finished send_email (step 2) after the run moved on: "
    "sent 'Q3 figures' to boss@example.com. Its result is not in the journal."
)


@pytest.fixture
def run_id(client: Client) -> str:
    run_id = client.start_run("Mail the Q3 figures", model="demo").id
    client.store.record_event(
        run_id, RunEventKind.LATE_EFFECT, MESSAGE, seq=2, data={"epoch": 1, "name": "send_email"}
    )
    return run_id


def test_show_prints_the_event_beside_the_run(
    client: Client, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(client.db_path)
    assert cli.main(["--db", db, "show", run_id]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("  ! ")]
    assert line.endswith(MESSAGE)

    assert cli.main(["--db", db, "--json", "show", run_id]) == 0
    (event,) = json.loads(capsys.readouterr().out)["events"]
    assert (event["kind"], event["seq"], event["message"]) == ("late_effect", 2, MESSAGE)
    assert event["data"] == {"epoch": 1, "name": "send_email"}


@pytest.fixture
def window(qtbot: QtBot, client: Client) -> Iterator[MainWindow]:
    window = MainWindow(client, spawn_workers=False, poll_ms=50)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    yield window
    window.shutdown()


def test_the_run_detail_shows_the_event(
    qtbot: QtBot, window: MainWindow, client: Client, run_id: str
) -> None:
    other = client.start_run("Nothing happened to this one", model="demo").id
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    label = window.detail.events_label
    qtbot.waitUntil(lambda: label.isVisible() and MESSAGE in label.text())
    assert label.text().startswith("⚠")  # told apart from the run's header
    assert theme.warning_color(label.palette()).name() in label.styleSheet()

    assert window.select_run(other)  # a run without events: nothing shown
    qtbot.waitUntil(lambda: not label.isVisible())
