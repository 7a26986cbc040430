"""Storage faults: a full disk, a database locked by another process, a damaged file.

Each test injects the fault into a real SQLite file while a real worker runs a demo run,
then checks three things: the user is told (the run's status message, the CLI's one-line
error, the worker log), nothing committed is lost (every step recorded before the fault is
still there, unchanged), and the run finishes once the fault is gone.

* Full disk, simulated: ``PRAGMA max_page_count`` on every connection of the worker (the
  ``DESKTOP_AGENT_MAX_PAGES`` seam), with a ballast table whose deletion gives space back.
* Full disk, real: the data folder on a 1 MB tmpfs filled with a ballast file (``ENOSPC``);
  skipped where mounting is not allowed.
* Locked: a child process holds ``BEGIN IMMEDIATE`` for seconds; busy timeouts are shortened
  with ``DESKTOP_AGENT_BUSY_TIMEOUT_MS``.
* Damaged: pages in the middle of the file overwritten; ``desktop-agent db restore`` puts the
  newest backup back (see also ``test_backups.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import JSON, EffectClass, RunStatus, StepStatus
from desktop_agent.engine.ports import ModelPort, ToolContext, ToolResult
from desktop_agent.llm.demo import DemoModel
from desktop_agent.persistence.db import BUSY_TIMEOUT_ENV, MAX_PAGES_ENV, Database, DbSettings
from desktop_agent.persistence.store import SqlStore
from desktop_agent.tools.registry import ToolRegistry
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import QuietTool, ScriptedModel, call_once
from tests.helpers.polling import wait_for, wait_status, wait_until

REPO = Path(__file__).resolve().parents[2]
SOURCES = {f"s{i}.md": f"# Source {i}\nSource {i} finds {i * 3}% growth. More.\n" for i in range(3)}


class Lab:
    """A data folder, a workspace with three sources, a client; workers in threads."""

    def __init__(self, data: Path, ws: Path) -> None:
        self.db_path = data / "desktop-agent.db"
        self.settings = Settings(
            default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False
        )
        self.settings.save(self.db_path)
        self.client = Client(self.db_path, self.settings)
        self.ws = ws
        ws.mkdir(parents=True, exist_ok=True)
        for name, text in SOURCES.items():
            (ws / name).write_text(text, encoding="utf-8")
        self.workers: list[tuple[Worker, threading.Thread, Database]] = []

    def start_worker(
        self,
        *,
        delay: float = 0.02,
        model: ModelPort | None = None,
        tools: ToolRegistry | None = None,
        **config: Any,
    ) -> Worker:
        """A worker with its own database handle (so env seams apply to it alone).

        The demo model drives its runs unless ``model`` is given.
        """
        db = Database(DbSettings.for_path(self.db_path))
        store = SqlStore(db)
        executor = build_executor(
            store,
            self.settings,
            tools=tools,
            model_for=lambda _name: model or DemoModel(delay=delay),
        )
        options: dict[str, Any] = {"poll_s": 0.02, "storage_retry_s": 0.2, "backup_every_s": 0}
        cfg = WorkerConfig(**{**options, **config})
        worker = Worker(store, executor, cfg)
        thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
        thread.start()
        self.workers.append((worker, thread, db))
        return worker

    def close(self) -> None:
        for worker, thread, db in self.workers:
            worker.stop()
            thread.join(timeout=30)
            assert not thread.is_alive(), "the worker did not stop"
            db.dispose()
        self.client.close()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path / "data", tmp_path / "ws")
    yield lab
    lab.close()


Record = tuple[int, str, str, str, Any]


def committed(client: Client, run_id: str) -> list[Record]:
    """The finished steps of the journal (what a crash or a fault must never lose)."""
    return [
        (s.seq, str(s.kind), s.name, str(s.status), s.output)
        for s in client.steps(run_id)
        if s.status != StepStatus.STARTED
    ]


def assert_finished_intact(lab: Lab, run_id: str, before: list[Record]) -> None:
    run = lab.client.run(run_id)
    assert run.status == RunStatus.COMPLETED, run.status_message
    steps = lab.client.steps(run_id)
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert all(s.status == StepStatus.COMPLETED for s in steps)
    after = {r[0]: r for r in committed(lab.client, run_id)}
    for record in before:  # nothing committed before the fault was lost or changed
        assert after[record[0]] == record
    notes = (lab.ws / "notes.md").read_text(encoding="utf-8")
    for name in SOURCES:  # each idempotent effect happened exactly once
        assert notes.count(f"**{name}**") == 1, notes
    assert "## Conclusions" in (lab.ws / "report.md").read_text(encoding="utf-8")


def page_count(db: Database) -> int:
    with db.read() as conn:
        return int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)


# --------------------------------------------------------------------------- disk full


def test_full_database_pauses_the_run_and_it_resumes_when_space_returns(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="desktop_agent.worker.worker")
    with lab.client.store.db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE ballast (b BLOB)")
        for _ in range(40):
            conn.exec_driver_sql("INSERT INTO ballast VALUES (randomblob(3000))")
    run = lab.client.start_run("Summarise the sources", model="demo", workspace=lab.ws)
    # Two pages more, for the first model call (it also keeps the run's tool definitions,
    # about 5 KB); the free room left in the journal's pages then takes a few steps.
    monkeypatch.setenv(MAX_PAGES_ENV, str(page_count(lab.client.store.db) + 2))
    lab.start_worker()
    monkeypatch.delenv(MAX_PAGES_ENV)

    wait_status(lab.client, run.id, RunStatus.PAUSED, what="a pause")
    paused = lab.client.run(run.id)
    assert paused.status_message.startswith("Paused: the disk is full"), paused.status_message
    assert "nothing committed was lost" in paused.status_message.lower()
    assert "resumes by itself" in paused.status_message
    before = committed(lab.client, run.id)
    assert before, "the run made no progress before the disk filled up"
    # While the disk stays full, retries keep failing and pausing again; nothing is lost.
    retrying = "retrying after the storage problem"
    # A second retry comes only after the first one failed and paused the run again.
    wait_until(lambda: caplog.text.count(retrying) >= 2, what="two retries")
    assert lab.client.run(run.id).status != RunStatus.COMPLETED
    assert committed(lab.client, run.id)[: len(before)] == before
    assert "storage problem" in caplog.text and "disk is full" in caplog.text

    with lab.client.store.db.write() as conn:  # space comes back
        conn.exec_driver_sql("DELETE FROM ballast")
    wait_status(lab.client, run.id, RunStatus.COMPLETED, what="completion")
    assert_finished_intact(lab, run.id, before)


class FillsTheDisk(QuietTool):
    """An unsafe test tool: while it acts, another program fills the disk up.

    It sends nothing anywhere; it counts its executions. Its result is long, so that
    recording it needs room the database no longer has.
    """

    name = "send_report"
    description = "Send the report (cannot be undone)."
    effect = EffectClass.UNSAFE

    def __init__(self, fill: Callable[[], None]) -> None:
        self.fill = fill
        self.sent = 0

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        self.sent += 1
        self.fill()
        return ToolResult("Report delivered. " + "Receipt line. " * 4000)


def test_an_outcome_the_full_disk_kept_from_the_journal_is_put_to_the_analyst_as_such(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The effect ran, its outcome could not be written: the run asks the analyst.

    After the automatic resume it says why it does not know (not "the worker stopped").
    """
    lab.settings.ask_unsafe = False
    lab.settings.save(lab.db_path)
    with lab.client.store.db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE ballast (b BLOB)")
    limit = page_count(lab.client.store.db) + 400  # room for the run's first steps, not more

    def fill() -> None:  # another program takes every page the worker may still use
        while page_count(lab.client.store.db) < limit:
            with lab.client.store.db.write() as conn:
                conn.exec_driver_sql("INSERT INTO ballast VALUES (randomblob(16000))")

    tool = FillsTheDisk(fill)
    lab.client._tools.add(tool)
    run = lab.client.start_run("Send the report", model="demo", tools=["send_report"])
    monkeypatch.setenv(MAX_PAGES_ENV, str(limit))
    lab.start_worker(
        model=ScriptedModel(call_once("send_report", saying="Sending the report.", then="Sent.")),
        tools=ToolRegistry([tool]),
    )
    monkeypatch.delenv(MAX_PAGES_ENV)

    def pause_message() -> str | None:
        now = lab.client.run(run.id)
        return now.status_message if now.status == RunStatus.PAUSED else None

    paused = wait_for(pause_message, what="a pause")
    assert paused.startswith("Paused: the disk is full"), paused
    assert "The outcome of step 2 could not be recorded: unless its effect can be " in paused
    step = lab.client.steps(run.id)[-1]
    assert (step.seq, step.name, step.status) == (2, "send_report", StepStatus.STARTED)
    with lab.client.store.db.write() as conn:  # space comes back; the run resumes by itself
        conn.exec_driver_sql("DELETE FROM ballast")

    wait_status(lab.client, run.id, RunStatus.NEEDS_ATTENTION, what="doubt")
    held = lab.client.run(run.id)
    assert held.attention_seq == 2
    assert held.status_message == (
        "Step 2 (send_report) ran, but the disk was full when its outcome was to be "
        "recorded: whether it happened is unknown, and it cannot be safely repeated. Probe "
        "it, mark it done, retry it with the same idempotency key, or skip it."
    )
    assert tool.sent == 1
    lab.client.resolve(run.id, "mark_done")
    wait_status(lab.client, run.id, RunStatus.COMPLETED, what="completion")
    assert tool.sent == 1


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs (root only); the test is skipped where it cannot be mounted."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {done.stderr.strip()}")
    try:
        yield mount
    finally:  # a file still open a moment after the test keeps the mount busy
        wait_until(
            lambda: not subprocess.run(["umount", str(mount)], capture_output=True).returncode,
            what=f"the small disk at {mount.name} to unmount",
            poll=0.1,
        )


