"""Usage by mode (streamed, economy, archived apart) and the prompt cache's net saving.

The journal (``spend_journal.py``) is written through the store with known tokens and
costs; what each figure must be is computed there from the published rates, so a wrong
rate, a wrong sign or a mode taken from the wrong place fails here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.usage import saving_text
from desktop_agent.config import Settings
from desktop_agent.domain import Usage
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.usage import MonthSpend, spend_since
from tests.helpers import postgres
from tests.search.test_cli_search import cli
from tests.usage.spend_journal import HAIKU_45, SONNET_45, saving, spend, write_journal

TOTAL_KEYS = {
    *("cost_usd", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"),
    *("cache_write_1h_tokens", "cache_saving_usd", "model_calls", "runs"),
}


@pytest.fixture(params=postgres.BACKENDS)
def any_client(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Client]:
    """A client on a fresh database: SQLite, or one of the test PostgreSQL server."""
    with postgres.database_for(db_path.parent, str(request.param)):
        settings = Settings(default_max_cost_usd=None, default_max_steps=None)
        settings.save(db_path)
        c = Client(db_path, settings)
        yield c
        c.close()


def test_spend_splits_by_mode_and_the_cache_saving_is_net_of_the_writes(
    any_client: Client,
) -> None:
    client = any_client
    j = write_journal(client)

    usage = client.usage(0.0)
    streamed, economy, archived = (usage.by_mode[m] for m in ("streamed", "economy", "archived"))
    assert streamed.cost_usd == pytest.approx(j.streamed_cost)
    assert (streamed.calls, streamed.runs) == (3, {j.streamed_run, j.economy_run})
    assert (streamed.input_tokens, streamed.output_tokens) == (1000 + 500 + 300, 200 + 100 + 50)
    assert (streamed.cache_write_tokens, streamed.cache_read_tokens) == (2000, 31000)
    assert streamed.cache_write_1h_tokens == 0
    assert streamed.cache_saving_usd == pytest.approx(j.streamed_saving)

    assert economy.cost_usd == pytest.approx(j.economy_cost)
    assert (economy.calls, economy.runs) == (2, {j.economy_run})
    assert (economy.input_tokens, economy.output_tokens) == (1000, 400)
    assert (economy.cache_write_tokens, economy.cache_write_1h_tokens) == (5000, 4600)
    assert economy.cache_saving_usd == pytest.approx(j.economy_saving)

    assert archived.cost_usd == pytest.approx(j.archived_cost)
    assert (archived.calls, archived.runs, archived.cache_saving_usd) == (0, {j.archived_run}, 0)
    assert archived.input_tokens == 0  # not kept: never guessed into a mode

    real = j.streamed_cost + j.economy_cost + j.archived_cost
    assert usage.total.cost_usd == pytest.approx(real)
    assert sum(t.cost_usd for t in usage.by_mode.values()) == pytest.approx(real)
    assert usage.total.calls == 5
    assert usage.total.cache_saving_usd == pytest.approx(j.streamed_saving + j.economy_saving)
    assert usage.by_model[HAIKU_45].cache_saving_usd == pytest.approx(
        j.economy_saving + saving(HAIKU_45, 1000)
    )
    assert usage.by_model[SONNET_45].cache_saving_usd == pytest.approx(
        saving(SONNET_45, 10000, write_5m=2000) + saving(SONNET_45, 20000)
    )

    # The demo's simulated dollars: apart, and in no total, mode, saving, month or cap.
    assert usage.simulated.cost_usd == pytest.approx(j.demo_cost)
    assert usage.simulated.runs == {j.demo_run} and usage.simulated.cache_saving_usd == 0
    assert j.demo_run not in usage.total.runs | streamed.runs | economy.runs
    assert "demo" not in usage.by_model
    assert sum(t.cost_usd for t in usage.by_day.values()) == pytest.approx(real)
    assert usage.month == pytest.approx(real)
    cap = MonthSpend(client.store.db, lambda: real + 0.01)
    assert cap.month_spent_usd(time.time()) == pytest.approx(real)
    assert cap.reserve(j.streamed_run, 0.005, time.time(), hold=False).granted


def test_spend_since_reads_the_mark_and_the_hour_long_writes_of_spending_steps_only(
    any_client: Client,
) -> None:
    j = write_journal(any_client)
    rows, _keys, gone = spend_since(any_client.store.db, 0.0)
    by_step = {(r.run_id, r.model, r.cache_read_tokens): r for r in rows}
    assert len(rows) == 6  # the tool call (marked, spending nothing) is not read
    assert [a.run_id for a in gone] == [j.archived_run]
    first = by_step[(j.streamed_run, SONNET_45, 10000)]
    assert (first.economy, first.cache_write_1h_tokens) == (False, 0)  # a quote is no mark
    no_split = by_step[(j.streamed_run, SONNET_45, 20000)]
    assert (no_split.economy, no_split.cache_write_1h_tokens) == (False, None)
    hour = by_step[(j.economy_run, HAIKU_45, 30000)]
    assert (hour.economy, hour.cache_write_1h_tokens) == (True, 4000)
    mixed = by_step[(j.economy_run, HAIKU_45, 5000)]
    assert (mixed.economy, mixed.cache_write_1h_tokens) == (True, 600)
    compaction = by_step[(j.economy_run, HAIKU_45, 1000)]
    assert compaction.economy is False


def _at(year: int, month: int, day: int) -> float:
    """Noon of a local day."""
    return time.mktime((year, month, day, 12, 0, 0, 0, 0, -1))


def test_the_saving_takes_the_days_price_the_long_prompt_tier_and_five_minutes_when_unsplit(
    client: Client,
) -> None:
    clock = [_at(2026, 10, 6)]
    store = SqlStore(client.store.db, clock=lambda: clock[0])
    sonnet = client.start_run("Before and after a price change", model="claude-sonnet-5-5")
    spend(store, sonnet.id, 1, "claude-sonnet-5-5", Usage(100, 10, 0, 40000), 0.01)
    clock[0] = _at(2026, 10, 7)
    spend(store, sonnet.id, 2, "claude-sonnet-5-5", Usage(100, 10, 0, 40000), 0.01)
    haiku = client.start_run("Long prompts", model="claude-haiku-5-5")
    clock[0] = _at(2026, 11, 2)
    spend(store, haiku.id, 1, "claude-haiku-5-5", Usage(1000, 10, 0, 150000), 0.01)
    spend(store, haiku.id, 2, "claude-haiku-5-5", Usage(1000, 10, 0, 150000), 0.01, economy=True)
    spend(store, haiku.id, 3, "claude-haiku-5-5", Usage(1000, 10, 0, 90000), 0.01)
    writes = client.start_run("Writes only", model=SONNET_45)
    spend(store, writes.id, 1, SONNET_45, Usage(100, 10, 8000, 0), 0.04)  # no split: 5m

    usage = client.usage(0.0)
    assert usage.by_day["2026-10-06"].cache_saving_usd == pytest.approx(
        saving("claude-sonnet-5-5@2026-10-06", 40000)
    )
    assert usage.by_day["2026-10-07"].cache_saving_usd == pytest.approx(
        saving("claude-sonnet-5-5@2026-10-07", 40000)
    )
    long_prompt = 5 * saving("claude-haiku-5-5", 150000)
    assert usage.by_model["claude-haiku-5-5"].cache_saving_usd == pytest.approx(
        long_prompt + long_prompt / 2 + saving("claude-haiku-5-5", 90000)
    )
    lost = saving(SONNET_45, 0, write_5m=8000)
    assert lost < 0 and usage.by_model[SONNET_45].cache_saving_usd == pytest.approx(lost)
    assert saving_text(lost) == "the prompt cache cost $0.0060 more than it saved"
    assert saving_text(0.25) == "the prompt cache saved $0.25"


def test_the_cli_prints_the_split_and_the_saving_in_text_and_json(client: Client) -> None:
    j = write_journal(client)
    shown = cli(client.db_path, "usage", "--since", "today", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert set(data["by_mode"]) == {"streamed", "economy", "archived"}
    assert all(set(t) == TOTAL_KEYS for t in data["by_mode"].values())
    assert set(data["total"]) == TOTAL_KEYS and set(data["simulated"]) == TOTAL_KEYS
    modes = data["by_mode"]
    assert modes["streamed"]["cost_usd"] == pytest.approx(j.streamed_cost)
    assert modes["streamed"]["model_calls"] == 3 and modes["streamed"]["runs"] == 2
    assert modes["economy"]["cost_usd"] == pytest.approx(j.economy_cost)
    assert modes["economy"]["model_calls"] == 2
    assert modes["economy"]["cache_write_1h_tokens"] == 4600
    assert modes["economy"]["cache_saving_usd"] == pytest.approx(j.economy_saving)
    assert modes["archived"]["cost_usd"] == pytest.approx(j.archived_cost)
    assert modes["archived"]["model_calls"] == 0 and modes["archived"]["runs"] == 1
    saved = j.streamed_saving + j.economy_saving
    assert data["total"]["cache_saving_usd"] == pytest.approx(saved, abs=1e-6)
    assert data["simulated"]["cost_usd"] == pytest.approx(j.demo_cost)
    assert data["simulated"]["cache_saving_usd"] == 0
    assert data["month"]["cost_usd"] == pytest.approx(
        j.streamed_cost + j.economy_cost + j.archived_cost
    )

    only = json.loads(cli(client.db_path, "usage", "--by", "mode", "--json").stdout)
    assert {k for k in only if k.startswith("by_")} == {"by_mode"}

    lines = cli(client.db_path, "usage", "--since", "today").stdout.splitlines()
    assert "total" in lines[1] and "$0.68" in lines[1]
    assert "simulated (demo, not counted)" in lines[2] and "$1.50" in lines[2]
    assert lines[3].split()[:3] == ["cache", "saving", "(net)"] and "$0.09" in lines[3]
    start = lines.index("per mode:")
    streamed, economy, archived = lines[start + 1 : start + 4]
    assert streamed.split()[:2] == ["streamed", "$0.15"] and "3 call(s)" in streamed
    assert "cache saved $0.08" in streamed
    assert economy.startswith("  economy (batch, half price)") and "$0.03" in economy
    assert "2 call(s)" in economy and "cache saved $0.01" in economy
    assert archived.startswith("  archived, mode unknown") and "$0.50" in archived
    by_day = cli(client.db_path, "usage", "--by", "day").stdout
    assert "per mode:" not in by_day and "per day:" in by_day
