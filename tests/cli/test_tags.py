"""Tags on runs from the command line: run --tag, tag RUN +T -T2, runs --tag, show, rerun.

The CLI runs as a child process over a real SQLite file; no worker is started
(``DESKTOP_AGENT_AUTOSTART_WORKER=0``): tags need none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling

REPO = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DESKTOP_AGENT_AUTOSTART_WORKER": "0"}
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def _started(db: Path, *args: str) -> str:
    done = cli(db, "run", "Read the Q3 notes", "--model", "demo", "--detach", "--json", *args)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def test_tags_are_given_at_start_changed_later_and_filter_the_list(client: Client) -> None:
    db = client.db_path
    tagged = _started(db, "--tag", "Q3", "--tag", "urgent")
    other = _started(db, "--tag", "q3")
    _started(db)
    assert client.run(tagged).tags == ("q3", "urgent")

    done = cli(db, "tag", tagged[:6], "+Client:ACME", "-urgent", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "run": tagged,
        "tags": ["client:acme", "q3"],
        "added": ["client:acme"],
        "removed": ["urgent"],
    }
    listed = json.loads(cli(db, "runs", "--tag", "q3", "--json").stdout)
    assert {r["id"]: r["tags"] for r in listed} == {
        tagged: ["client:acme", "q3"],
        other: ["q3"],
    }
    both = json.loads(cli(db, "runs", "--tag", "Q3", "--tag", "client:acme", "--json").stdout)
    assert [r["id"] for r in both] == [tagged]
    table = cli(db, "runs", "--tag", "client:acme").stdout
    assert "TAGS" in table.splitlines()[0] and "client:acme,q3" in table
    assert "no run tagged nope" in cli(db, "runs", "--tag", "nope").stdout
    shown = cli(db, "show", tagged).stdout
    assert "tags:      client:acme, q3" in shown


@pytest.mark.parametrize("bad", ["+has space!", "+" + "x" * 41, "+-lead", "+é"])
def test_a_bad_tag_is_refused_clearly_and_nothing_changes(client: Client, bad: str) -> None:
    run_id = _started(client.db_path, "--tag", "keep")
    done = cli(client.db_path, "tag", run_id, "+fine", bad)
    assert done.returncode == 2
    assert "is not a tag" in done.stderr and "Traceback" not in done.stderr
    assert client.run(run_id).tags == ("keep",)
    refused = cli(client.db_path, "run", "Goal", "--model", "demo", "--detach", "--tag", "a b!")
    assert refused.returncode == 2 and "is not a tag" in refused.stderr
    assert len(client.runs()) == 1


def test_rerun_keeps_the_tags_unless_others_are_given(client: Client) -> None:
    first = _started(client.db_path, "--tag", "q3")
    same = json.loads(cli(client.db_path, "rerun", first, "--json").stdout)
    other = json.loads(cli(client.db_path, "rerun", first, "--tag", "q4", "--json").stdout)
    assert same["tags"] == ["q3"] and other["tags"] == ["q4"]


def test_schedule_batch_and_watch_templates_tag_the_runs_they_start(
    client: Client, tmp_path: Path
) -> None:
    added = cli(
        client.db_path, "schedule", "add", "Daily digest", "--every", "1d", "--model", "demo",
        "--tag", "digest", "--no-worker", "--json",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    sched = Scheduling(client)
    schedule = sched.schedules()[0]
    assert schedule.template.tags == ("digest",)
    assert sched.trigger(schedule.id).tags == ("digest",)
    template = sched.template("Item {item}", RunOptions(model="demo", tags=("Batch",)))
    assert template.tags == ("batch",)
    lines = tmp_path / "items.txt"
    lines.write_text("one\ntwo\n", encoding="utf-8")
    started = cli(
        client.db_path, "batch", "start", "Item {item}", "--lines", str(lines),
        "--model", "demo", "--streamed", "--tag", "batch-a", "--no-worker", "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    batch = sched.batches()[0]
    assert batch.template.tags == ("batch-a",)
