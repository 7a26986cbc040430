"""Run again from the CLI: ``rerun`` starts a run as another was started."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from desktop_agent.client.api import Client
from tests.search.test_cli_search import cli


def first_run(client: Client, ws: Path) -> str:
    return client.start_run(
        "Summarise the Q3 notes",
        model="claude-haiku-4-5",
        workspace=ws,
        tools=["read_file", "append_note"],
        approval_overrides={"append_note": "ask"},
        max_cost_usd=2.5,
        max_steps=40,
    ).id


def test_rerun_starts_the_same_run_again_with_what_was_changed(
    client: Client, workspace: Path
) -> None:
    first = client.run(first_run(client, workspace))
    result = cli(client.db_path, "rerun", first.id[:6], "--model", "demo", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    if data.get("worker_started"):  # rerun starts a worker as run --detach does: end it
        os.kill(int(data["worker_started"]), signal.SIGTERM)
    again = client.run(data["id"])
    assert again.id != first.id and again.goal == first.goal
    assert again.model == "demo" and again.workspace == first.workspace
    assert [n for n, _ in again.spec.tools] == [n for n, _ in first.spec.tools]
    assert again.spec.approval_overrides == first.spec.approval_overrides
    assert (again.budget.max_cost_usd, again.budget.max_steps) == (2.5, 40)
    unknown = cli(client.db_path, "rerun", "nosuchrun")
    assert unknown.returncode == 2 and "no run 'nosuchrun'" in unknown.stderr
