"""Hygiene checks: a test fails when it leaves behind something it started.

Loaded for the whole suite by ``tests/conftest.py`` (``pytest_plugins``), and by the inner
runs of ``tests/hygiene`` (through pytester), so both use this one module. Four autouse
fixtures look, after the test and its own fixtures have been torn down, for what the test
started and did not end:

* :func:`no_leaked_windows`: a Qt top-level window left open;
* :func:`no_leaked_threads`: a Python thread still running;
* :func:`no_leaked_processes`: a child process still running;
* :func:`no_open_databases`: a :class:`~desktop_agent.persistence.db.Database` never
  disposed, or a SQLite file still open.

Each compares what exists after the test with what existed before it. Fixtures of a wider
scope (module, session) are set up before the first function-scoped fixture and torn down
after the last one, so what they start exists in both snapshots and is never blamed on a
test. The PostgreSQL server of ``tests/helpers/postgres.py``, started by the first test
that needs it and kept for the process, is no descendant of the test process at all
(``pg_ctl`` detaches it). A finding fails the test in its teardown (an error saying what
was left), and is then cleaned up where that is possible (windows closed, processes
killed, databases disposed) so that the next test starts clean.

Opting out: ``@pytest.mark.leaks_ok("why", kinds=("threads",))`` (``kinds`` defaults to
every kind: "windows", "threads", "processes", "databases"). A reason is mandatory.

The teardown order is fixed by the fixtures' dependencies: windows are looked at first
(a window left open keeps its background tasks), then threads (a thread given its grace
to finish may still be closing its connections), then processes, then databases.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from desktop_agent.persistence.db import Database

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QWidget

KINDS = ("windows", "threads", "processes", "databases")
"""What ``leaks_ok(kinds=...)`` may name."""

THREAD_GRACE_S = 5.0
"""How long, in all, the threads a test started may take to finish after it: a worker told
to stop finishes its poll; a thread nobody told to stop never does."""

PROCESS_GRACE_S = 5.0
"""How long the children a test started may take to exit after it (a terminated child
running its signal handler)."""

ALLOWED_THREADS: dict[str, str] = {}
"""Threads that may outlive the test that started them, by name prefix, with the reason.

