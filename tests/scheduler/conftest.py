"""Fixtures of the scheduler tests: a real worker with a real scheduler on a clock we move.

A :class:`Rig` is the production wiring (``attach_scheduler``) around an in-thread worker
whose database poll is slowed to 30 s, so that what wakes runs on time in these tests is
the scheduler's jobs (APScheduler, real threads), not the poll. The clock is a
:class:`FakeClock` unless a test asks for real time; the store writes its bookkeeping
times with the same clock, so step times read in the journal are clock times.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.engine.ports import Clock, ModelPort, ModelRequest, SystemClock
from desktop_agent.scheduler.service import SchedulerConfig, SchedulerService
from desktop_agent.tools.registry import ToolRegistry
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.scheduling import attach_scheduler
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import FakeClock, Reply
from tests.helpers.polling import wait_until
from tests.helpers.sqlite_template import migrated_database

__all__ = ["wait_until"]  # the scheduler tests import it from here

REPO = Path(__file__).resolve().parents[2]

FAST = SchedulerConfig(sync_s=0.1, housekeeping_s=0.2, stuck_after_s=None)
"""Sync and housekeeping several times a second (production: every 2 s and 30 s)."""


def goal_number(request_messages: object) -> int:
    """The number in the goal of a scripted run ("timer 17" → 17)."""
    match = re.search(r"Goal: \D*(\d+)", str(request_messages))
    assert match, request_messages
    return int(match.group(1))


def answered(request_messages: object) -> bool:
    """Whether the request carries a tool result (the run is past its first call)."""
    return "tool_result" in str(request_messages)


def ask_then_done(req: ModelRequest) -> Reply:
    """A model that asks the analyst once, then finishes: every run waits for an answer."""
    if answered(req.messages):
        return Reply("done")
    return Reply("check", [("ask_user", {"question": "ok?"})])


@dataclass
class Rig:
    """A worker with its scheduler, in threads of the test process."""

    client: Client
    clock: Clock
    worker: Worker
    service: SchedulerService
    thread: threading.Thread
    sched: Scheduling = field(init=False)

    def __post_init__(self) -> None:
        now = self.clock.now
        self.sched = Scheduling(self.client, now)

    def runs(self, **where: object) -> list[Run]:
        """Runs whose attributes equal ``where``, oldest first."""
        runs = self.client.runs(limit=100_000)
        picked = [r for r in runs if all(getattr(r, k) == v for k, v in where.items())]
        return sorted(picked, key=lambda r: (r.created_at, r.id))

    def statuses(self) -> dict[str, RunStatus]:
        """Every run's status, read cheaply (tests poll this while the worker works)."""
        with self.client.store.db.read() as conn:
            rows = conn.exec_driver_sql("SELECT id, status FROM runs").all()
        return {str(r[0]): RunStatus(r[1]) for r in rows}

    def status(self, run_id: str) -> RunStatus:
        """The run's status now."""
        return self.client.run(run_id).status

    def settle(self, worker: bool = True) -> None:
        """Let due jobs run and the worker go idle (for assertions that nothing happened).

        Waits through a full sync and housekeeping round first (two more of each finish: the
        first may have begun before the call), so that a clock moved just before has been seen.
        """
        rounds = self.service.rounds
        before = dict(rounds)
        wait_until(
            lambda: (
                rounds["sync"] >= before["sync"] + 2
                and rounds["housekeeping"] >= before["housekeeping"] + 2
            ),
            what="a full sync and housekeeping round of the scheduler",
        )
        assert self.service.wait_idle(30)
        if not worker:
            return
        wait_until(lambda: not self.worker._in_flight, what="the worker to go idle")
        assert self.service.wait_idle(30)


RigFactory = Callable[..., Rig]


@pytest.fixture
def client(db_path: Path) -> Iterator[Client]:
    """The suite's client, on ``synchronous=NORMAL``.

    These tests commit thousands of steps from eight threads; with FULL the fsyncs alone
    take most of the suite's time budget. WAL with NORMAL loses nothing when a process is
    killed (only a power cut could cost the last commits), which is what the tests here do.
    """
    if not db_path.exists() and not (db_path.parent / "database.url").exists():
        migrated_database(db_path)  # as the first open would leave it, without migrating
    settings = Settings(default_max_cost_usd=None, default_max_steps=None, durability="NORMAL")
    settings.save(db_path)
    c = Client(db_path, settings)
    yield c
    c.close()


@pytest.fixture
def clock() -> FakeClock:
    """A clock only the test moves."""
    return FakeClock()


