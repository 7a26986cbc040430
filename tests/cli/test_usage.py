"""``desktop-agent usage``: spend and tokens of all runs, per day, model, schedule and batch."""

from __future__ import annotations

import json

import pytest

from desktop_agent.client.api import Client
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.search.test_cli_search import cli

HAIKU, SONNET = "claude-haiku-4-5", "claude-sonnet-4-5"


def test_totals_add_up_per_model_and_day_and_the_cli_prints_them(
    client: Client, make_executor: MakeExecutor
) -> None:
    ids: dict[str, list[str]] = {}
    for model in (HAIKU, SONNET, SONNET):
        run = client.start_run(f"Spend on {model}", model=model)
        drain(client.store, make_executor(ScriptedModel([Reply("Thinking."), Reply("Done.")])))
        ids.setdefault(model, []).append(run.id)
    runs = {r.id: r for r in client.runs()}
    usage = client.usage(0.0)
    assert usage.total.cost_usd == pytest.approx(sum(r.cost_usd for r in runs.values()))
    assert usage.total.cost_usd > 0 and len(usage.total.runs) == 3
    sonnet = usage.by_model[SONNET]
    assert sonnet.cost_usd == pytest.approx(sum(runs[i].cost_usd for i in ids[SONNET]))
    assert sonnet.input_tokens == sum(runs[i].usage.input_tokens for i in ids[SONNET])
    assert sum(t.cost_usd for t in usage.by_day.values()) == pytest.approx(usage.total.cost_usd)
    assert client.usage(max(r.updated_at for r in runs.values()) + 1).total.calls == 0

    shown = cli(client.db_path, "usage", "--since", "today", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert set(data) == {
        *("since", "total", "by_day", "by_model", "by_agent", "by_schedule", "by_batch"),
        *("by_mode", "timezone", "month", "simulated"),
    }
    assert set(data["by_agent"]) == {"desktop-agent"}  # our own runs only
    assert data["by_agent"]["desktop-agent"]["cost_usd"] == data["total"]["cost_usd"]
    assert data["simulated"]["cost_usd"] == 0  # no demo run here
    assert data["total"]["runs"] == 3 and set(data["by_model"]) == {HAIKU, SONNET}
    text = cli(client.db_path, "usage").stdout
    assert text.splitlines()[0].startswith("since ") and "per model:" in text
    assert "per agent:" not in text  # shown unasked only when another agent spent
    bad = cli(client.db_path, "usage", "--since", "someday")
    assert bad.returncode == 2 and "is not a date" in bad.stderr
