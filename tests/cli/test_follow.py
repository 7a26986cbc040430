"""Following a run in the terminal (``run`` without ``--detach``) on a real journal.

The worker applies a decision in one commit (the approval is decided, the command marked
applied) and moves the run on at its next one. Between the two, the run still says it waits
for an approval that nobody has to give any more: following must go on there, not end as if
the analyst had something to do.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli.output import Out, follow
from desktop_agent.client.api import Client
from desktop_agent.domain import Run, RunStatus, WaitReason
from tests.conftest import MakeExecutor, drain
from tests.helpers.polling import wait_until


def test_following_goes_on_while_an_applied_decision_has_not_moved_the_run_yet(
    client: Client,
    make_executor: MakeExecutor,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = client.store
    commit = store.commit
    in_window, go_on = threading.Event(), threading.Event()

    def commit_then_hold_after_the_decision(run_id: str, **parts: Any) -> None:
        commit(run_id, **parts)
        if any(text == "approved" for _id, text in parts.get("applied_commands", ())):
            in_window.set()  # the decision is applied; the run has not moved on yet
            go_on.wait(timeout=60)

    monkeypatch.setattr(store, "commit", commit_then_hold_after_the_decision)
    executor = make_executor()
    run = client.start_run("Summarise the sources", model="demo", workspace=workspace)
    drain(store, executor)
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.APPROVAL)
    (approval,) = client.approvals()
    client.approve(approval.id)

    worker = threading.Thread(target=lambda: drain(store, executor), daemon=True)
    worker.start()
    try:
        wait_until(in_window.is_set, what="the worker to apply the decision")
        assert client.run(run.id).wait_reason == WaitReason.APPROVAL  # the window itself
        assert client.approvals() == [] and not client.has_pending_commands(run.id)

        polled = threading.Event()
        checked = client.has_pending_commands

        def has_pending_commands(run_id: str) -> bool:
            polled.set()
            return checked(run_id)

        monkeypatch.setattr(client, "has_pending_commands", has_pending_commands)
        followed: list[Run] = []
        follower = threading.Thread(
            target=lambda: followed.append(follow(client, run.id, Out(True), poll_s=0.02)),
            daemon=True,
        )
        follower.start()
        wait_until(polled.is_set, what="following to look at the run in the window")
    finally:
        go_on.set()  # the worker moves the run on and finishes it
    worker.join(timeout=60)
    follower.join(timeout=60)
    assert not follower.is_alive(), "following did not stop once the run completed"
    assert followed and followed[0].status == RunStatus.COMPLETED, followed
    assert '"event": "end"' in capsys.readouterr().out
