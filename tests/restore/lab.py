"""A database, an HTTP sink and the real CLI: what the restore tests need.

Workers are child processes (``tests.restore.child_worker``, production wiring, scripted
model) run to their end (``--until-idle``) and always reaped; the sink counts the POSTs it
receives per order, by idempotency key. Backups and restores go through the CLI's ``main``
with an argv, as ``desktop-agent db backup`` and ``desktop-agent db restore`` would.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import Run, Step
from tests.helpers.sqlite_template import migrated_database
from tests.tools.servers import HttpServer, Reply

REPO = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT_S = 60.0


def lab_settings() -> Settings:
    """No budgets, no approvals (the restore is the subject), POSTs to 127.0.0.1 allowed."""
    return Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        ask_unsafe=False,
        allow_private_fetch=True,
    )


class RestoreLab:
    """One database beside its backups and effect ledger, and a sink for the orders."""

    def __init__(self, root: Path, server: HttpServer, capsys: pytest.CaptureFixture[str]):
        self.root = root
        self.server = server
        self.capsys = capsys
        self.db = root / "data" / "desktop-agent.db"
        self.ledger = Path(f"{self.db}.effects")
        migrated_database(self.db)  # as the first open would leave it, without migrating
        lab_settings().save(self.db)
        self.client = Client(self.db)
        self.log = root / "children.log"
        self.orders: dict[str, str] = {}
        """Run id -> the path its POST goes to."""

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()

    # ------------------------------------------------------------------ runs

    def order(self, name: str) -> str:
        """Queue a run that POSTs one order to ``/orders/NAME``; returns its id."""
        path = f"/orders/{name}"
        self.server.routes[path] = Reply(201, b'{"order": 7}')
        run = self.client.start_run(
            f"Order at {self.server.url(path)}", model="claude-haiku-4-5", tools=["http_post"]
        )
        self.orders[run.id] = path
        return run.id

    def keys(self, run_id: str) -> list[str]:
        """The idempotency keys of the POSTs the sink received for the run's order."""
        return [r.headers["idempotency-key"] for r in self.server.hits(self.orders[run_id])]

    def run(self, run_id: str) -> Run:
        return self.client.run(run_id)

    def steps(self, run_id: str) -> list[Step]:
        return self.client.steps(run_id)

    # ------------------------------------------------------------------ processes

    def worker(self, **env: str) -> int:
        """Run a worker child to its end (idle, or killed at a crash point); its exit code."""
        full = {**os.environ, "PYTHONPATH": str(REPO), **env}
        full.pop("ANTHROPIC_API_KEY", None)
        if "DESKTOP_AGENT_CRASH_AT" not in env:
            full.pop("DESKTOP_AGENT_CRASH_AT", None)
        argv = [sys.executable, "-m", "tests.restore.child_worker", str(self.db)]
        with self.log.open("ab") as out:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=full, cwd=REPO
            )
        try:
            return proc.wait(timeout=WORKER_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            proc.wait()

    def work(self) -> None:
        """Run a worker child that must end normally."""
        assert self.worker() == 0, self.log.read_text()[-3000:]

    # ------------------------------------------------------------------ the CLI

    def cli(self, *argv: str) -> tuple[int, str, str]:
        """``desktop-agent --db DB db ...`` through the CLI's main: code, stdout, stderr.

        Only for the ``db`` commands, which never open the database the usual way. Others
        (``resolve``, ``steer``) run in a child process (:meth:`command`): a client opened
        in this process reads the database file with a descriptor of its own and closes
        it, which drops the SQLite locks of every other connection this process holds on
        the file; a worker child could then take the write-ahead log away from them. The
        lab's own client is closed meanwhile for the same reason (and a restore replaces
        the file under it).
        """
        assert "db" in argv, argv
        self.client.close()
        try:
            self.capsys.readouterr()
            code = cli.main(["--db", str(self.db), *argv])
            got = self.capsys.readouterr()
        finally:
            self.client = Client(self.db)
        return code, got.out, got.err

    def command(self, *argv: str) -> tuple[int, str, str]:
        """``desktop-agent --db DB ARGV...`` in a child process: code, stdout, stderr."""
        full = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(self.db), *argv],
            env=full,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
        )
        return done.returncode, done.stdout, done.stderr

    def backup(self) -> Path:
        """``db backup``; the backup made."""
        code, out, err = self.cli("--json", "db", "backup")
        assert code == 0, err
        return Path(json.loads(out)["path"])

    def restore(self, backup: Path | None = None, *, as_json: bool = True) -> Any:
        """``db restore --yes [BACKUP]``; its output."""
        argv = ["db", "restore", "--yes", *([backup.name] if backup else [])]
        code, out, err = self.cli(*(["--json", *argv] if as_json else argv))
        assert code == 0, err
        return json.loads(out) if as_json else out.strip()

    def resolve(self, run_id: str, action: str) -> None:
        """``desktop-agent resolve RUN ACTION``."""
        code, _out, err = self.command("resolve", run_id, action)
        assert code == 0, err

    def corrupt(self) -> None:
        """Damage the database file, as a disk might (the client is closed first)."""
        self.client.close()
        with open(self.db, "r+b") as f:
            f.seek(0)
            f.write(os.urandom(4096))
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{self.db}{suffix}").unlink()
