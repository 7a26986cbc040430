"""No handler of the main window reads or writes the database on the GUI thread.

The window is opened over a client watched by :class:`GuiThreadGuard`: every public method
of the client that may touch the database, and every SQL statement sent through any
engine, records where it ran. A call on the GUI thread with a frame of
``desktop_agent/gui`` on its stack is the window's own (a slot, a handler, a task's
callback): the guard lists it. Calls from the test itself (seeding runs, reading what the
window did) have no such frame and are not the window's.

The window then drives a journey through its rooms (select runs and read their steps,
approve, open an approval step, fork from a step, run again, compare, search and open a
result, usage, settings and a saved key, tags and notes, export, the offline demo, pause,
archived runs listed and brought back) and the guard must have seen the database used
only off the GUI thread. A second test shows that the guard catches a deliberate
GUI-thread call, through a client method and through a module function over the client.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import sqlalchemy as sa
from PySide6.QtCore import QItemSelectionModel, Qt, QThread
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

import desktop_agent.gui
from desktop_agent.client import forks as client_forks
from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.engine.ports import StepIntent
from desktop_agent.gui.controls import Control
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.runs import RunRole
from desktop_agent.gui.widgets.runlist import FILTERS
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

GUI_DIR = str(Path(desktop_agent.gui.__file__).resolve().parent)
APP_DIR = str(Path(desktop_agent.gui.__file__).resolve().parents[1])
TESTS_DIR = str(Path(__file__).resolve().parents[1])

ALLOWED: dict[str, str] = {
    "reload_mcp_tools": (
        "reads the small MCP catalogue file a worker writes beside the database (no SQL): "
        "the new-run dialog lists the tools at once"
    ),
}
"""Client methods the window may call on the GUI thread, each with why it is cheap.

