"""A worker process for the chaos tests: production wiring with a short lease.

Run as ``python -m tests.chaos.child_worker DB``. It is ``desktop-agent worker`` as
:func:`desktop_agent.cli.commands.cmd_worker` builds it (real store, real Claude adapter reaching
the fake Messages API through ``ANTHROPIC_BASE_URL``, real tools, plugins named by
``DESKTOP_AGENT_TEST_TOOLS``), with two differences the CLI has no option for:

- the lease lasts :data:`LEASE_ENV` seconds (default 1.5 s instead of 30 s), and an
  effect reserves it for :data:`EFFECT_TIMEOUT_S` at most, so that a worker frozen with
  SIGSTOP loses its runs to the other worker within a test;
- every SQLite connection of the process audits its writes, with the worker's id (see
  :mod:`tests.chaos.audit`).

SIGTERM stops it cleanly (as the CLI's worker); the tests SIGKILL and SIGSTOP it at will.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

from desktop_agent.config import Settings
from desktop_agent.worker.compose import build_executor, open_store
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.chaos.audit import register_writer

LEASE_ENV = "CHAOS_LEASE_S"
EFFECT_TIMEOUT_S = 2.0
"""How long a tool's effect may take when the tool does not say (the engine's default is
30 s; the mail and HTTP timeouts are set as short in the lab's settings)."""

MAX_RUNS = 8
"""Runs one worker executes at once: all of a test's, so that either worker can take over
every run of the other (a full worker would leave a frozen one's runs alone)."""


def main(db: Path) -> None:
    lease_s = float(os.environ.get(LEASE_ENV, "1.5"))
    me: dict[str, str] = {"id": f"starting:{os.getpid()}"}
    register_writer(lambda: me["id"])
    settings = Settings.load(db)
    store = open_store(db, settings)
    executor = build_executor(store, settings)
    # Effects reserve their lease for this long: keep takeovers within a test.
    executor.config = dataclasses.replace(executor.config, effect_timeout_s=EFFECT_TIMEOUT_S)
    worker = Worker(
        store,
        executor,
        WorkerConfig(max_runs=MAX_RUNS, lease_s=lease_s, poll_s=0.05),
    )
    me["id"] = worker.id

    def _stop(_sig: int, _frame: Any) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, _stop)
    print(f"worker {worker.id} on {db} (lease {lease_s:g} s)", file=sys.stderr, flush=True)
    worker.run()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
