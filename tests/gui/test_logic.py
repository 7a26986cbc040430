"""Controls by status, notifications by transition, worker supervision, the edit diff."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import WorkerStatus
from desktop_agent.client.views import RunRow
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.gui.controls import Control, allowed_controls
from desktop_agent.gui.notify import NoticeKind, state_of, transitions
from desktop_agent.gui.supervisor import WORKER_NICE, StartedWorker, WorkerSupervisor
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.widgets.schema_form import SchemaForm, diff_lines
from tests.gui.test_models import run


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (RunStatus.QUEUED, None, {Control.PAUSE, Control.CANCEL}),
        (RunStatus.RUNNING, None, {Control.PAUSE, Control.CANCEL, Control.STEER}),
        (RunStatus.PAUSED, None, {Control.RESUME, Control.CANCEL}),
        (RunStatus.WAITING, WaitReason.RATE_LIMIT, {Control.RESUME, Control.PAUSE}),
        (RunStatus.WAITING, WaitReason.HUMAN_INPUT, {Control.ANSWER}),
        (RunStatus.NEEDS_ATTENTION, None, {Control.RESOLVE, Control.CANCEL}),
        (RunStatus.FAILED, None, {Control.RETRY}),
        (RunStatus.COMPLETED, None, set()),
        (RunStatus.CANCELLED, None, set()),
    ],
)
def test_controls_follow_the_status(
    status: RunStatus, reason: WaitReason | None, expected: set[Control]
) -> None:
    allowed = allowed_controls(run(1, status, wait_reason=reason))
    assert expected <= allowed
    if status.is_terminal:
        assert allowed <= {Control.RETRY}
    if status != RunStatus.FAILED:
        assert Control.RETRY not in allowed
    if status != RunStatus.PAUSED and reason is None:
        assert Control.RESUME not in allowed
    assert not {Control.APPROVE, Control.EDIT, Control.REJECT} & allowed  # nothing pending


def test_approval_controls_need_a_pending_approval() -> None:
    waiting = run(1, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL)
    assert Control.APPROVE not in allowed_controls(waiting, 0)
    assert {Control.APPROVE, Control.EDIT, Control.REJECT} <= allowed_controls(waiting, 1)
    assert allowed_controls(None) == frozenset()


def test_a_claude_code_session_offers_only_the_decision_its_hook_waits_for() -> None:
    import dataclasses

    from desktop_agent.domain import AgentSpec

    spec = AgentSpec(model="claude-opus-4-7", system_prompt="", agent="claude-code")
    waiting = dataclasses.replace(
        run(1, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL), spec=spec
    )
    assert allowed_controls(waiting, 1) == {Control.APPROVE, Control.EDIT, Control.REJECT}
    assert allowed_controls(waiting, 0) == frozenset()  # no pause, cancel, steer, extend
    done = dataclasses.replace(run(2, RunStatus.COMPLETED), spec=spec)
    assert allowed_controls(done) == frozenset()
    # Our own run in the same state keeps its controls.
    assert {Control.CANCEL, Control.STEER} <= allowed_controls(
        run(1, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL), 1
    )


def test_notices_come_from_status_transitions() -> None:
    before = {
        "run001": (RunStatus.RUNNING, None),
        "run002": (RunStatus.RUNNING, None),
        "run003": (RunStatus.RUNNING, None),
        "run004": (RunStatus.WAITING, WaitReason.APPROVAL),
    }
    rows = [
        RunRow(run(1, RunStatus.COMPLETED)),
        RunRow(run(2, RunStatus.FAILED, status_message="Model call failed: 400")),
        RunRow(run(3, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL)),
        RunRow(run(4, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL)),  # unchanged
        RunRow(run(5, RunStatus.RUNNING)),  # new, nothing to say yet
    ]
    notices = {n.run_id: n for n in transitions(before, rows)}
    assert set(notices) == {"run001", "run002", "run003"}
    assert notices["run001"].kind == NoticeKind.FINISHED
    assert notices["run002"].kind == NoticeKind.FAILED and "400" in notices["run002"].text
    assert notices["run003"].kind == NoticeKind.NEEDS_USER
    assert state_of(rows[2].run) == (RunStatus.WAITING, WaitReason.APPROVAL)


class FakeStore:
    """No workers and no runs recorded: what the recovery report reads."""

    def list_workers(self) -> list[object]:
        return []

    def list_runs(self, *_args: object, **_kwargs: object) -> list[object]:
        return []


class FakeClient:
    """Just what the supervisor calls (and the recovery report reads)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path  # a data folder where no worker left a note
        self.alive = False
        self.spawned: list[int] = []
        self.nices: list[int] = []
        self.children: list[subprocess.Popen[bytes]] = []
        self._store = FakeStore()

    def worker_status(self) -> WorkerStatus:
        return WorkerStatus(self.alive, None, None)

    def spawn_worker(self, *, nice: int = 0) -> int:
        self.nices.append(nice)
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL
        )
        self.children.append(child)
        self.spawned.append(child.pid)
        return child.pid


