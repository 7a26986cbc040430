"""Worker child processes that a test freezes (SIGSTOP) past their lease and wakes again.

Every worker is ``python -m tests.fencing.child_worker DB SCENARIO LEASE_S`` (production
wiring, a short lease). A frozen worker keeps its pid and its sockets; its lease runs out
because its heartbeat stops. Every child is continued, killed if still alive and reaped
when the test ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunEvent, Step
from tests.helpers.sqlite_locks import stop_outside_writes

REPO = Path(__file__).resolve().parents[2]

LEASE_S = 1.0
"""The children's lease: a frozen worker loses its run a few seconds later."""

EFFECT_TIMEOUT_S = 4.0
"""The mail and HTTP timeouts of the children: a lease must outlast one effect."""

CHILD_TIMEOUT_S = 60.0
"""Longest a worker child may take to finish its runs before the test fails."""


def lab_settings(**more: object) -> Settings:
    """No budgets, no approvals (fencing is the subject), short effect timeouts."""
    return Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        ask_unsafe=False,
        ask_overwrite=False,
        allow_private_fetch=True,
        smtp_timeout_s=EFFECT_TIMEOUT_S,
        http_timeout_s=EFFECT_TIMEOUT_S,
        **more,
    )


@dataclass
class FenceLab:
    """One database, its client, and the worker children of a test."""

    root: Path
    scenario: str
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.db = self.root / "data" / "agent.db"
        self.log = self.root / "workers.log"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.client: Client | None = None

    def open(self, settings: Settings) -> Client:
        """Write the settings and open the client."""
        settings.save(self.db)
        self.client = Client(self.db, settings)
        return self.client

    @property
    def c(self) -> Client:
        """The client (after :meth:`open`)."""
        assert self.client is not None
        return self.client

    # ------------------------------------------------------------------ children

    def start(self) -> subprocess.Popen[bytes]:
        """Start a worker child; it exits once no run is runnable."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "DESKTOP_AGENT_CRASH"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            PYTHONWARNINGS="ignore::DeprecationWarning",
            **self.env,
        )
        argv = [
            sys.executable,
            "-m",
            "tests.fencing.child_worker",
            str(self.db),
            self.scenario,
            str(LEASE_S),
        ]
        with self.log.open("ab") as out:
            out.write(f"\n=== worker {len(self.procs) + 1}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=REPO
            )
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        """Wait for a child to exit by itself; it must exit cleanly."""
        try:
            rc = proc.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a worker did not finish:\n{self.tail()}") from None
        assert rc == 0, f"worker exit {rc}:\n{self.tail()}"

    def run_worker(self) -> None:
        """Run one more worker child to its end."""
        self.finish(self.start())

    def close(self) -> None:
        """Continue, kill and reap every child still alive; close the client."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if self.client is not None:
            self.client.close()

    def tail(self) -> str:
        """The end of the children's log, for failure messages."""
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    # ------------------------------------------------------------------ freezing

    def freeze(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGSTOP the child: it keeps its pid and sockets, its heartbeat stops.

        Never inside a write transaction of its other threads, which would lock the
        other worker out (see :mod:`tests.helpers.sqlite_locks`).
        """
        assert stop_outside_writes(self.db, proc.pid), "the worker kept the write lock"

    @staticmethod
    def wake(proc: subprocess.Popen[bytes]) -> None:
        """SIGCONT the child: it goes on from where it was frozen."""
        os.kill(proc.pid, signal.SIGCONT)

    # ------------------------------------------------------------------ state

    def steps(self, run_id: str) -> list[Step]:
        """The run's journal."""
        return self.c.steps(run_id)

    def events(self, run_id: str) -> list[RunEvent]:
        """The run's events."""
        return self.c.store.run_events(run_id)


def journal(steps: list[Step]) -> list[tuple[object, ...]]:
    """What two reads of a journal must agree on (the attempt too: nobody added one)."""
    return [
        (s.seq, str(s.kind), s.name, str(s.status), s.attempt, s.input, s.output, s.finished_at)
        for s in steps
    ]


@contextlib.contextmanager
def fence_lab(root: Path, scenario: str, **env: str) -> Iterator[FenceLab]:
    """A lab whose children are always reaped."""
    lab = FenceLab(root, scenario, dict(env))
    try:
        yield lab
    finally:
        lab.close()
