"""Placement: a run whose workspace is a folder of one machine runs only on that machine.

On one SQLite file (one machine) every run may run anywhere. On a shared PostgreSQL
database a run is placed on the machine that started it, unless its workspace lies under a
shared path; ``--placement`` says otherwise; a worker claims only what it can serve.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from tests.conftest import MakeExecutor, drain
from tests.helpers import postgres
from tests.search.test_cli_search import cli


@pytest.fixture(params=postgres.BACKENDS)
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The database, as a SQLite file or on the tests' PostgreSQL server."""
    with postgres.database_for(tmp_path / "data", request.param):
        yield tmp_path / "data" / "desktop-agent.db"


def on_server(client: Client) -> bool:
    return (client.db_path.parent / "database.url").exists()


def test_the_default_placement_follows_the_database_and_the_shared_paths(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESKTOP_AGENT_HOST", "desk-1")
    local = client.start_run("Local notes", model="demo", workspace=tmp_path / "mine")
    shared_root = tmp_path / "shared"
    client.settings.shared_paths = [str(shared_root)]
    shared = client.start_run("Team notes", model="demo", workspace=shared_root / "q3")
    if on_server(client):
        assert local.placement == "host:desk-1"  # its workspace is a folder of this machine
    else:
        assert local.placement == "any"  # one file, one machine
    assert shared.placement == "any"
    pooled = client.start_run("On the GPUs", model="demo", placement="pool:gpu")
    assert client.run(pooled.id).placement == "pool:gpu"
    with pytest.raises(InvalidInputError, match="any, host:NAME or pool:NAME"):
        client.start_run("Somewhere", model="demo", placement="moon")


def test_a_worker_elsewhere_leaves_a_run_placed_on_this_machine(
    client: Client, make_executor: MakeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = client.start_run("Mine", model="demo", placement="host:desk-1")
    anywhere = client.start_run("Anywhere", model="demo", placement="any")
    monkeypatch.setenv("DESKTOP_AGENT_HOST", "laptop-2")  # a worker on another machine
    drain(client.store, make_executor())
    assert client.run(anywhere.id).status in (RunStatus.COMPLETED, RunStatus.WAITING)
    assert client.run(mine.id).status == RunStatus.QUEUED  # not its to take
    monkeypatch.setenv("DESKTOP_AGENT_HOST", "desk-1")  # a worker on the run's machine
    drain(client.store, make_executor())
    assert client.run(mine.id).status != RunStatus.QUEUED


def test_the_cli_takes_and_shows_a_placement(client: Client) -> None:
    started = cli(
        client.db_path, "run", "Pooled", "--model", "demo", "--placement", "pool:gpu",
        "--detach", "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["id"]
    if json.loads(started.stdout).get("worker_started"):  # --detach started one: end it
        os.kill(int(json.loads(started.stdout)["worker_started"]), signal.SIGTERM)
    assert json.loads(started.stdout)["placement"] == "pool:gpu"
    shown = cli(client.db_path, "show", run_id)
    assert "  placement: pool:gpu (only workers of the pool gpu run it)" in shown.stdout
    bad = cli(client.db_path, "run", "Nowhere", "--model", "demo", "--placement", "moon")
    assert bad.returncode == 2 and "any, host:NAME or pool:NAME" in bad.stderr
