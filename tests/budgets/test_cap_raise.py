"""Raising the monthly cap and resuming the runs it held, from the client and the CLI.

A run the cap stops waits until the cap leaves room; ``client.cap.report`` says what the
month spent, the cap and the runs held, ``set_cap`` changes the settings file the workers
read, and ``resume_held`` resumes every held run (``desktop-agent usage --cap USD|off
--resume-held`` on the command line).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from desktop_agent.client import cap
from desktop_agent.client.api import Client
from desktop_agent.client.cap import parse_cap
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus, WaitReason
from desktop_agent.domain.errors import InvalidInputError
from tests.budgets.test_monthly_cap import _model, _set_cap
from tests.conftest import MakeExecutor, drain
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.spend import HAIKU, million_token_api
from tests.search.test_cli_search import cli


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """Every call reads a million prompt tokens ($1 on Haiku) and answers at once."""
    with million_token_api() as server:
        yield server


def held_runs(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic, n: int = 2
) -> list[Run]:
    """One run that spent $1 under a $1.01 cap, then ``n`` more that the cap holds."""
    _set_cap(client, 1.01)
    executor = make_executor(_model(fake))
    client.start_run("First", model=HAIKU)
    drain(client.store, executor)
    held = [client.start_run(f"Held {i}", model=HAIKU) for i in range(n)]
    drain(client.store, executor)
    for run in held:
        now = client.run(run.id)
        assert (now.status, now.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    return held


def test_the_report_names_the_held_runs_and_resuming_after_raising_finishes_them(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic
) -> None:
    held = held_runs(client, make_executor, fake)
    report = cap.report(client)
    assert report.cap_usd == pytest.approx(1.01)
    assert report.spent_usd == pytest.approx(1.0, rel=0.01)
    assert [r.id for r in report.held] == [r.id for r in held]  # oldest first

    cap.set_cap(client, 10.0)
    assert Settings.load(client.db_path).monthly_spend_cap_usd == 10.0  # what workers read
    resumed = cap.resume_held(client)
    assert {r.id for r in resumed} == {r.id for r in held}
    drain(client.store, make_executor(_model(fake)))
    assert [client.run(r.id).status for r in held] == [RunStatus.COMPLETED] * 2
    assert cap.report(client).held == ()
    assert cap.resume_held(client) == []  # nothing held: nothing resumed


def test_a_bad_cap_is_refused_with_a_clear_error_and_changes_nothing(client: Client) -> None:
    _set_cap(client, 5.0)
    for bad in (0.0, -1.0, float("inf"), float("nan"), 2_000_000.0):
        with pytest.raises(InvalidInputError, match="cap"):
            cap.set_cap(client, bad)
    assert Settings.load(client.db_path).monthly_spend_cap_usd == 5.0
    assert parse_cap("off") is None and parse_cap(" None ") is None
    assert parse_cap("$12.50") == 12.5 and parse_cap("1,000") == 1000.0
    with pytest.raises(InvalidInputError, match="not 'lots'"):
        parse_cap("lots")
    cap.set_cap(client, None)
    assert Settings.load(client.db_path).monthly_spend_cap_usd is None


def test_the_cli_raises_the_cap_and_resumes_the_held_runs(
    client: Client, make_executor: MakeExecutor, fake: FakeAnthropic
) -> None:
    held = held_runs(client, make_executor, fake, n=1)

    shown = cli(client.db_path, "usage", "--cap", "1.50")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "Monthly spend cap set to $1.50."
    assert lines[1].endswith("so far: $1.00 of the $1.50 monthly cap (67%)")
    assert "1 run(s) wait for the cap" in lines[2] and "--resume-held" in lines[2]
    assert held[0].id[:8] in lines[3] and "Held 0" in lines[3]

    bad = cli(client.db_path, "usage", "--cap", "lots")
    assert bad.returncode == 2 and "not 'lots'" in bad.stderr
    assert Settings.load(client.db_path).monthly_spend_cap_usd == 1.5  # unchanged

    done = cli(client.db_path, "--json", "usage", "--cap", "off", "--resume-held")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["cap_usd"] is None and data["resumed"] == [held[0].id] and data["held"] == []
    assert client.has_pending_commands(held[0].id)  # the resume, for a worker to apply
    drain(client.store, make_executor(_model(fake)))
    assert client.run(held[0].id).status == RunStatus.COMPLETED