Kept empty unless a library owns a legitimately long-lived thread that a test cannot stop.
Not listed because never compared: ``threading._DummyThread`` objects, which stand for
threads that Python did not start (Qt's own threads, C libraries) and that called into
Python; they cannot be joined, and Python 3.11 keeps them in ``threading.enumerate()`` for
good, whether or not the thread still runs.
"""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "leaks_ok(reason, kinds=...): the test may leave behind the given kinds of "
        "resources (windows, threads, processes, databases); a reason is mandatory",
    )


def _allowed(request: pytest.FixtureRequest, kind: str) -> bool:
    """Whether the test opted out of the check of ``kind`` (with a reason)."""
    marker = request.node.get_closest_marker("leaks_ok")
    if marker is None:
        return False
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        pytest.fail("@pytest.mark.leaks_ok needs a reason", pytrace=False)
    kinds = marker.kwargs.get("kinds", KINDS)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        pytest.fail(f"@pytest.mark.leaks_ok: unknown kinds {sorted(unknown)}", pytrace=False)
    return kind in kinds


def _fail(what: str, findings: list[str]) -> None:
    lines = "\n".join(f"  - {finding}" for finding in findings)
    pytest.fail(f"the test left {what}:\n{lines}", pytrace=False)


# --- databases -----------------------------------------------------------------------

_SQLITE_FILE = re.compile(r"\.(db|sqlite3?)(-wal|-shm|-journal)?$")


def _open_sqlite_files() -> dict[str, list[int]]:
    """The SQLite files this process holds open (path: descriptors), from ``/proc``."""
    found: dict[str, list[int]] = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # not Linux: only the Database registry is checked
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (or the listing's own descriptor)
            continue
        target = target.removesuffix(" (deleted)")
        if _SQLITE_FILE.search(target):
            found.setdefault(target, []).append(int(name))
    return found


@dataclass(eq=False)
class _Opened:
    """A Database opened during a test: where, whether disposed, whether reported."""

    ref: weakref.ref[Database]
    where: str
    disposed: bool = False
    reported: bool = False


_registries: list[list[_Opened]] = []
"""One list per database check in progress: more than one when pytester runs tests inside
a test. A Database opened goes into each; one reported by the inner check is marked, and
not reported again by the enclosing one."""

_reported_files: set[str] = set()
"""SQLite files already reported as left open (paths are unique to their test)."""

_ORIGINAL_INIT = Database.__init__
_ORIGINAL_DISPOSE = Database.dispose


def _tracking_init(self: Database, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL_INIT(self, *args, **kwargs)  # one that fails has disposed itself
    entry = _Opened(weakref.ref(self), self.describe())
    for registry in _registries:
        registry.append(entry)


def _tracking_dispose(self: Database) -> None:
    _ORIGINAL_DISPOSE(self)
    for registry in _registries:
        for entry in registry:
            if entry.ref() is self:
                entry.disposed = True


def _open_connections(db: Database) -> int:
    """The connections ``db``'s pools hold (in use or idle)."""
    from sqlalchemy.pool import QueuePool

    total = 0
    for engine in {id(db.writer): db.writer, id(db.reader): db.reader}.values():
        pool = engine.pool
        if isinstance(pool, QueuePool):
            total += pool.checkedin() + pool.checkedout()
    return total


def _database_findings(opened: list[_Opened]) -> list[str]:
    """What the Databases in ``opened`` left open; the alive ones are disposed after."""
    findings: list[str] = []
    for entry in opened:
        db = entry.ref()
        if entry.reported or (db is None and entry.disposed):
            continue
        connections = 0 if db is None else _open_connections(db)
        if db is None:
            finding = "garbage-collected without dispose() (close the Client, dispose it)"
        elif not entry.disposed:
            finding = (
                f"never disposed, {connections} connection(s) open "
                "(close the Client, dispose the Database)"
            )
        elif connections:
            finding = f"{connections} connection(s) opened again after dispose() and still open"
        else:
            continue
        findings.append(f"database {entry.where}: {finding}")
        entry.reported = True
        if db is not None:
            _ORIGINAL_DISPOSE(db)
    return findings


@pytest.fixture(autouse=True)
def no_open_databases(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a database open: a ``Database`` not disposed, a SQLite file.

    Two complementary checks, both blind to what wider-scoped fixtures opened before:

    * **A registry of the Databases the test opened.** While a test runs,
      ``Database.__init__`` and ``Database.dispose`` are wrapped (restored after) to
      remember, weakly, every Database created and whether it was disposed; a ``Client``
      owns one, so a client never closed is found too. Leaked: a Database never disposed
      (alive, or garbage-collected with its connections left to the collector), or one
      that still holds pooled connections (used again after dispose). This works for
      SQLite and PostgreSQL alike and does not depend on when the garbage collector runs.
    * **The SQLite files the process holds open**, read from ``/proc/self/fd`` (Linux): a
      ``*.db`` (``-wal``, ``-shm``, ``-journal``) file open after the test that no
      descriptor held before it. This sees connections opened without a Database (a raw
      ``sqlite3.connect``, an engine of the test's own) and kept by a live object; it runs
      the garbage collector once before reporting, so that a connection merely waiting to
      be collected is not blamed.

    Counting checked-out connections alone would miss idle pooled ones, and the
    descriptors alone would miss PostgreSQL: hence both. The leaked Databases still alive
    are disposed after the report.
    """
    opened: list[_Opened] = []
    files_before = _open_sqlite_files()
    if not _registries:
        setattr(Database, "__init__", _tracking_init)  # noqa: B010 (mypy: method assigned)
        setattr(Database, "dispose", _tracking_dispose)  # noqa: B010
    _registries.append(opened)
    try:
        yield
    finally:
        del _registries[next(i for i, r in enumerate(_registries) if r is opened)]
        if not _registries:
            setattr(Database, "__init__", _ORIGINAL_INIT)  # noqa: B010
            setattr(Database, "dispose", _ORIGINAL_DISPOSE)  # noqa: B010
    # The test's young garbage goes now: a file, socket or event loop it left unclosed
    # warns (ResourceWarning, an error) in this test's teardown, not in a later test that
    # happens to collect. Older generations are left alone: collecting them all after
    # every test costs more than the suite can spare on a busy machine.
    gc.collect(1)
    if _allowed(request, "databases"):
        return
    findings = _database_findings(opened)
    reported = {entry.where for entry in opened if entry.reported}
    new_files = set(_open_sqlite_files()) - set(files_before) - _reported_files
    if new_files:
        gc.collect()
        still = _open_sqlite_files()
        for path in sorted(new_files & set(still)):
            if _SQLITE_FILE.sub(r".\1", path) not in reported:
                findings.append(
                    f"SQLite file {path} still open (descriptors {still[path]}): "
                    "a connection the test opened was not closed"
                )
                _reported_files.add(path)
    if findings:
        _fail("databases open", findings)


# --- processes -----------------------------------------------------------------------


def _children() -> set[psutil.Process]:
    """This process's descendants (a Process compares by pid and creation time)."""
    try:
        return set(psutil.Process().children(recursive=True))
    except psutil.Error:
        return set()


def _running(proc: psutil.Process) -> bool:
    """Whether ``proc`` still runs (a zombie has exited: only its exit status is left)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _describe_process(proc: psutil.Process) -> str:
    try:
        cmdline = " ".join(proc.cmdline()) or proc.name()
    except psutil.Error:
        cmdline = "?"
    return f"process {proc.pid}: {cmdline}"


@pytest.fixture(autouse=True)
def no_leaked_processes(request: pytest.FixtureRequest, no_open_databases: None) -> Iterator[None]:
    """Fail a test that leaves a child process running.

    Compares this process's descendants (``psutil``, recursively) after the test with
    those before it; a new one has :data:`PROCESS_GRACE_S` to exit (polled). Exited
    children not yet waited for (zombies) count as gone, and are not reaped here: their
    ``Popen`` object owns their exit status. A server that detaches from its starter (the
    PostgreSQL server ``pg_ctl`` starts) is no descendant at all. Leaked processes are
    killed after the report.
    """
    before = _children()
    yield
    if _allowed(request, "processes"):
        return
    new = [proc for proc in _children() - before if _running(proc)]
    deadline = time.monotonic() + PROCESS_GRACE_S
    while new and time.monotonic() < deadline:
        time.sleep(0.02)
        new = [proc for proc in new if _running(proc)]
    if not new:
        return
    findings = [_describe_process(proc) for proc in new]
    for proc in new:
        try:
            proc.kill()
            proc.wait(timeout=PROCESS_GRACE_S)
        except psutil.Error:
            pass
    _fail("child processes running", findings)


# --- threads -------------------------------------------------------------------------


def _describe_thread(thread: threading.Thread) -> str:
    target: Callable[..., object] | None = getattr(thread, "_target", None)
    if target is None:
        kind = type(thread)
        what = f"{kind.__module__}.{kind.__qualname__}.run"
    else:
        module = getattr(target, "__module__", None) or "?"
        what = f"{module}.{getattr(target, '__qualname__', repr(target))}"
    return f"thread {thread.name!r} (target {what}, daemon={thread.daemon})"


@pytest.fixture(autouse=True)
def no_leaked_threads(request: pytest.FixtureRequest, no_leaked_processes: None) -> Iterator[None]:
    """Fail a test that leaves a Python thread running.

    Compares ``threading.enumerate()`` after the test with before it. Each new thread is
    joined until :data:`THREAD_GRACE_S` (in all) has passed: a thread told to stop gets
    the time to finish, and the check waits no longer than it must. Threads Python did not
    start (``_DummyThread``) and those of :data:`ALLOWED_THREADS` are not compared.
    """
    before = set(threading.enumerate())
    yield
    if _allowed(request, "threads"):
        return
    new = [
        thread
        for thread in threading.enumerate()
        if thread not in before
        and not isinstance(thread, threading._DummyThread)
        and not any(thread.name.startswith(prefix) for prefix in ALLOWED_THREADS)
    ]
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in new:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    leaked = [thread for thread in new if thread.is_alive()]
    if leaked:
        findings = [_describe_thread(thread) for thread in leaked]
        _fail(f"threads running {THREAD_GRACE_S:g} s after it ended", findings)


# --- Qt windows ----------------------------------------------------------------------


def _qt_app() -> QApplication | None:
    """The QApplication, when Qt is loaded and there is one."""
    if "PySide6.QtWidgets" not in sys.modules:
        return None
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    return app if isinstance(app, QApplication) else None


def _flush_deletions(app: QApplication) -> None:
    """Delete the objects scheduled with ``deleteLater`` now.

    Outside an event loop nothing else would: a window pytest-qt closed and scheduled for
    deletion would still be listed among the top-level widgets.
    """
    from PySide6.QtCore import QEvent

    app.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)


def _ours(widget: QWidget) -> bool:
    """A widget of the project or its tests, not one of Qt's own helpers (tooltips…)."""
    return not type(widget).__module__.startswith(("PySide6", "shiboken6"))


def _describe_window(widget: QWidget) -> str:
    kind = type(widget)
    state = "visible" if widget.isVisible() else "hidden, never deleted"
    return f"window {kind.__module__}.{kind.__qualname__} titled {widget.windowTitle()!r} ({state})"


def _leaked_windows(app: QApplication, before: dict[int, QWidget]) -> list[QWidget]:
    _flush_deletions(app)
    return [
        widget
        for widget in app.topLevelWidgets()
        if before.get(id(widget)) is not widget and (widget.isVisible() or _ours(widget))
    ]


@pytest.fixture(autouse=True)
def no_leaked_windows(request: pytest.FixtureRequest, no_leaked_threads: None) -> Iterator[None]:
    """Fail a test that leaves a Qt top-level window open (only when a QApplication exists).

    Runs after pytest-qt's cleanup: pytest-qt closes the widgets given to
    ``qtbot.addWidget`` (and schedules their deletion) in its ``pytest_runtest_teardown``
    wrapper, before any fixture is torn down, and this fixture is torn down after every
    fixture the test requested. The objects scheduled for deletion are then deleted, and a
    top-level widget that did not exist before the test is leaked when it is visible, or
    when it is one of the project's own (not a Qt helper such as a tooltip) and still
    exists, hidden, after a garbage collection. Leaked windows are closed and deleted after
    the report.
    """
    app = _qt_app()
    before = {} if app is None else {id(w): w for w in app.topLevelWidgets()}
    yield
    app = _qt_app()
    if app is None or _allowed(request, "windows"):
        return
    leaked = _leaked_windows(app, before)
    if any(not widget.isVisible() for widget in leaked):
        gc.collect()  # a hidden window held only by garbage is on its way out
        leaked = _leaked_windows(app, before)
    if not leaked:
        return
    findings = [_describe_window(widget) for widget in leaked]
    for widget in leaked:
        widget.close()
        widget.deleteLater()
    _flush_deletions(app)
    _fail("Qt windows open", findings)