def test_real_enospc_pauses_the_run_and_it_resumes_when_space_returns(
    small_disk: Path, tmp_path: Path
) -> None:
    lab = Lab(small_disk / "data", tmp_path / "ws")
    try:
        run = lab.client.start_run("Summarise the sources", model="demo", workspace=lab.ws)
        worker = lab.start_worker(delay=0.05)
        wait_until(lambda: lab.client.run(run.id).last_seq >= 3, what="first steps")
        ballast = small_disk / "ballast"
        fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        with contextlib.suppress(OSError):  # fill the disk up
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        # The worker fails to commit (the run's step or its own poll), and keeps failing.
        wait_until(
            lambda: run.id in worker._storage_backoff or worker._storage_problem,
            what="the worker to hit the full disk",
        )
        polls = worker.polls
        wait_until(lambda: worker.polls >= polls + 5, what="five more worker polls")
        assert lab.client.run(run.id).status != RunStatus.COMPLETED
        # The user is told, even though nothing can be written to record it.
        warning = lab.client.storage_warning()
        assert warning is not None and "disk holding the database is full" in warning
        shown = subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(lab.db_path), "show", run.id],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=False,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert "warning: the disk holding the database is full" in shown.stderr
        before = committed(lab.client, run.id)
        ballast.unlink()  # space comes back
        wait_status(lab.client, run.id, RunStatus.COMPLETED, timeout=60, what="completion")
        assert_finished_intact(lab, run.id, before)
    finally:
        lab.close()


