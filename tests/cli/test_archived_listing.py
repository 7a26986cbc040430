"""``runs --archived``/``--imported`` list the runs that left the journal; ``show`` reads them.

Real SQLite files and real archive files: one run archived by retention, one brought in
from another installation's bundle, one still live. Every command ``show`` suggests for
them is run, and must work.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.shapes import run_json
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.export.conftest import cli
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.scheduler.test_retention import DAY

HAIKU = "claude-haiku-4-5"


def _finished(client: Client, goal: str, answer: str, clock: FakeClock | None = None) -> str:
    """A run of ``client`` that completed, its model answering ``answer``."""
    if clock is not None:
        client.store.now = clock.now
    run = client.start_run(goal, model=HAIKU)
    model = ScriptedModel([Reply(answer)])
    executor = build_executor(
        client.store,
        client.settings,
        clock=clock,
        model_for=lambda _name: model,
        config=EngineConfig(settings=client.settings),
    )
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.COMPLETED
    return run.id


def _imported_bundle(tmp_path: Path) -> tuple[Path, str]:
    """A bundle exported by another installation, and its run's id."""
    origin_db = tmp_path / "origin" / "desktop-agent.db"
    origin_db.parent.mkdir()
    Settings(default_max_cost_usd=None, default_max_steps=None).save(origin_db)
    origin = Client(origin_db)
    try:
        run_id = _finished(origin, "Wombat burrow survey", "Wombats dig 12 burrows a season.")
    finally:
        origin.close()
    bundle = tmp_path / "wombats.tar.gz"
    done = cli(origin_db, "export", run_id, "--format", "bundle", "--out", str(bundle))
    assert done.returncode == 0, done.stderr
    return bundle, run_id


@pytest.fixture
def three_runs(client: Client, tmp_path: Path) -> dict[str, str]:
    """An archived run, an imported one and a live one in the client's database."""
    clock = FakeClock()
    archived = _finished(client, "Quokka census", "The census counted 41 quokkas.", clock)
    clock.advance(40 * DAY)
    assert Scheduling(client, clock.now).archive(30 * DAY).run_ids == [archived]
    live = _finished(client, "Numbat sightings", "Three numbats were seen.", clock)
    bundle, imported = _imported_bundle(tmp_path)
    done = cli(client.db_path, "import", str(bundle))
    assert done.returncode == 0, done.stderr
    return {"archived": archived, "imported": imported, "live": live}


def _hints(text: str) -> list[list[str]]:
    """The commands (as argument lists) that ``show``'s ``next:`` lines name."""
    found = []
    for line in text.splitlines():
        if line.strip().startswith("next:"):
            for command in re.findall(r"`desktop-agent ([^`]+)`", line):
                found.append(command.split())
    return found


def test_runs_archived_and_imported_list_them_with_the_runs_shape_and_their_flags(
    client: Client, three_runs: dict[str, str]
) -> None:
    live = json.loads(cli(client.db_path, "runs", "--json").stdout)
    assert [r["id"] for r in live] == [three_runs["live"]]  # the plain list is unchanged

    listed = cli(client.db_path, "runs", "--archived", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {three_runs["archived"], three_runs["imported"]}
    shape = set(run_json(client.run(three_runs["live"])))
    for row in rows.values():
        assert set(row) == shape | {"archived", "imported"}
        assert row["archived"] is True and row["status"] == "completed"
    assert rows[three_runs["imported"]]["imported"] is True
    assert rows[three_runs["archived"]]["imported"] is False
    assert rows[three_runs["archived"]]["goal"] == "Quokka census"
    assert rows[three_runs["archived"]]["steps"] >= 1

    only = json.loads(cli(client.db_path, "runs", "--imported", "--json").stdout)
    assert [(r["id"], r["imported"]) for r in only] == [(three_runs["imported"], True)]

    text = cli(client.db_path, "runs", "--archived").stdout
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert "completed (archived)" in lines[three_runs["archived"][:10]]
    assert "completed (imported)" in lines[three_runs["imported"][:10]]
    assert "Quokka census" in text and "Numbat" not in text

    searched = cli(client.db_path, "runs", "--archived", "--search", "wombat", "--json")
    assert [r["id"] for r in json.loads(searched.stdout)] == [three_runs["imported"]]
    none = cli(client.db_path, "runs", "--imported", "--status", "failed")
    assert none.returncode == 0 and "no imported run with status failed" in none.stdout


def test_show_full_prints_an_archived_or_imported_runs_text_and_only_hints_that_work(
    client: Client, three_runs: dict[str, str]
) -> None:
    imported = three_runs["imported"]
    shown = cli(client.db_path, "show", imported)
    assert shown.returncode == 0, shown.stderr
    assert "imported from wombats.tar.gz, read-only" in shown.stdout
    assert "db unarchive" not in shown.stdout  # it would be refused: imported runs stay out
    hints = _hints(shown.stdout)
    assert hints == [["show", imported, "--full"]]
    full = cli(client.db_path, *hints[0])
    assert full.returncode == 0, full.stderr
    assert "Wombats dig 12 burrows a season." in full.stdout  # the step's text
    assert full.stdout.rstrip().endswith("Report:\nWombats dig 12 burrows a season.")
    assert _hints(full.stdout) == []  # read-only: nothing to do but read it

    archived = three_runs["archived"]
    shown = cli(client.db_path, "show", archived[:8])
    assert shown.returncode == 0, shown.stderr
    assert f"Run {archived}  completed (archived in " in shown.stdout
    hints = _hints(shown.stdout)
    assert hints == [["show", archived, "--full"], ["db", "unarchive", archived]]
    full = cli(client.db_path, *hints[0])
    assert full.returncode == 0, full.stderr
    assert '"text": "The census counted 41 quokkas."' in full.stdout  # the step's output
    assert "Report:\nThe census counted 41 quokkas." in full.stdout
    back = cli(client.db_path, *hints[1])
    assert back.returncode == 0, back.stderr
    assert client.run(archived).goal == "Quokka census"
    still = json.loads(cli(client.db_path, "runs", "--archived", "--json").stdout)
    assert [r["id"] for r in still] == [imported]  # back in the journal: listed live again
