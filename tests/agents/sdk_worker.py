"""A worker process for the Agent SDK crash tests: the production wiring, a short lease.

Run as ``python -m tests.agents.sdk_worker DB``. It is ``desktop-agent worker`` as the CLI
builds it (``build_executor``: the Agent SDK driver among the foreign agents, with the
crash point of ``DESKTOP_AGENT_CRASH_AT``), with a lease of 1.5 s instead of 30 s, so that
another worker takes over a killed one's run within a test. SIGTERM stops it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from desktop_agent.config import Settings
from desktop_agent.worker.compose import build_executor, open_store
from desktop_agent.worker.worker import Worker, WorkerConfig

LEASE_S = 1.5


def main(db: Path) -> None:
    settings = Settings.load(db)
    store = open_store(db, settings)
    worker = Worker(
        store, build_executor(store, settings), WorkerConfig(lease_s=LEASE_S, poll_s=0.05)
    )

    def _stop(_sig: int, _frame: Any) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, _stop)
    print(f"worker {worker.id} on {db}", file=sys.stderr, flush=True)
    worker.run()
    store.db.dispose()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
