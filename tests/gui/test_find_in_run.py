"""Find in a run: Ctrl+F inside a run's timeline finds steps by what they did."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import OpenWindow, select
from tests.helpers.fakes import Reply, ScriptedModel


def test_ctrl_f_in_a_run_steps_through_the_matching_steps(
    qtbot: QtBot,
    open_window: OpenWindow,
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
) -> None:
    (workspace / "quokka.md").write_text("The quokka population doubled.\n")
    run = client.start_run("Read about quokkas", model="demo", workspace=workspace)
    replies = [
        Reply("Reading.", [("read_file", {"path": "quokka.md"})]),
        Reply("Reading the otters.", [("read_file", {"path": "alpha.md"})]),
        Reply("The quokka notes are read."),
    ]
    drain(client.store, make_executor(ScriptedModel(replies)))
    window = open_window()
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == client.run(run.id).last_seq)
    window.detail.timeline.setFocus()
    window.acts["find"].trigger()  # Ctrl+F inside a run: find in it, not in the run list
    assert window.detail.find_field.hasFocus() or window.focusWidget() is window.detail.find_field
    seqs = []
    for _ in range(4):
        row = window.detail.find_next("quokka")
        assert row is not None
        seqs.append(window.steps_model.entry(row).seq)
    # The call that read quokka.md, what it returned, and the last answer; then round again.
    assert len(set(seqs[:3])) == 3 and seqs[3] == seqs[0]
    assert window.detail.find_status.text().endswith(" of 3")
    back = window.detail.find_next("quokka", backwards=True)
    assert back is not None and window.steps_model.entry(back).seq == seqs[2]
    assert window.detail.find_next("zeppelin") is None
    assert window.detail.find_status.text() == "not found"
