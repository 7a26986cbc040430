"""Usage totals across runs: grouping, archived runs, local days, the CLI and the cap."""

from __future__ import annotations

import calendar
import json
import sqlite3
import time
from collections.abc import Iterator

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import Usage
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.search.test_cli_search import cli

HAIKU, SONNET = "claude-haiku-4-5", "claude-sonnet-4-5"


def _run(client: Client, make_executor: MakeExecutor, model: str, cost: float) -> str:
    """A finished run of two model calls costing ``cost`` each (1000 in, 50 out, 7 cached)."""
    run = client.start_run(f"Spend on {model}", model=model)
    spent = Usage(1000, 50, cache_read_tokens=7)
    plan = ("update_plan", {"items": [{"text": "look"}]})
    replies = [
        Reply("Plan.", [plan], usage=spent, cost=cost),
        Reply("Done.", usage=spent, cost=cost),
    ]
    drain(client.store, make_executor(ScriptedModel(replies)))
    return run.id


def test_totals_group_by_model_and_count_archived_runs(
    client: Client, make_executor: MakeExecutor
) -> None:
    gone = _run(client, make_executor, HAIKU, 0.25)
    assert Scheduling(client, lambda: time.time() + 60).archive(0).path is not None
    with pytest.raises(Exception):  # noqa: B017 - the run's rows are gone from the database
        client.run(gone)
    kept = [_run(client, make_executor, SONNET, 0.5) for _ in range(2)]

    usage = client.usage(0.0)
    assert usage.total.cost_usd == pytest.approx(0.5 + 2.0)
    assert usage.total.runs == {gone, *kept}
    assert usage.by_model[HAIKU].cost_usd == pytest.approx(0.5)  # from the search index
    assert usage.by_model[HAIKU].input_tokens == 0  # tokens are not kept for archived runs
    assert usage.by_model[SONNET].cost_usd == pytest.approx(2.0)
    assert usage.by_model[SONNET].input_tokens == 4000
    assert usage.by_model[SONNET].cache_read_tokens == 28
    assert usage.by_model[SONNET].calls == 4
    assert sum(t.cost_usd for t in usage.by_day.values()) == pytest.approx(2.5)
    assert usage.month == pytest.approx(2.5) and usage.cap_usd is None


@pytest.fixture
def utc_minus_5(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time five hours behind UTC (here and in the CLI's child process)."""
    monkeypatch.setenv("TZ", "Etc/GMT+5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_days_are_local_and_the_cli_reads_since_in_local_time(
    client: Client, make_executor: MakeExecutor, utc_minus_5: None
) -> None:
    run_id = _run(client, make_executor, SONNET, 0.5)
    late = calendar.timegm((2026, 11, 10, 4, 59, 59))  # 23:59:59 on the 9th, local time
    early = calendar.timegm((2026, 11, 10, 5, 0, 1))  # 00:00:01 on the 10th
    with sqlite3.connect(client.db_path) as db:
        seqs = [s for (s,) in db.execute(
            "SELECT seq FROM steps WHERE run_id = ? AND cost_usd > 0 ORDER BY seq", (run_id,)
        )]  # fmt: skip
        assert len(seqs) == 2
        for seq, at in zip(seqs, (late, early), strict=True):
            db.execute(
                "UPDATE steps SET started_at = ?, finished_at = ? WHERE run_id = ? AND seq = ?",
                (at - 1, at, run_id, seq),
            )
    usage = client.usage(calendar.timegm((2026, 11, 1, 5, 0, 0)))
    assert {d: t.cost_usd for d, t in usage.by_day.items()} == {
        "2026-11-09": pytest.approx(0.5),
        "2026-11-10": pytest.approx(0.5),
    }
    shown = cli(client.db_path, "usage", "--since", "2026-11-10", "--by", "day", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert set(data["by_day"]) == {"2026-11-10"} and "by_model" not in data
    assert data["total"]["cost_usd"] == pytest.approx(0.5)
    assert data["timezone"] == "-05"


def test_cli_table_shows_the_month_against_the_cap_and_refuses_a_bad_date(
    client: Client, make_executor: MakeExecutor
) -> None:
    _run(client, make_executor, HAIKU, 0.25)
    _run(client, make_executor, SONNET, 0.5)
    settings = Settings.load(client.db_path)
    settings.monthly_spend_cap_usd = 6.0
    settings.save(client.db_path)

    table = cli(client.db_path, "usage", "--since", "today")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("since ") and "local time" in lines[0]
    assert "total" in lines[1] and "$1.50" in lines[1] and "2 run(s)" in lines[1]
    assert "per model:" in lines and "per day:" in lines
    assert lines[-1].endswith("so far: $1.50 of the $6.00 monthly cap (25%)")

    by_model = cli(client.db_path, "usage", "--by", "model").stdout
    assert "per model:" in by_model and "per day:" not in by_model

    bad = cli(client.db_path, "usage", "--since", "someday")
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "is not a date" in bad.stderr
    bad_by = cli(client.db_path, "usage", "--by", "week")
    assert bad_by.returncode == 2


def test_the_demo_models_simulated_dollars_are_shown_apart_and_never_count(
    client: Client, make_executor: MakeExecutor
) -> None:
    from desktop_agent.gui.views.usage import simulated_text
    from desktop_agent.persistence.usage import MonthSpend

    demo_gone = _run(client, make_executor, "demo", 2.0)
    assert Scheduling(client, lambda: time.time() + 60).archive(0).path is not None
    real = _run(client, make_executor, HAIKU, 0.25)
    demo = _run(client, make_executor, "demo", 1.0)

    usage = client.usage(0.0)
    assert usage.total.cost_usd == pytest.approx(0.5) and usage.total.runs == {real}
    assert usage.simulated.cost_usd == pytest.approx(2.0 + 4.0)  # one from the search index
    assert usage.simulated.runs == {demo, demo_gone}
    assert set(usage.by_model) == {HAIKU}
    assert sum(t.cost_usd for t in usage.by_day.values()) == pytest.approx(0.5)
    assert usage.month == pytest.approx(0.5)
    assert "$6.00 simulated by the demo model in 2 run(s)" in simulated_text(usage)

    cap = MonthSpend(client.store.db, lambda: 1.0)
    assert cap.month_spent_usd(time.time()) == pytest.approx(0.5)
    assert cap.reserve(real, 0.4, time.time(), hold=False).granted  # 6.9 if demo counted

    table = cli(client.db_path, "usage").stdout.splitlines()
    assert "total" in table[1] and "$0.50" in table[1]
    assert "simulated (demo, not counted)" in table[2] and "$6.00" in table[2]
    data = json.loads(cli(client.db_path, "usage", "--json").stdout)
    assert data["total"]["cost_usd"] == pytest.approx(0.5)
    assert data["simulated"]["cost_usd"] == pytest.approx(6.0)
    assert data["month"]["cost_usd"] == pytest.approx(0.5)
