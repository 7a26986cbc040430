"""Archives are history, not a black hole: an archived run is shown, found, and brought back."""

from __future__ import annotations

import json

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import RunStatus
from tests.conftest import MakeExecutor
from tests.helpers.fakes import FakeClock
from tests.scheduler.test_retention import DAY, _finished_run
from tests.search.test_cli_search import cli


def test_an_archived_run_is_shown_found_and_brought_back_as_it_was(
    client: Client, make_executor: MakeExecutor, clock: FakeClock
) -> None:
    sched = Scheduling(client, clock.now)
    run_id = _finished_run(client, make_executor, clock, "quokka census")
    before = [(s.seq, s.kind, s.name, s.status, s.output) for s in client.steps(run_id)]
    clock.advance(40 * DAY)
    assert sched.archive(30 * DAY).run_ids == [run_id]
    assert [r.id for r in client.runs()] == []

    shown = cli(client.db_path, "show", run_id[:6])
    assert shown.returncode == 0, shown.stderr
    assert f"Run {run_id}  completed (archived in " in shown.stdout
    assert f"desktop-agent db unarchive {run_id}" in shown.stdout
    found = cli(client.db_path, "search", "quokka", "--json")
    assert {h["archived"] for h in json.loads(found.stdout)} == {True}

    back = cli(client.db_path, "db", "unarchive", run_id[:6], "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == {"run_id": run_id, "steps": len(before)}
    run = client.run(run_id)
    assert run.status == RunStatus.COMPLETED and run.goal == "quokka census"
    assert [(s.seq, s.kind, s.name, s.status, s.output) for s in client.steps(run_id)] == before
    found = cli(client.db_path, "search", "quokka", "--json")
    assert {h["archived"] for h in json.loads(found.stdout)} == {False}

    again = cli(client.db_path, "db", "unarchive", run_id)
    assert again.returncode == 2 and "is in the database already" in again.stderr
    missing = cli(client.db_path, "db", "unarchive", "nosuchrun")
    assert missing.returncode == 2 and "no archived run 'nosuchrun'" in missing.stderr
    nowhere = cli(client.db_path, "show", "nosuchrun")
    assert nowhere.returncode == 2 and "archived runs included" in nowhere.stderr
