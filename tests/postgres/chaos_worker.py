"""A worker process for the PostgreSQL chaos test: ``desktop-agent worker``, short lease.

Run as ``python -m tests.postgres.chaos_worker DB``. It is exactly what ``desktop-agent
worker`` runs (:func:`desktop_agent.worker.main.serve`: the real store on the server named
by the folder's ``database.url``, the scheduler, the real Claude adapter reaching the fake
Messages API, the real tools), with two settings the CLI has no option for, so that a
frozen or vanished worker loses its runs within a test rather than after 30 s:

- the lease lasts ``CHAOS_LEASE_S`` seconds, polled every 50 ms;
- an effect reserves the lease for :data:`EFFECT_TIMEOUT_S` at most.

``DESKTOP_AGENT_HOST`` gives the worker its host id, as on a second machine.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import Any

from desktop_agent.worker import main as worker_main
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.worker import WorkerConfig

LEASE_ENV = "CHAOS_LEASE_S"
EFFECT_TIMEOUT_S = 2.0
MAX_RUNS = 8


def main(db: Path) -> None:
    lease_s = float(os.environ.get(LEASE_ENV, "2.0"))

    def build_short(*args: Any, **kwargs: Any) -> Any:
        executor = build_executor(*args, **kwargs)
        executor.config = dataclasses.replace(executor.config, effect_timeout_s=EFFECT_TIMEOUT_S)
        return executor

    # serve() builds both by these names: the same wiring, a shorter lease and effect timeout.
    vars(worker_main).update(
        WorkerConfig=functools.partial(WorkerConfig, lease_s=lease_s, poll_s=0.05),
        build_executor=build_short,
    )
    worker_main.serve(
        db,
        max_runs=MAX_RUNS,
        announce=lambda line: print(f"{line} (lease {lease_s:g} s)", file=sys.stderr, flush=True),
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
