"""Shared machinery of the crash tests: real worker child processes and journal comparison.

Every worker here is ``python -m desktop_agent --db DB worker --until-idle`` started with
``subprocess.Popen``; crashes are SIGKILLs, sent either by the child itself at a named
crash point (``DESKTOP_AGENT_CRASH_AT``) or by the test at a random moment. Every child is
killed (if still alive) and reaped in a ``finally`` block: no orphan survives a test.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy.engine import make_url

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus, Step, StepKind, StepStatus
from desktop_agent.tools.registry import CONTROL_TOOL_NAMES
from tests.helpers.polling import wait_until
from tests.helpers.sqlite_template import migrated_database

REPO_ROOT = Path(__file__).resolve().parents[2]

CRASH_ENV = "DESKTOP_AGENT_CRASH_AT"
"""Read by :mod:`desktop_agent.worker.crash`."""

GOAL = "Summarise the sources"

WORKER_TIMEOUT_S = 60.0
"""Longest a worker child may take to finish or crash before the test fails."""

SOURCES_3 = {
    "alpha.md": "# Alpha\nAlpha says the market grew 4% in 2025. More follows.\n",
    "beta.txt": "Beta reports churn fell. More detail follows.\n",
    "gamma.md": "Gamma: three vendors lead. Others trail far behind.\n",
}

SOURCES_8 = {
    f"src-{i:02d}.md": f"# Source {i}\nSource {i} finds {i * 7 % 13} signals of demand. Details.\n"
    for i in range(8)
}


def lab_settings() -> Settings:
    """Settings of every crash-test database: no budgets, no approvals (crashes are tested)."""
    return Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        ask_overwrite=False,
        ask_unsafe=False,
    )


def make_workspace(path: Path, sources: Mapping[str, str]) -> Path:
    """A fresh workspace holding ``sources``."""
    path.mkdir(parents=True)
    for name, text in sources.items():
        (path / name).write_text(text, encoding="utf-8")
    return path


# Temporary files of desktop_agent.tools.files._atomic_write (mkstemp ".tmp-*").
STRAY_TEMP = re.compile(r"(^|/)\.[^/]*\.tmp$|(^|/)\.tmp-")


def stray_temp_files(files: Mapping[str, bytes]) -> list[str]:
    """Temporary files an atomic write left behind when it was killed before its rename."""
    return sorted(name for name in files if STRAY_TEMP.search(name))


def workspace_files(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (hidden ones included), by relative path."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@dataclass
class Lab:
    """A database, its client and a folder for workspaces and worker logs."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.db = self.root / "data" / "desktop-agent.db"
        if not self.db.exists() and not (self.db.parent / "database.url").exists():
            migrated_database(self.db)  # as the first open would leave it, without migrating
        settings = lab_settings()
        settings.save(self.db)
        self.client = Client(self.db, settings)
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._children = 0

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()

    def start(self, workspace: Path, goal: str = GOAL) -> str:
        """Queue a demo run over ``workspace``; returns its id."""
        return self.client.start_run(goal, model="demo", workspace=workspace).id

    # ------------------------------------------------------------------ children

    @contextlib.contextmanager
    def child(self, **env: str) -> Iterator[subprocess.Popen[bytes]]:
        """A worker child process (``--until-idle``), killed and reaped on exit."""
        self._children += 1
        full = {
            **os.environ,
            "DESKTOP_AGENT_DEMO_DELAY": "0.01",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
            **self.env,
            **env,
        }
        if not full.get(CRASH_ENV):
            full.pop(CRASH_ENV, None)
        log_path = self.logs / f"worker-{self._children}.log"
        cmd = [sys.executable, "-m", "desktop_agent", "--db", str(self.db), "worker"]
        cmd.append("--until-idle")
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=full, cwd=REPO_ROOT
            )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def run_worker(self, **env: str) -> int:
        """Run a worker child to its end (idle, or killed at its crash point)."""
        timeout = WORKER_TIMEOUT_S
        with self.child(**env) as proc:
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"the worker did not finish in {timeout}s:\n{self.last_log()}"
                ) from None

    def crash_at(self, point: str, nth: int = 1, **env: str) -> None:
        """Run a worker that must SIGKILL itself the ``nth`` time it reaches ``point``."""
        rc = self.run_worker(**{CRASH_ENV: f"{point}:{nth}", **env})
        assert rc == -signal.SIGKILL, f"no crash at {point}:{nth} (exit {rc}):\n{self.last_log()}"
        self.wait_sessions_ended()

    def finish(self, run_ids: Sequence[str], **env: str) -> None:
        """Run an uninterrupted worker; every run must then be completed."""
        rc = self.run_worker(**env)
        assert rc == 0, f"worker exit {rc}:\n{self.last_log()}"
        for run_id in run_ids:
            run = self.client.run(run_id)
            assert run.status == RunStatus.COMPLETED, (run.status, run.status_message)

    def wait_sessions_ended(self) -> None:
        """On PostgreSQL, wait until the server has ended the sessions of killed workers.

        A statement a worker sent just before its SIGKILL is still carried out by its
        server process, which notices the client gone only afterwards: until then a
        commit of the dead worker can still land, after the test has read the journal.
        Every session on the database but this process's own must be gone. (SQLite has
        nothing of the kind: a killed process's commit is in the file or not at all.)
        """
        db = self.client.store.db
        if db.is_sqlite:
            return
        server_port = make_url(db.settings.url).port

        def others() -> list[int]:
            ours = {
                c.laddr.port
                for c in psutil.Process().net_connections(kind="tcp")
                if c.raddr and c.raddr.port == server_port
            }
            with db.read() as conn:
                ports = conn.exec_driver_sql(
                    "SELECT client_port FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).scalars()
                return [p for p in ports if p not in ours]

        wait_until(lambda: not others(), what="killed workers' server sessions to end", last=others)

    def last_log(self) -> str:
        """The tail of the newest worker log, for failure messages."""
        path = self.logs / f"worker-{self._children}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    # ------------------------------------------------------------------ state

    def steps(self, run_id: str) -> list[Step]:
        """The run's journal."""
        return self.client.steps(run_id)

    def run(self, run_id: str) -> Run:
        """The run."""
        return self.client.run(run_id)


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run: its journal and the workspace it left."""

    steps: list[Step]
    files: dict[str, bytes]

    @property
    def protocol_steps(self) -> list[Step]:
        """Steps that pass through intent, effect and outcome (and their crash points)."""
        return [s for s in self.steps if is_protocol_step(s)]

    def nth(self, name: str, occurrence: int = 1) -> int:
        """1-based index, among protocol steps, of the ``occurrence``-th step called ``name``."""
        seen = 0
        for index, step in enumerate(self.protocol_steps, start=1):
            if step.name == name:
                seen += 1
                if seen == occurrence:
                    return index
        raise AssertionError(f"the reference run has no {name} #{occurrence}")


def is_protocol_step(step: Step) -> bool:
    """Model calls and effectful tool calls (control tools complete in a single commit)."""
    if step.kind == StepKind.MODEL_CALL:
        return True
    return step.kind == StepKind.TOOL_CALL and step.name not in CONTROL_TOOL_NAMES


def comparable(step: Step) -> tuple[Any, ...]:
    """What must match an uninterrupted run: timestamps, attempts, salvage excluded."""
    return (step.seq, str(step.kind), step.name, str(step.status), step.output, step.input)


def compare_journal(steps: Sequence[Step], ref: Sequence[Step]) -> set[int]:
    """Assert ``steps`` equal ``ref`` exactly; returns the seqs that ran more than once."""
    assert [s.seq for s in steps] == [s.seq for s in ref], (
        f"journal seqs {[s.seq for s in steps]} != reference {[s.seq for s in ref]}"
    )
    for step, expected in zip(steps, ref, strict=True):
        assert comparable(step) == comparable(expected), (
            f"step {step.seq} differs from the uninterrupted run:\n"
            f"  got      {comparable(step)}\n  expected {comparable(expected)}"
        )
    return {s.seq for s in steps if s.attempt > 1}


def assert_notes_once_per_source(files: Mapping[str, bytes], sources: Mapping[str, str]) -> None:
    """notes.md holds exactly one note per source: no effect lost, none doubled."""
    lines = files["notes.md"].decode().splitlines()
    assert len(lines) == len(sources), lines
    for name in sources:
        assert sum(f"**{name}**" in line for line in lines) == 1, (name, lines)


def reference_run(root: Path, sources: Mapping[str, str], **env: str) -> Reference:
    """Run the demo over ``sources`` uninterrupted in a worker child."""
    lab = Lab(root)
    try:
        ws = make_workspace(root / "ws", sources)
        run_id = lab.start(ws)
        lab.finish([run_id], **env)
        steps = lab.steps(run_id)
        assert all(s.status == StepStatus.COMPLETED and s.attempt == 1 for s in steps)
        return Reference(steps, workspace_files(ws))
    finally:
        lab.close()
