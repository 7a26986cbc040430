"""The monthly spend cap: every model call of every run checks it (real SDK, fake API).

Two runs whose spend together crosses the cap: the first finishes, the second waits with a
``budget`` step naming the monthly cap; extending its own budget is refused (it would lift
nothing), a resume without raising the cap waits again, and one after raising it finishes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind, WaitReason
from desktop_agent.domain.errors import InvalidStateError
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.llm.claude import ClaudeModel
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.tables import spend_reservations
from desktop_agent.persistence.usage import MonthSpend
from tests.conftest import MakeExecutor, drain
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.spend import HAIKU, claude_on, million_token_api


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """Every call reads a million prompt tokens ($1 on Haiku) and answers at once."""
    with million_token_api() as server:
        yield server


def _model(fake: FakeAnthropic) -> ClaudeModel:
    return claude_on(fake)


def _set_cap(client: Client, cap: float | None) -> None:
    settings = Settings.load(client.db_path)
    settings.monthly_spend_cap_usd = cap
    settings.save(client.db_path)


def test_the_second_run_waits_for_the_cap_until_it_is_raised(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic
) -> None:
    _set_cap(client, 1.01)  # above one call's worst case, below two calls
    executor = make_executor(_model(fake))
    first = client.start_run("First", model=HAIKU)
    drain(client.store, executor)
    assert client.run(first.id).status == RunStatus.COMPLETED
    spent = client.run(first.id).cost_usd
    assert spent == pytest.approx(1.0, rel=0.01)

    second = client.start_run("Second", model=HAIKU)
    drain(client.store, executor)
    held = client.run(second.id)
    assert (held.status, held.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    assert len(fake.requests) == 1  # the second run's call was never made
    assert held.status_message.startswith("Monthly spend cap reached: $1.00 of $1.01")
    (step,) = [s for s in client.steps(second.id) if s.kind == StepKind.BUDGET]
    assert step.name == "monthly"
    assert step.input["monthly_cap"]["cap_usd"] == pytest.approx(1.01)
    assert step.input["monthly_cap"]["spent_usd"] == pytest.approx(spent)
    assert client.waits_for_monthly_cap(held)

    with pytest.raises(InvalidStateError, match="raise the cap in Settings"):
        client.extend_budget(second.id, cost_usd=5.0)
    client.resume(second.id)  # not raised yet: it waits again, nothing is called
    drain(client.store, executor)
    again = client.run(second.id)
    assert (again.status, again.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    assert len(fake.requests) == 1

    _set_cap(client, 10.0)
    client.resume(second.id)
    drain(client.store, executor)
    done = client.run(second.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert len(fake.requests) == 2


def test_without_a_cap_nothing_waits(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic
) -> None:
    executor = make_executor(_model(fake))
    ids = [client.start_run(name, model=HAIKU).id for name in ("One", "Two")]
    drain(client.store, executor)
    assert [client.run(i).status for i in ids] == [RunStatus.COMPLETED] * 2


def test_reservations_count_only_while_their_run_runs_and_go_with_their_token(
    client: Client,
) -> None:
    from sqlalchemy import update

    from desktop_agent.persistence.tables import runs
    from desktop_agent.persistence.usage import RESERVATION_TTL_S, MonthSpend

    store = client.store
    a, b = (client.start_run(goal, model=HAIKU).id for goal in ("A", "B"))
    with store.db.write() as conn:
        conn.execute(update(runs).values(status=str(RunStatus.RUNNING)))
    cap = MonthSpend(store.db, lambda: 1.0)
    now = 1_000_000.0

    first = cap.reserve(a, 0.7, now)
    assert first.granted and first.token is not None
    # B finds A's call holding $0.70: a worst case of $0.40 does not fit, $0.30 does.
    assert not cap.reserve(b, 0.4, now).granted
    check = cap.reserve(b, 0.3, now, hold=False)
    assert check.granted and check.held_usd == pytest.approx(0.7) and check.token is None
    assert not cap.reserve(b, 0.31, now).granted  # the check above held nothing

    # A worker that lost run A releases its own reservation, never a newer one.
    newer = cap.reserve(a, 0.7, now)
    cap.release(a, first.token)
    assert not cap.reserve(b, 0.4, now, hold=False).granted
    assert newer.token is not None
    cap.release(a, newer.token)
    assert cap.reserve(b, 0.4, now, hold=False).granted

    # Left behind by a worker that died: counts while A runs, for a few hours at most.
    cap.reserve(a, 0.7, now)
    assert not cap.reserve(b, 0.4, now + RESERVATION_TTL_S - 1, hold=False).granted
    assert cap.reserve(b, 0.4, now + RESERVATION_TTL_S + 1, hold=False).granted
    with store.db.write() as conn:
        conn.execute(update(runs).where(runs.c.id == a).values(status=str(RunStatus.FAILED)))
    assert cap.reserve(b, 0.4, now, hold=False).granted


class _Witness(MonthSpend):
    """The real cap; at each release, what another worker would read of the month."""

    def __init__(self, db: Database, cap: float) -> None:
        super().__init__(db, lambda: cap)
        self.seen: list[tuple[float, float]] = []  # (spent, held by others) at each release

    def release(self, run_id: str, token: str) -> None:
        other = MonthSpend(self.db, self._cap)  # a fresh reader: no cache of this one's
        check = other.reserve("another run", 0.0, time.time(), hold=False)
        self.seen.append((check.spent_usd, check.held_usd))
        super().release(run_id, token)


def test_a_call_s_hold_goes_only_once_its_cost_is_written(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic
) -> None:
    """Between a call's end and its cost's commit, another run must find one of the two.

    The hold dropped first, a run asking in that moment found neither the $1 spent nor
    the hold, and room for a call the cap had no room for (seen with three workers).
    """
    witness = _Witness(client.store.db, 10.0)
    config = EngineConfig(settings=client.settings, spend_cap=witness)
    run = client.start_run("One call", model=HAIKU)
    drain(client.store, make_executor(_model(fake), config=config))
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert witness.seen, "the call's hold was never released"
    spent, _held = witness.seen[0]
    assert spent == pytest.approx(client.run(run.id).cost_usd), witness.seen
    with client.store.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(spend_reservations)).scalar() == 0