Plain attributes (``settings``, ``db_path``) are not methods and are not watched: they
are values in memory. An allowed method that sent SQL would still be caught by the
statement hook.
"""


@dataclass
class GuiThreadGuard:
    """Records every database use of a client, and which ran on the GUI thread.

    Attributes:
        gui_calls: the window's calls on the GUI thread: ``(what, stack)``.
        off_thread: what ran on other threads (the pool's): names of methods and ``sql``.
    """

    gui_calls: list[tuple[str, str]] = field(default_factory=list)
    off_thread: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str, frame: FrameType | None) -> None:
        """Record a use of the database from ``frame`` (the caller's)."""
        app = QApplication.instance()
        on_gui = app is not None and QThread.currentThread() is app.thread()
        if not on_gui:
            with self._lock:
                self.off_thread.append(what)
            return
        if not _from_gui(frame):
            return  # the test's own call (seeding, checking), not the window's
        self.gui_calls.append((what, _our_frames(frame)))

    def watch(self, client: Client) -> None:
        """Wrap each public method of ``client`` (the instance only) that may use the database."""
        for name, member in vars(Client).items():
            if name.startswith("_") or name in ALLOWED or not callable(member):
                continue
            setattr(client, name, self._wrap(name, getattr(client, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.note(f"Client.{name}", _caller())
            return method(*args, **kwargs)

        return watched

    def on_sql(self, *_args: Any) -> None:
        """SQLAlchemy's ``before_cursor_execute``: any statement, by any code path."""
        self.note("sql", _caller())

    def report(self) -> str:
        """The GUI-thread calls, one block each, for an assertion's message."""
        return "\n\n".join(f"{what} on the GUI thread:\n{stack}" for what, stack in self.gui_calls)


def _caller() -> FrameType | None:
    """The frame that called the function calling this one (the client's caller)."""
    return sys._getframe(2)


def _our_frames(frame: FrameType | None, limit: int = 10) -> str:
    """The innermost ``limit`` frames of the app and the tests (not SQLAlchemy's, pytest's)."""
    ours = [
        f for f in traceback.extract_stack(frame) if f.filename.startswith((APP_DIR, TESTS_DIR))
    ]
    return "".join(traceback.format_list(ours[-limit:]))


def _from_gui(frame: FrameType | None) -> bool:
    """Whether a frame of ``desktop_agent/gui`` is on the stack from ``frame`` down."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(GUI_DIR):
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def guard(client: Client) -> Iterator[GuiThreadGuard]:
    """The guard, watching ``client`` and every engine, for the whole test."""
    found = GuiThreadGuard()
    found.watch(client)
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", found.on_sql)
    yield found
    sa.event.remove(sa.engine.Engine, "before_cursor_execute", found.on_sql)


@pytest.fixture
def guarded_window(qtbot: QtBot, client: Client, guard: GuiThreadGuard) -> Iterator[MainWindow]:
    """The main window over the watched client (built under the guard: its start counts)."""
    window = MainWindow(client, spawn_workers=False, poll_ms=50)
    window.resize(1280, 800)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    yield window
    window.shutdown()
    assert not window.tasks.busy, "background tasks left running"


def _finished_run(client: Client, goal: str) -> str:
    """A finished run: the model reads a file (steps 1-2), then answers (step 3)."""
    run = client.start_run(goal, model="demo", tools=["read_file"])
    use = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.md"}}
    answer = {"type": "text", "text": f"{goal}: the quokka count doubled"}
    call = {"tool_use_id": "t1", "arguments": {"path": "a.md"}}
    model = {"model": "demo"}
    journal = [
        (StepKind.MODEL_CALL, "demo", model, {"content": [use], "stop_reason": "tool_use"}),
        (StepKind.TOOL_CALL, "read_file", call, {"content": "A"}),
        (StepKind.MODEL_CALL, "demo", model, {"content": [answer], "stop_reason": "end_turn"}),
    ]
    for seq, (kind, name, input_, output) in enumerate(journal, start=1):
        intent = StepIntent(
            seq=seq, kind=kind, name=name, input=input_, status=StepStatus.COMPLETED, output=output
        )
        client.store.commit(run.id, intents=[intent])
    return run.id


def _waiting_run(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> str:
    """A demo run waiting for its approval (an overwrite of report.md)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "alpha.md").write_text("# Alpha\nAlpha says the market grew 4% in 2025.\n")
    (ws / "beta.txt").write_text("Beta reports churn fell. More detail follows.\n")
    run_id = client.start_run("Summarise the sources", model="demo", workspace=ws).id
    drain(client.store, make_executor())
    assert client.run(run_id).status == RunStatus.WAITING
    return run_id


def _archived_run(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> str:
    """A finished run, archived (out of the database, into an archive file)."""
    ws = tmp_path / "old"
    ws.mkdir()
    (ws / "notes.md").write_text("Old notes.\n")
    run_id = client.start_run("An old survey", model="demo", workspace=ws).id
    drain(client.store, make_executor(ScriptedModel([Reply("Done.")])))
    finished = client.run(run_id).finished_at or 0.0
    assert run_id in Scheduling(client, lambda: finished + 40 * 86400).archive(86400).run_ids
    return run_id


def _select(qtbot: QtBot, window: MainWindow, run_id: str, steps: int = 0) -> None:
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    qtbot.waitUntil(lambda: window.steps_model.run_id == run_id)
    if steps:
        qtbot.waitUntil(lambda: window.steps_model.rowCount() >= steps)


def _settle(qtbot: QtBot, window: MainWindow) -> None:
    """Let every task the journey started deliver (its callbacks run on the GUI thread)."""
    window.poller.refresh()
    qtbot.waitUntil(lambda: not window.tasks.busy, timeout=10_000)


@pytest.mark.qt_log_ignore(  # offscreen: no stacking, and new dialogs
    "This plugin does not support raise", "does not support propagateSizeHints"
)
def test_a_journey_through_the_window_uses_the_database_only_off_the_gui_thread(
    qtbot: QtBot,
    client: Client,
    make_executor: MakeExecutor,
    tmp_path: Path,
    guard: GuiThreadGuard,
) -> None:
    archived = _archived_run(client, make_executor, tmp_path)  # first: archives all finished
    first = _finished_run(client, "Read the notes")
    second = _finished_run(client, "Read the notes again")
    waiting = _waiting_run(client, make_executor, tmp_path)
    window = MainWindow(client, spawn_workers=False, poll_ms=50)
    window.resize(1280, 800)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    try:
        _journey(qtbot, window, client, first, second, waiting)
        _more_rooms(qtbot, window, client, waiting, archived)
    finally:
        window.shutdown()
    assert not window.tasks.busy, "background tasks left running"
    assert not guard.gui_calls, guard.report()
    # Not vacuous: the journey did use the database, on the pool's threads.
    used = set(guard.off_thread)
    expected = {"approve", "forks_of", "search", "models", "pause", "step_approvals", "usage"}
    assert {"sql", *(f"Client.{name}" for name in expected)} <= used, used


def _journey(
    qtbot: QtBot, window: MainWindow, client: Client, first: str, second: str, waiting: str
) -> None:
    # Run list and run detail: select runs, read their steps, forks and forecasts.
    _select(qtbot, window, first, steps=3)
    _select(qtbot, window, second, steps=3)
    # Approvals: the banner's Approve opens the dialog; the decision is recorded.
    _select(qtbot, window, waiting)
    qtbot.waitUntil(lambda: window.acts[Control.APPROVE].isEnabled())
    window.acts[Control.APPROVE].trigger()
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    dialog = window.approval_dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: "pass the tool's checks" in dialog.check.text())
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    qtbot.waitUntil(lambda: client.store.pending_commands(waiting) != [])  # for the worker
    # The inbox and a step of the run that asked (its recorded approval).
    window.acts["inbox"].trigger()
    # Fork from a step of the timeline, then the fork opens.
    _select(qtbot, window, first, steps=3)
    timeline = window.detail.timeline
    timeline.selectionModel().select(
        timeline.model().index(1, 0),
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    window.acts["fork_step"].trigger()
    qtbot.waitUntil(lambda: window.fork_dialog is not None)
    fork_dialog = window.fork_dialog
    assert fork_dialog is not None
    fork_dialog.note.setPlainText("Read b.md too")
    fork_dialog.fork_button.click()
    qtbot.waitUntil(
        lambda: window.selected is not None and window.selected.run.forked_from == first
    )
    window.fork_from_step(first, 2)  # the reported path: straight from the window's API
    qtbot.waitUntil(lambda: window.fork_dialog is not fork_dialog)
    assert window.fork_dialog is not None
    window.fork_dialog.close_discarding()
    # Run again: the new-run dialog, filled from the run (its models read off-thread).
    _select(qtbot, window, first)
    window.acts["run_again"].trigger()
    again = window.new_run_dialog
    assert again is not None
    _settle(qtbot, window)
    again.close_discarding()
    # Compare two runs.
    window.run_list.select_runs([first, second])
    qtbot.waitUntil(lambda: window.acts["compare"].isEnabled())
    window.acts["compare"].trigger()
    compare = window.compare_windows[-1]
    qtbot.waitUntil(lambda: compare.comparison is not None)
    compare.close()
    # Search every run, and open a result.
    search = window.open_search()
    search.query.setText("quokka")
    qtbot.waitUntil(lambda: bool(search.hits))
    search.close()
    window.open_step(second, 3, ["quokka"])
    qtbot.waitUntil(lambda: window.detail.timeline.currentIndex().isValid())
    # Usage and budgets.
    usage = window.open_usage()
    qtbot.waitUntil(lambda: usage.usage is not None)
    usage.close()
    # Settings (the window reads nothing there itself).
    settings = window.open_settings()
    _settle(qtbot, window)
    settings.reject()
    # Archived and imported runs, for the run list's filters.
    window.read_archived()
    # Tags on a run, and a note on a step.
    _select(qtbot, window, second, steps=3)
    window.tagging.save(second, "q3 urgent")
    qtbot.waitUntil(lambda: "q3" in client.run(second).tags)
    window.noting.save(second, 1, "checked by hand")
    # Export the run (written off-thread).
    window.export_run(second, window.client.db_path.parent / "second.md", "md")
    _settle(qtbot, window)


def test_the_guard_catches_a_deliberate_gui_thread_call(
    qtbot: QtBot,
    client: Client,
    guarded_window: MainWindow,
    guard: GuiThreadGuard,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    window = guarded_window
    run_id = _finished_run(client, "Read the notes")
    _select(qtbot, window, run_id, steps=3)
    _settle(qtbot, window)
    assert not guard.gui_calls, guard.report()

    # A task's callback (on the GUI thread) that reads through a client method.
    def read_on_gui(_none: object) -> None:
        window.client.forks_of(run_id)

    window.tasks.submit(lambda: None, read_on_gui)
    _settle(qtbot, window)
    whats = [what for what, _ in guard.gui_calls]
    assert whats[0] == "Client.forks_of" and set(whats[1:]) == {"sql"}, whats
    assert "test_desk_gui_thread.py" in guard.gui_calls[0][1]
    guard.gui_calls.clear()

    # The reported fault: a fork's options read synchronously by the window's handler
    # (a module function over the client: only its SQL shows it).
    def read_now(run: str, seq: int) -> None:
        client_forks.fork_options(window.client, run, seq)

    monkeypatch.setattr(window.forking, "fork_from_step", read_now)
    window.tasks.submit(lambda: None, lambda _none: window.fork_from_step(run_id, 2))
    _settle(qtbot, window)
    assert guard.gui_calls and {what for what, _ in guard.gui_calls} <= {"sql", "Client.run"}


def _more_rooms(
    qtbot: QtBot, window: MainWindow, client: Client, waiting: str, archived: str
) -> None:
    # The approval an approval step of the timeline recorded (decided: its final check).
    _select(qtbot, window, waiting, steps=1)
    seq = next(s.seq for s in client.steps(waiting) if s.kind == StepKind.APPROVAL)
    window.detail.approval_step_activated.emit(waiting, seq)
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    _settle(qtbot, window)
    dialog = window.approval_dialog
    assert dialog is not None
    dialog.close_discarding()
    qtbot.waitUntil(lambda: window.approval_dialog is None)
    # The header's place in a Message Batch, read when asked for.
    window.detail.batch_wait_wanted.emit(waiting)
    # The offline demo from the empty list's button, selected once made; then paused.
    known = {r.run.id for r in window.runs_model.rows()}
    window.run_list.demo_requested.emit()
    qtbot.waitUntil(lambda: window.selected is not None and window.selected.run.id not in known)
    qtbot.waitUntil(lambda: window.acts[Control.PAUSE].isEnabled())
    window.acts[Control.PAUSE].trigger()
    _settle(qtbot, window)
    # An archived run: listed under the Archived filter (read when chosen), shown
    # read-only, then brought back from the detail pane's Unarchive.
    labels = [label for label, _value in FILTERS]
    window.run_list.filter.setCurrentIndex(labels.index("Archived"))
    qtbot.waitUntil(lambda: window.run_list.archived_row(archived) is not None)
    proxy = window.run_list.proxy
    (row,) = [
        r for r in range(proxy.rowCount()) if proxy.index(r, 0).data(RunRole.RUN_ID) == archived
    ]
    window.run_list.table.selectRow(row)
    qtbot.waitUntil(lambda: window.detail.row is not None and window.detail.row.run.id == archived)
    window.detail.unarchive_button.click()
    qtbot.waitUntil(
        lambda: window.selected is not None and window.selected.run.id == archived, timeout=20_000
    )
    # A key saved in the settings resumes the runs that waited for one.
    settings = window.open_settings()
    settings.key_saved.emit("the keyring")
    _settle(qtbot, window)
    settings.reject()
