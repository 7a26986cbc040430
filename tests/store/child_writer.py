"""A worker-like child process that writes a journal as fast as it can until it is killed.

Run as ``python -m tests.store.child_writer URL RUN_ID CLAIM_AT``. It claims the run at
``CLAIM_AT`` (the run must be free then: never claimed, or its lease expired) and goes on
from the run's last step ``n - 1``: in one fenced commit per step, as the engine writes,
it records the outcome of step ``n - 1`` (one cent, one token each way), the intent of
step ``n`` and, every fifth step, a snapshot of the steps done. After each commit has
returned it prints ``n`` on its own line: a commit it printed was acknowledged.
"""

from __future__ import annotations

import sys

from desktop_agent.domain import StepStatus, Usage
from desktop_agent.engine.ports import Snapshot, StepOutcome
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.store import SqlStore
from tests.store.runs import LEASE_S, intent

STEP_COST_USD = 0.01
SNAPSHOT_EVERY = 5
MAX_STEPS = 100_000
"""A bound for a child nobody kills (the test's cleanup kills it long before)."""


def main(url: str, run_id: str, claim_at: float) -> None:
    store = SqlStore(Database(DbSettings(url)))
    lease = store.claim_run(run_id, "child-writer", claim_at, LEASE_S)
    if lease is None:
        raise SystemExit(f"run {run_id} was not free at {claim_at}")
    first = store.get_run(run_id).last_seq + 1
    for seq in range(first, MAX_STEPS):
        done = seq - 1
        snapshot = done and done % SNAPSHOT_EVERY == 0
        store.commit(
            run_id,
            outcome=(
                StepOutcome(
                    done,
                    StepStatus.COMPLETED,
                    {"n": done},
                    usage=Usage(1, 1),
                    cost_usd=STEP_COST_USD,
                )
                if done
                else None
            ),
            intents=[intent(seq)],
            snapshot=Snapshot(done, {"done": done}) if snapshot else None,
            lease=lease,
        )
        print(seq, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