# --------------------------------------------------------------------------- locked


class Locker:
    """A child process that takes the database's write lock when told, until told again.

    Started before it is needed (its start-up is not in the way), it takes the lock at
    :meth:`lock` and keeps it until :meth:`release`: nothing depends on how fast the
    machine is.
    """

    CODE = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "sys.stdin.readline()\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n"
        "c.execute('COMMIT')\n"
    )

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.CODE, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def lock(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("lock\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write("release\n")
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


class GatedModel(DemoModel):
    """The demo model, held before its second answer until :attr:`gate` opens."""

    def __init__(self) -> None:
        super().__init__(delay=0.02)
        self.gate = threading.Event()
        self.calls = 0

    def complete(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            assert self.gate.wait(90), "the test never opened the gate"
        return super().complete(request, **kwargs)


def _cli(db: Path, *args: str, busy_ms: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), BUSY_TIMEOUT_ENV: str(busy_ms)}
    return subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _reap(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_database_locked_by_another_process_writers_wait_retry_and_the_user_is_told(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="desktop_agent.worker.worker")
    locker = Locker(lab.db_path)
    model = GatedModel()
    impatient = patient = reader = None
    try:
        run = lab.client.start_run("Summarise the sources", model="demo", workspace=lab.ws)
        monkeypatch.setenv(BUSY_TIMEOUT_ENV, "300")  # for the worker's database handle
        lab.start_worker(model=model)
        wait_until(lambda: model.calls >= 2, what="the run's second model call")
        locker.lock()  # the run is held mid-way: it cannot have finished
        model.gate.set()
        wait_until(
            lambda: "locked by another process" in caplog.text,
            what="the worker to meet the lock and say what held it up",
        )
        # A short-fused command is refused at once, in one line that says why.
        impatient = _cli(lab.db_path, "pause", run.id, busy_ms=500)
        # A patient one waits for the lock (SQLite's busy handler retries) and goes through.
        patient = _cli(lab.db_path, "steer", run.id, "mind the dates", busy_ms=90_000)
        reader = _cli(lab.db_path, "show", run.id, busy_ms=500)  # WAL readers never wait
        _out, err = impatient.communicate(timeout=60)
        assert impatient.returncode == 2, err
        assert err.strip().splitlines() == [
            "desktop-agent: error: the database is locked by another process and stayed "
            "locked for 0.5 s; close other desktop-agent copies or wait"
        ]
        shown, _ = reader.communicate(timeout=60)
        assert reader.returncode == 0 and run.id in shown
        assert lab.client.run(run.id).status == RunStatus.RUNNING
        before = committed(lab.client, run.id)
        assert locker.release() == 0
        _out, err = patient.communicate(timeout=90)
        assert patient.returncode == 0, err
    finally:
        model.gate.set()
        _reap(locker.proc, *(p for p in (impatient, patient, reader) if p is not None))

    wait_status(lab.client, run.id, RunStatus.COMPLETED, timeout=60, what="completion")
    assert_finished_intact(lab, run.id, before)
    notes = [s for s in lab.client.steps(run.id) if s.kind == "steer"]
    assert [s.input["text"] for s in notes] == ["mind the dates"]  # the waiting write landed
    assert all(t.is_alive() for _w, t, _d in lab.workers)  # the worker rode it out


# --------------------------------------------------------------------------- damaged


def _damage(path: Path) -> None:
    """Overwrite pages in the middle of the file (the header stays intact)."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(4096 * 2)
        f.write(os.urandom(max(4096, min(size - 8192, 4096 * 6))))


def test_damaged_database_is_reported_with_the_offer_and_restored_from_the_backup(
    lab: Lab,
) -> None:
    first = lab.client.start_run("Summarise the sources", model="demo", workspace=lab.ws)
    lab.start_worker(backup_every_s=3600)
    wait_status(lab.client, first.id, RunStatus.COMPLETED, what="first run")
    lab.close()
    lab.workers.clear()
    made = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(lab.db_path), "db", "backup"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    _damage(lab.db_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(lab.db_path), *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=False,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    broken = cli("runs")
    assert broken.returncode == 2
    (line,) = broken.stderr.strip().splitlines()
    assert "is damaged" in line and "`desktop-agent db restore` puts back the newest backup" in line
    listed = cli("db", "backups")
    assert listed.returncode == 0 and "manual" in listed.stdout and "scheduled" in listed.stdout
    refused = cli("db", "restore")  # not without --yes when nobody can be asked
    assert refused.returncode == 2 and "--yes" in refused.stderr
    restored = cli("db", "restore", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert "restored" in restored.stdout and "kept as desktop-agent.db.damaged-" in restored.stdout
    assert list(lab.db_path.parent.glob("desktop-agent.db.damaged-*"))  # kept, not deleted
    runs = cli("runs", "--json")
    assert runs.returncode == 0, runs.stderr
    assert '"status": "completed"' in runs.stdout and first.id in runs.stdout
    lab.client = Client(lab.db_path, lab.settings)  # for the fixture's close()


# --------------------------------------------------------------------------- unmapped


class _RefusedOnce(DemoModel):
    """The demo model, but its first call meets a database that refuses connections.

    Raised the way SQLAlchemy raises it from a path that does not turn it into a
    StorageError (a PostgreSQL server restarting).
    """

    def __init__(self) -> None:
        super().__init__(delay=0.01)
        self.refused = False

    def complete(self, request: Any, **kwargs: Any) -> Any:
        if not self.refused:
            self.refused = True
            raise OperationalError(
                "SELECT 1", {}, Exception("connection failed: Connection refused")
            )
        return super().complete(request, **kwargs)


def test_a_database_failure_no_store_method_mapped_pauses_the_run_and_it_goes_on(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="desktop_agent.worker.worker")
    model = _RefusedOnce()
    run = lab.client.start_run("Summarise the sources", model="demo", workspace=lab.ws)
    lab.start_worker(model=model)
    wait_status(lab.client, run.id, RunStatus.COMPLETED, timeout=120, what="the run's end")
    assert model.refused
    assert "storage problem: database error: connection failed" in caplog.text
    assert "internal error" not in caplog.text.lower()
    assert "retrying after the storage problem" in caplog.text