@pytest.fixture
def make_rig(client: Client, clock: FakeClock) -> Iterator[RigFactory]:
    """Build and start rigs; every one is stopped at teardown."""
    rigs: list[Rig] = []

    def make(
        model: ModelPort,
        *,
        real_time: bool = False,
        tools: ToolRegistry | None = None,
        engine_settings: Settings | None = None,
        config: SchedulerConfig = FAST,
        poll_s: float = 30.0,
        max_runs: int = 8,
        on_stuck: Callable[..., None] | None = None,
    ) -> Rig:
        the_clock: Clock = SystemClock() if real_time else clock
        client.store.now = the_clock.now
        settings = engine_settings or client.settings
        executor = build_executor(
            client.store,
            client.settings,
            clock=the_clock,
            tools=tools,
            model_for=lambda _name: model,
            config=EngineConfig(settings=settings),
        )
        worker = Worker(
            client.store,
            executor,
            WorkerConfig(max_runs=max_runs, poll_s=poll_s),
            clock=the_clock,
        )
        service = attach_scheduler(worker, client.settings, config=config, on_stuck=on_stuck)
        service.start()
        thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
        thread.start()
        rig = Rig(client, the_clock, worker, service, thread)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.worker.stop()
        rig.thread.join(timeout=30)
        rig.service.stop()
        assert not rig.thread.is_alive()


# --------------------------------------------------------------------------- child workers

COUNTING_WORKER = """
import os
import sys

from desktop_agent.cli import commands as cli
from desktop_agent.scheduler.service import SchedulerService
from desktop_agent.worker.worker import Worker

ROUNDS = os.environ["TEST_ROUNDS_FILE"]


def note(kind):
    fd = os.open(ROUNDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, kind.encode() + b"\\n")
    finally:
        os.close(fd)


finished, tick = SchedulerService._finished, Worker.tick


def counted_finished(self, kind):
    finished(self, kind)
    note(kind)


def counted_tick(self):
    busy = tick(self)
    note("poll")
    return busy


SchedulerService._finished, Worker.tick = counted_finished, counted_tick
sys.exit(cli.main(sys.argv[1:]))
"""
"""``desktop-agent ... worker`` that also appends each finished round (scheduler sync,
housekeeping, folder scan; worker poll) to a file, one line each, so that a test can wait
until the child has looked again instead of sleeping."""


@dataclass
class Children:
    """Worker child processes (``python -m desktop_agent --db DB worker``) of one test."""

    db: Path
    logs: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @contextlib.contextmanager
    def worker(self, offset_s: float = 0.0, **env: str) -> Iterator[subprocess.Popen[bytes]]:
        """A worker whose clock runs ``offset_s`` ahead; SIGKILLed and reaped on exit."""
        full = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
            ),
            "DESKTOP_AGENT_DEMO_DELAY": "0.01",
            "DESKTOP_AGENT_CLOCK_OFFSET": str(offset_s),
            **env,
        }
        full.pop("DESKTOP_AGENT_CRASH_AT", None)
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"worker-{len(self.started) + 1}.log"
        full["TEST_ROUNDS_FILE"] = str(self._rounds_path(len(self.started) + 1))
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", COUNTING_WORKER, "--db", str(self.db), "worker"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=full,
                cwd=REPO,
            )
        self.started.append(proc)
        try:
            yield proc
        finally:
            kill(proc)

    def log(self) -> str:
        """The newest child's log, for failure messages."""
        path = self.logs / f"worker-{len(self.started)}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _rounds_path(self, number: int) -> Path:
        return self.logs / f"rounds-{number}.txt"

    def rounds(self) -> Counter[str]:
        """Rounds the newest child finished: ``sync``, ``housekeeping``, ``scan``, ``poll``."""
        path = self._rounds_path(len(self.started))
        return Counter(path.read_text().split() if path.exists() else [])

    def wait_rounds(self, since: Counter[str] | None = None, **more: int) -> None:
        """Wait until the newest child finished ``more`` rounds of each kind.

        Counted after ``since`` (from its start if not given): it has looked again since.
        """
        base = since or Counter()
        wait_until(
            lambda: all(self.rounds()[kind] >= base[kind] + n for kind, n in more.items()),
            what=f"the child worker's rounds {more} after {dict(base)}",
            last=lambda: f"{dict(self.rounds())}\n{self.log()}",
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a child we started (if still alive) and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture
def children(client: Client, tmp_path: Path) -> Iterator[Children]:
    """Worker children over the test database; none survives the test."""
    kids = Children(client.db_path, tmp_path / "logs")
    yield kids
    for proc in kids.started:
        kill(proc)