def test_supervisor_starts_restarts_and_stops_only_its_worker(qtbot: QtBot, tmp_path: Path) -> None:
    fake = FakeClient(tmp_path / "desktop-agent.db")
    tasks = TaskRunner()
    client: Any = fake
    sup = WorkerSupervisor(client, tasks, spawn=True, check_ms=50, grace_s=0.2)
    seen: list[WorkerStatus] = []
    lost: list[object] = []
    sup.status_changed.connect(seen.append)
    sup.worker_lost.connect(lost.append)
    try:
        with qtbot.waitSignal(sup.worker_started, timeout=5000):
            sup.start()
        assert len(fake.spawned) == 1 and seen and not seen[0].alive
        fake.alive = True  # the worker reports in: no second start, however often it checks
        qtbot.waitUntil(lambda: sum(s.alive for s in seen) >= 8, timeout=10_000)
        assert len(fake.spawned) == 1 and lost == []
        fake.alive = False  # it died: the supervisor starts another after the grace period
        with qtbot.waitSignal(sup.worker_started, timeout=5000):
            pass
        assert len(fake.spawned) == 2
        assert fake.nices == [WORKER_NICE, WORKER_NICE] and WORKER_NICE > 0  # window first
        assert len(lost) == 1  # the death was reported once, with what it interrupted
        sup.stop()
        stopped = sup.stop_started_workers()
        assert sorted(stopped) == sorted(fake.spawned)
        for child in fake.children:
            assert child.wait(timeout=5) == -signal.SIGTERM
        # A PID that is no longer our process is never signalled.
        sup.started.append(StartedWorker(os.getpid(), time.time() - 10_000))
        assert os.getpid() not in sup.stop_started_workers()
    finally:
        sup.stop()
        tasks.shutdown()
        for child in fake.children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_supervisor_never_spawns_when_told_not_to(qtbot: QtBot, tmp_path: Path) -> None:
    fake = FakeClient(tmp_path / "desktop-agent.db")
    tasks = TaskRunner()
    client: Any = fake
    sup = WorkerSupervisor(client, tasks, spawn=False, check_ms=50, grace_s=0)
    seen: list[WorkerStatus] = []
    sup.status_changed.connect(seen.append)
    try:
        sup.start()
        qtbot.waitUntil(lambda: len(seen) >= 5, timeout=10_000)  # five checks, all dead
        assert fake.spawned == []
    finally:
        sup.stop()
        tasks.shutdown()


def test_schema_form_edits_and_diff(qtbot: QtBot) -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "offset": {"type": "integer", "default": 0},
            "tags": {"type": "array"},
            "mode": {"enum": ["a", "w"]},
        },
        "required": ["path", "content"],
    }
    args = {"path": "r.md", "content": "one\ntwo\n", "tags": ["x"], "mode": "w"}
    form = SchemaForm(schema, args)
    qtbot.addWidget(form)
    assert not form.is_edited() and form.values() == args  # offset absent and untouched
    form.widget_for("content").setPlainText("one\nTWO\n")  # type: ignore[attr-defined]
    form.widget_for("tags").setPlainText('["x", "y"]')  # type: ignore[attr-defined]
    assert form.is_edited()
    edited = form.values()
    assert edited["content"] == "one\nTWO\n" and edited["tags"] == ["x", "y"]
    assert "offset" not in edited
    lines = diff_lines(args, edited)
    assert "@@ content @@" in lines and "-two" in lines and "+TWO" in lines
    assert "@@ path @@" not in lines
    form.reset()
    assert not form.is_edited()


def test_app_main_opens_and_closes_the_window(
    monkeypatch: pytest.MonkeyPatch, qapp: Any, db_path: Any
) -> None:
    from PySide6.QtWidgets import QApplication

    from desktop_agent.gui import app as gui_app

    shown: list[str] = []

    def exec_once(self: QApplication) -> int:
        window = next(w for w in QApplication.topLevelWidgets() if w.isVisible())
        shown.append(window.windowTitle())
        return 0

    monkeypatch.setattr(QApplication, "exec", exec_once)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # main() installs its own
    assert gui_app.main(db_path, spawn_workers=False) == 0
    assert shown and shown[0].startswith("desktop-agent")
    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()


def test_the_inbox_names_the_agent_that_asks() -> None:
    import dataclasses

    from desktop_agent.domain import AgentSpec
    from desktop_agent.gui.desk.approvals import inbox_title

    ours = run(1, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL)
    assert inbox_title(ours) == "Goal number 1"
    code = AgentSpec(model="claude-opus-4-7", system_prompt="", agent="claude-code")
    assert inbox_title(dataclasses.replace(ours, spec=code)) == "Claude Code · Goal number 1"
    managed = AgentSpec(model="claude-opus-4-7", system_prompt="", agent="managed-agents")
    titled = dataclasses.replace(ours, spec=managed, title="Board pack (Managed Agents)")
    assert inbox_title(titled) == "Board pack (Managed Agents)"  # said once
