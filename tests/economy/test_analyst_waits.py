"""A run waiting in a Message Batch goes on by itself: it needs no one.

It is in no inbox and worth no "needs you" notice, in the app or from the worker.
"""

from __future__ import annotations

import json
import time

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.client.views import RunRow
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.domain.models import ANALYST_WAITS
from desktop_agent.gui.notify import transitions
from desktop_agent.worker.notify import event_for
from tests.economy.waits import wait_in_batch


def test_a_batch_wait_is_not_one_only_the_analyst_can_end() -> None:
    assert WaitReason.BATCH not in ANALYST_WAITS
    assert WaitReason.APPROVAL in ANALYST_WAITS  # the set is the one the inbox reads


def test_a_run_waiting_in_a_batch_needs_no_one(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    run = client.start_run("Summarise", model="claude-sonnet-5-5", economy=True)
    wait_in_batch(client, run, time.time())
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.BATCH)
    assert not waiting.needs_analyst
    assert event_for(waiting) is None  # the worker's notifier says nothing
    assert transitions({run.id: (RunStatus.RUNNING, None)}, [RunRow(waiting)]) == []

    capsys.readouterr()
    assert cli.main(["--db", str(client.db_path), "inbox", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli.main(["--db", str(client.db_path), "inbox"]) == 0
    assert capsys.readouterr().out.startswith("Nothing needs you")
