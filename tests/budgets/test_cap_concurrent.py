"""A cap is a cap: ten runs at once, on three worker processes, stay within $1.00.

Each run makes one model call on Haiku 4.5 whose worst case is $0.32 (64,000 output
tokens) and which really spends $0.20. The fake API holds every call open until no run can
move any more: each run then either has its call in flight at the API or waits for the
monthly cap. Checking the cap without holding anything, all ten runs found $0 spent and
all ten calls went out ($2.00 against a $1.00 cap). With reservations, the calls in flight
hold their worst case: three fit ($0.96), the other seven wait. Resumed after those three
finished ($0.60 spent), one more fits; resumed again, none does.

Real worker processes (``desktop-agent worker``), on a SQLite file and on a PostgreSQL
database of the test's own server; the real Claude adapter against the strict fake API.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind, WaitReason
from tests.chaos.harness import Workers, worker_env
from tests.helpers import postgres
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
HAIKU = "claude-haiku-4-5"
RUNS = 10
CAP_USD = 1.00
MAX_TOKENS = 64_000  # $0.32 of output at Haiku 4.5's $5 per million: the call's worst case
SPENT_TOKENS = 40_000  # $0.20: what each call really spends
WORKERS = 3

pytestmark = pytest.mark.parametrize("backend", postgres.BACKENDS)


class Lab:
    """Ten runs, three workers, a fake API that holds every answer until released."""

    def __init__(self, root: Path, backend: str) -> None:
        self.gate = threading.Event()
        self.fake = FakeAnthropic(self._answer)
        self.folder = root / "data"
        self.folder.mkdir()
        self.db = self.folder / "desktop-agent.db"
        self.root = root
        self.backend = backend

    def _answer(self, body: dict[str, Any], i: int) -> Stream:
        return Stream([Text("Done.")], output_tokens=SPENT_TOKENS, hold_after=0, gate=self.gate)

    def env(self) -> dict[str, str]:
        # No lease runs out on a loaded machine while the fake holds the answers: a run
        # taken over would make a second call and muddle the count.
        return worker_env(self.fake.url, self.root, CHAOS_LEASE_S="60")


@pytest.fixture
def lab(tmp_path: Path, backend: str) -> Iterator[Lab]:
    lab = Lab(tmp_path, backend)
    with lab.fake, postgres.database_for(lab.folder, backend):
        try:
            yield lab
        finally:
            lab.gate.set()  # no answer stays held for a worker being killed


def _settled(client: Client, ids: list[str], fake: FakeAnthropic, calls_before: int) -> bool:
    """Every run has its call at the API or waits for the cap (none can move on)."""
    runs = [client.run(i) for i in ids]
    waiting = sum(
        1 for r in runs if (r.status, r.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    )
    return waiting + len(fake.requests) - calls_before == len(ids)


def _checked(workers: Workers) -> bool:
    """True, unless a worker exited by itself (then fails with its log)."""
    workers.check()
    return True


def _round_over(client: Client, ids: list[str]) -> bool:
    """Every command was taken up, and every run finished or waits."""
    return not any(client.has_pending_commands(i) for i in ids) and all(
        client.run(i).status in (RunStatus.COMPLETED, RunStatus.WAITING) for i in ids
    )


def _month_spent(client: Client) -> float:
    return sum(client.run(r.id).cost_usd for r in client.runs())


def _story(client: Client, ids: list[str]) -> str:
    """What each run did, for a failure message: status, cost, and its steps."""
    lines = []
    for i in ids:
        run = client.run(i)
        lines.append(f"{i} {run.status} ${run.cost_usd:.2f} {run.status_message!r}")
        for s in client.steps(i):
            month = (s.input or {}).get("monthly_cap") if isinstance(s.input, dict) else None
            lines.append(
                f"  {s.seq} {s.kind} {s.name} {s.status} ${s.cost_usd:.2f} "
                f"{s.started_at:.3f}-{s.finished_at or 0:.3f} {month or ''}"
            )
    return "\n".join(lines)


def test_ten_concurrent_runs_spend_at_most_the_cap(lab: Lab, tmp_path: Path) -> None:
    settings = Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        monthly_spend_cap_usd=CAP_USD,
        ask_unsafe=False,
        workers=RUNS,
    )
    settings.save(lab.db)
    logs = tmp_path / "logs"
    logs.mkdir()
    workers = Workers(lab.db, logs, lab.env(), WORKERS, module="tests.postgres.chaos_worker")
    with contextlib.closing(Client(lab.db, settings)) as client:
        try:
            ids = [
                client.start_run(f"Answer {n}", model=HAIKU, max_tokens=MAX_TOKENS).id
                for n in range(RUNS)
            ]
            for slot in range(WORKERS):
                workers.start(slot)

            # Round 1: every run asks at once; the fake answers nobody yet.
            wait_until(
                lambda: _checked(workers) and _settled(client, ids, lab.fake, 0),
                timeout=240,
                what="every run to have its call in flight or to wait for the cap",
            )
            in_flight = len(lab.fake.requests)
            assert in_flight == 3, (
                f"{in_flight} calls went out at once; $0.96 of worst case fit\n"
                f"{workers.log_tails()}"
            )
            held = [client.run(i) for i in ids if client.run(i).status == RunStatus.WAITING]
            assert len(held) == RUNS - 3
            assert all(r.status_message.startswith("Monthly spend cap reached") for r in held), [
                r.status_message for r in held
            ]
            assert any("held by calls in flight" in r.status_message for r in held)
            budget_steps = [s for s in client.steps(held[0].id) if s.kind == StepKind.BUDGET]
            assert budget_steps and budget_steps[-1].name == "monthly"
            assert budget_steps[-1].input["monthly_cap"]["held_usd"] > 0

            lab.gate.set()
            wait_until(
                lambda: sum(client.run(i).status == RunStatus.COMPLETED for i in ids) == 3,
                timeout=240,
                what="the three calls in flight to finish",
            )
            assert _month_spent(client) == pytest.approx(0.60, abs=0.01)

            # Round 2: the seven resumed; $0.40 is left, one worst case of $0.32 fits.
            calls = len(lab.fake.requests)
            for r in held:
                client.resume(r.id)
            wait_until(
                lambda: _checked(workers) and _round_over(client, ids),
                timeout=240,
                what="every resume to be taken up, and no run to move any more",
            )
            completed = [i for i in ids if client.run(i).status == RunStatus.COMPLETED]
            assert len(completed) == 4, _story(client, ids) + "\n" + workers.log_tails()
            assert len(lab.fake.requests) == calls + 1
            spent = _month_spent(client)
            assert spent == pytest.approx(0.80, abs=0.01)
            assert spent <= CAP_USD
        finally:
            lab.gate.set()
            workers.kill_all()
