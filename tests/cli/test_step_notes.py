"""The analyst's notes on steps: ``note``, ``notes``, ``show``, exports, search, archives.

A demo run is driven to its end in this process over a real SQLite file; the CLI runs as a
child process. A note is the analyst's: it never enters the run's conversation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import RunStatus
from desktop_agent.persistence.archive import read_archive
from tests.cli.test_tags import cli
from tests.conftest import MakeExecutor, drain


def _finished(client: Client, make_executor: MakeExecutor, workspace: Path) -> str:
    run = client.start_run("Survey the notes", model="demo", workspace=workspace, tags=["q3"])
    drain(client.store, make_executor())
    assert client.run(run.id).status in (RunStatus.COMPLETED, RunStatus.WAITING)
    return run.id


def test_a_note_is_shown_under_its_step_listed_found_and_exported(
    client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path
) -> None:
    run_id = _finished(client, make_executor, workspace)
    db = client.db_path
    before = client.steps(run_id)
    done = cli(db, "note", run_id[:6], "2", "The supplier list looks stale", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["seq"] == 2

    listed = json.loads(cli(db, "notes", run_id, "--json").stdout)
    assert [(n["seq"], n["text"]) for n in listed] == [(2, "The supplier list looks stale")]
    shown = cli(db, "show", run_id).stdout.splitlines()
    at = next(i for i, line in enumerate(shown) if line.startswith("[   2]"))
    assert "✎" in shown[at + 1] and "The supplier list looks stale" in shown[at + 1]
    as_json = json.loads(cli(db, "show", run_id, "--json").stdout)
    assert as_json["notes"][0]["text"] == "The supplier list looks stale"
    # Never part of the journal (which is all the agent is sent): the steps are as they were.
    assert client.steps(run_id) == before

    found = json.loads(cli(db, "search", "supplier stale", "--json").stdout)
    hits = found["hits"] if isinstance(found, dict) else found
    assert any(h["run_id"] == run_id and h["seq"] == 2 and h["kind"] == "note" for h in hits)

    md, html = tmp_path / "r.md", tmp_path / "r.html"
    assert cli(db, "export", run_id, "--format", "md", "--out", str(md)).returncode == 0
    assert cli(db, "export", run_id, "--format", "html", "--out", str(html)).returncode == 0
    lines = md.read_text(encoding="utf-8").splitlines()
    step2 = next(i for i, line in enumerate(lines) if line.startswith("| 2 |"))
    assert lines[step2 + 1] == "| | ✎ note | The supplier list looks stale | | | | |"
    assert "| Tags | q3 |" in lines
    assert "<tr class='note'>" in html.read_text(encoding="utf-8")


def test_bad_notes_are_refused_and_an_archived_run_takes_none(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run_id = _finished(client, make_executor, workspace)
    db = client.db_path
    empty = cli(db, "note", run_id, "1", "   ")
    assert empty.returncode == 2 and "the note is empty" in empty.stderr
    beyond = cli(db, "note", run_id, "999", "too far")
    assert beyond.returncode == 2 and "has no step 999" in beyond.stderr
    assert cli(db, "note", run_id, "1", "kept").returncode == 0

    if not client.run(run_id).status.is_terminal:  # the demo waits to write its report
        client.cancel(run_id)
        drain(client.store, make_executor())
    later = Scheduling(client, clock=lambda: time.time() + 3600.0)
    result = later.archive(older_than_s=60.0)
    assert result.run_ids == [run_id] and result.path is not None
    record = read_archive(result.path)[0]
    assert record["tags"] == ["q3"] and [n["text"] for n in record["notes"]] == ["kept"]
    refused = cli(db, "note", run_id, "1", "after archiving")
    assert refused.returncode == 2 and "archived here, read-only" in refused.stderr
    refused_tag = cli(db, "tag", run_id, "+late")
    assert refused_tag.returncode == 2 and "read-only" in refused_tag.stderr

    Scheduling(client).unarchive(run_id)
    assert client.run(run_id).tags == ("q3",)
    assert [n["text"] for n in json.loads(cli(db, "notes", run_id, "--json").stdout)] == ["kept"]
