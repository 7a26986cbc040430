"""Notices reach the analyst: the tray, else desktop notifications over D-Bus, else the window.

The D-Bus tests start a private session bus (``dbus-daemon``) and a fake notification
service on it (``tests/helpers/fake_notifications.py``, which refuses a ``Notify`` of the
wrong signature as real daemons do); the app talks to it as it would to the desktop's.
Everything is real but the daemon's screen.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QSystemTrayIcon
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.gui import notify
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.notifier import Channel
from desktop_agent.gui.notify import Notice, NoticeKind
from tests.gui.conftest import StartWorker, wait_status
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
OFFSCREEN_NO_RAISE = pytest.mark.qt_log_ignore("This plugin does not support raise")
"""Bringing the window forward (a notice's Open) is a no-op the offscreen platform reports."""
needs_dbus = pytest.mark.skipif(
    shutil.which("dbus-daemon") is None, reason="dbus-daemon is not installed (apt install dbus)"
)


@dataclass
class Service:
    """The fake notification service: its bus, what it was asked, and a click."""

    address: str
    log: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def click(self, nid: int, action: str) -> None:
        """As if the analyst clicked ``action`` on notification ``nid``."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        target = DBusAddress(
            "/org/freedesktop/Notifications",
            bus_name="org.freedesktop.Notifications",
            interface="org.desktopagent.TestNotifications",
        )
        with open_dbus_connection(bus=self.address) as conn:
            conn.send_and_get_reply(new_method_call(target, "Invoke", "us", (nid, action)))


@pytest.fixture
def private_bus() -> Iterator[str]:
    """A D-Bus session bus of the test's own; its address."""
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt install dbus)")
    proc = subprocess.Popen(
        ["dbus-daemon", "--session", "--print-address=1", "--nofork", "--nopidfile"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    address = proc.stdout.readline().strip()
    yield address
    proc.kill()
    proc.communicate(timeout=10)  # waits, and closes its pipe


@pytest.fixture
def service(private_bus: str, tmp_path: Path) -> Iterator[Service]:
    """The fake notification service on the private bus (with actions)."""
    log = tmp_path / "notify.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.fake_notifications", private_bus, str(log)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield Service(private_bus, log)
    proc.kill()
    proc.communicate(timeout=10)  # waits, and closes its pipe


OpenOn = Callable[[str | None], MainWindow]


@pytest.fixture
def open_on(qtbot: QtBot, client: Client) -> Iterator[OpenOn]:
    """Open the main window with desktop notifications on a given bus."""
    windows: list[MainWindow] = []

    def open_(bus: str | None) -> MainWindow:
        window = MainWindow(client, spawn_workers=False, poll_ms=50, notify_bus=bus)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield open_
    for window in windows:
        window.shutdown()


def notice(kind: NoticeKind, run_id: str = "run-1") -> Notice:
    return Notice(kind, run_id, "A run needs you", "Draft the memo: approval for write_file")


@needs_dbus
@OFFSCREEN_NO_RAISE
def test_without_a_tray_a_run_that_needs_me_is_a_desktop_notification_with_review(
    qtbot: QtBot,
    service: Service,
    open_on: OpenOn,
    client: Client,
    start_worker: StartWorker,
    demo_ws: Path,
) -> None:
    window = open_on(service.address)
    assert not window.tray.available  # offscreen: no tray
    assert window.notifier.channel == Channel.DESKTOP
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    run = client.start_run("Notify me", model="demo", workspace=demo_ws)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    wait_until(lambda: service.calls(), 10, "the desktop notification")
    (call,) = service.calls()
    assert call["app"] == "desktop-agent" and call["summary"] == "A run needs you"
    assert call["body"].startswith("Notify me")
    assert call["actions"] == ["default", "Open", "open", "Open", "review", "Review"]
    assert call["hints"] == {"urgency": 1, "desktop-entry": "desktop-agent"}

    window.hide()
    service.click(call["id"], "review")  # the analyst clicks Review in the notification
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    dialog = window.approval_dialog
    assert dialog is not None and dialog.approval.run_id == run.id
    assert window.isVisible() and window.selected is not None
    assert window.selected.run.id == run.id
    dialog.close_discarding()


@needs_dbus
@OFFSCREEN_NO_RAISE
def test_open_selects_the_run_and_a_newer_notice_replaces_the_older(
    qtbot: QtBot, service: Service, open_on: OpenOn, client: Client, demo_ws: Path
) -> None:
    run = client.start_run("Replace me", model="demo", workspace=demo_ws)
    window = open_on(service.address)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    notifier = window.notifier
    first = Notice(NoticeKind.NEEDS_USER, run.id, "A run needs you", "Replace me: a question")
    assert notifier.notify(first) == Channel.DESKTOP
    assert notifier.notify(Notice(NoticeKind.FAILED, run.id, "Run failed", "boom")) == (
        Channel.DESKTOP
    )
    one, two = service.calls()
    assert one["replaces_id"] == 0 and two["replaces_id"] == one["id"] == two["id"]
    assert "review" not in one["actions"]  # not about exactly one pending approval
    assert two["hints"]["urgency"] == 2  # a failure is critical
    service.click(two["id"], "default")  # a click on the notice itself
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id == run.id)


@needs_dbus
def test_a_bus_without_a_notification_service_falls_back_to_the_window(
    qtbot: QtBot, private_bus: str, open_on: OpenOn, monkeypatch: pytest.MonkeyPatch
) -> None:
    alerts: list[object] = []
    monkeypatch.setattr(QApplication, "alert", lambda w, ms=0: alerts.append(w))
    window = open_on(private_bus)
    assert window.notifier.channel == Channel.WINDOW
    settings = window.open_settings()
    assert settings.notice_channel.text() == "Notifications go to the window on this desktop."
    settings.close()
    assert window.notifier.notify(notice(NoticeKind.FAILED)) == Channel.WINDOW
    assert alerts == [window]
    assert window.statusBar().currentMessage().startswith("A run needs you: Draft the memo")


@needs_dbus
def test_a_service_that_refuses_falls_back_to_the_window_once_and_for_all(
    qtbot: QtBot,
    service: Service,
    open_on: OpenOn,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    alerts: list[object] = []
    monkeypatch.setattr(QApplication, "alert", lambda w, ms=0: alerts.append(w))
    window = open_on(service.address)
    assert window.notifier.desktop is not None
    window.notifier.desktop.close()  # the bus went away
    assert window.notifier.notify(notice(NoticeKind.FINISHED)) == Channel.WINDOW
    assert window.notifier.notify(notice(NoticeKind.FINISHED)) == Channel.WINDOW
    assert len(alerts) == 2 and window.notifier.channel == Channel.WINDOW
    assert sum("failed" in r.message for r in caplog.records) == 1  # logged once


def test_with_a_tray_the_tray_is_used_and_not_the_bus(
    qtbot: QtBot, open_on: OpenOn, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    monkeypatch.setattr(QSystemTrayIcon, "show", lambda self: None)
    monkeypatch.setattr(QSystemTrayIcon, "showMessage", lambda self, t, m, *a: shown.append((t, m)))
    window = open_on("unix:path=/nonexistent")  # never asked: the tray comes first
    assert window.notifier.channel == Channel.TRAY and window.notifier.desktop is None
    assert window.notifier.notify(notice(NoticeKind.NEEDS_USER)) == Channel.TRAY
    assert shown == [("A run needs you", "Draft the memo: approval for write_file")]


def test_a_stall_is_noticed_once_and_again_after_progress(client: Client) -> None:
    from desktop_agent.client.views import RunRow

    run = client.start_run("Stall", model="demo")
    client.store.commit(
        run.id,
        patch=__import__("desktop_agent.engine.ports", fromlist=["RunPatch"]).RunPatch(
            status=RunStatus.RUNNING, started_at=run.created_at
        ),
    )
    running = client.run(run.id)
    seen: dict[str, int] = {}
    later = running.updated_at + 31 * 60
    assert notify.stalls([RunRow(running)], later - 120, 30 * 60, seen) == []  # not yet
    (stalled,) = notify.stalls([RunRow(running)], later, 30 * 60, seen)
    assert stalled.kind == NoticeKind.STALLED and "no new step for 31 min" in stalled.text
    assert notify.stalls([RunRow(running)], later + 600, 30 * 60, seen) == []  # once per stall
    moved = dataclasses.replace(running, last_seq=running.last_seq + 1)
    assert len(notify.stalls([RunRow(moved)], later + 900, 30 * 60, seen)) == 1  # a new stall
    assert notify.stalls([], later, 30 * 60, seen) == [] and seen == {}  # not running: forgotten


# ---------------------------------------------------------------- the desk: J2 and the gate


def _needs(run_id: str, goal: str = "Draft") -> Notice:
    return Notice(NoticeKind.NEEDS_USER, run_id, "A run needs you", f"{goal}: approval")


def test_notices_are_coalesced_rate_limited_and_held_while_a_dialog_is_open() -> None:
    gate = notify.NoticeGate()
    first = gate.offer([_needs(f"r{i}", f"Goal {i}") for i in range(4)], 1000.0)
    (one,) = first  # four runs at once: one notice
    assert one.title == "4 runs need you" and one.runs == ("r0", "r1", "r2", "r3")
    assert one.text == "Goal 0; Goal 1; Goal 2; and 1 more"
    assert gate.offer([_needs("r5")], 1005.0) == []  # too soon after the last: held
    assert gate.due(1019.0) == []
    (late,) = gate.due(1020.0)
    assert late.run_id == "r5" and late.title == "A run needs you"

    # A finish is quieter: one a minute at most; a failure is not held by finishes.
    done = Notice(NoticeKind.FINISHED, "f1", "Run finished", "F1")
    assert gate.offer([done], 1020.0) == [done]
    assert gate.offer([dataclasses.replace(done, run_id="f2")], 1040.0) == []
    failed = Notice(NoticeKind.FAILED, "x1", "Run failed", "X1: boom")
    assert gate.offer([failed], 1040.0) == [failed]

    # While the analyst decides in a dialog, nothing pops up; after, one notice for all.
    assert gate.offer([_needs("r6"), _needs("r7")], 1100.0, busy=True) == []
    assert gate.due(1130.0, busy=True) == []
    kinds = {n.kind: n for n in gate.due(1131.0)}
    assert kinds[NoticeKind.NEEDS_USER].runs == ("r6", "r7")
    assert kinds[NoticeKind.FINISHED].runs == ("f2",)  # nothing was lost


def test_a_busy_afternoon_gives_a_few_notices_and_loses_no_run() -> None:
    """Ten live runs for 20 minutes: about 190 changes (what was seen) become a few notices."""
    gate = notify.NoticeGate()
    sent: list[Notice] = []
    told: set[str] = set()
    now, changes = 0.0, 0
    while now < 20 * 60:
        run = f"run-{changes % 10}"
        kind = NoticeKind.FINISHED if changes % 3 == 0 else NoticeKind.NEEDS_USER
        sent += gate.offer([Notice(kind, run, "t", f"{run}: x")], now)
        told.add(run)
        changes += 1
        now += 6.3
        sent += gate.due(now)
    sent += gate.due(now + 120)
    assert changes >= 190
    assert len(sent) <= 20 * 60 / 20 + 20 * 60 / 60 + 2  # at most one per gap and kind
    assert {r for n in sent for r in n.runs} == told


@needs_dbus
@OFFSCREEN_NO_RAISE
def test_from_a_notice_to_a_decision_in_two_clicks(
    qtbot: QtBot,
    service: Service,
    open_on: OpenOn,
    client: Client,
    start_worker: StartWorker,
    demo_ws: Path,
) -> None:
    """J2: click the notice (1), the approval's dialog is open; click Approve (2): decided."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from desktop_agent.domain import ApprovalState

    window = open_on(service.address)
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    other = client.start_run("Something else", model="demo")
    client.pause(other.id)  # it needs nothing
    qtbot.waitUntil(lambda: window.runs_model.get(other.id) is not None)
    window.select_run(other.id)  # the analyst was looking at another run
    run = client.start_run("Decide me", model="demo", workspace=demo_ws)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    wait_until(lambda: service.calls(), 10, "the desktop notification")
    call = service.calls()[-1]
    window.hide()

    service.click(call["id"], "default")  # click 1: the notice itself
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    dialog = window.approval_dialog
    assert dialog is not None and dialog.approval.run_id == run.id
    assert window.isVisible() and window.selected is not None
    assert window.selected.run.id == run.id  # not the run the analyst was looking at
    qtbot.waitUntil(dialog.approve_button.isEnabled)
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)  # click 2
    wait_until(
        lambda: all(
            a.state != ApprovalState.PENDING for a in client.approvals() if a.run_id == run.id
        ),
        10,
        "the approval to be decided",
    )


@needs_dbus
@OFFSCREEN_NO_RAISE
def test_a_notice_about_several_runs_opens_the_inbox_showing_only_theirs(
    qtbot: QtBot,
    service: Service,
    open_on: OpenOn,
    client: Client,
    start_worker: StartWorker,
    demo_ws: Path,
) -> None:
    window = open_on(service.address)
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    ids = [client.start_run(f"Run {n}", model="demo", workspace=demo_ws).id for n in range(3)]
    start_worker()
    for run_id in ids:
        wait_status(qtbot, window, run_id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.approvals_model.rowCount() == 3)
    group = Notice(NoticeKind.NEEDS_USER, "", "2 runs need you", "Run 0; Run 1", tuple(ids[:2]))
    assert window.notifier.notify(group) == Channel.DESKTOP
    call = service.calls()[-1]
    assert call["summary"] == "2 runs need you" and "review" not in call["actions"]

    service.click(call["id"], "default")
    qtbot.waitUntil(lambda: window.side.currentWidget() is window.inbox)
    table = window.inbox.table
    shown = [r for r in range(3) if not table.isRowHidden(r)]
    assert {window.approvals_model.approval_at(r).run_id for r in shown} == set(ids[:2])
    assert window.inbox.filter_bar.isVisible()
    current = window.inbox.current()
    assert current is not None and current.run_id in ids[:2]  # Return reviews one of them
    window.inbox.show_only(None)  # Show all
    assert not any(table.isRowHidden(r) for r in range(3))
