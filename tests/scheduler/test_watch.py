"""Folder triggers: each new file in a watched folder starts one run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import wait_status
from tests.scheduler.conftest import RigFactory, wait_until

HAIKU = "claude-haiku-4-5"


def drop(path: Path, text: str, age_s: float = 10.0) -> None:
    """Write a file that finished landing ``age_s`` seconds ago."""
    path.write_text(text)
    past = time.time() - age_s
    os.utime(path, (past, past))


def test_each_new_file_starts_one_run(client: Client, make_rig: RigFactory, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    drop(inbox / "old.pdf", "there before the watch")
    rig = make_rig(ScriptedModel([Reply("summarised")]))
    watch = rig.sched.add_watch(
        inbox, "Summarise {name}", pattern="*.pdf", every_s=0.5, options=RunOptions(model=HAIKU)
    )
    wait_until(lambda: f"watch:{watch.id}" in rig.service.job_ids(), what="the watch job")
    drop(inbox / "a.pdf", "alpha")
    drop(inbox / "skip.txt", "not a pdf")
    (inbox / "b.pdf").write_text("still being written")  # too fresh: the next scan
    wait_until(lambda: len(rig.runs(schedule_id=watch.id)) == 2, what="runs for a.pdf, b.pdf")
    rounds = rig.service.rounds
    scans = rounds["scan"]
    wait_until(lambda: rounds["scan"] >= scans + 3, what="three more scans")
    runs = rig.runs(schedule_id=watch.id)  # which found nothing new
    assert sorted(r.goal for r in runs) == ["Summarise a.pdf", "Summarise b.pdf"]
    for run in runs:
        wait_status(rig.client, run.id, RunStatus.COMPLETED)
        name = run.goal.split()[-1]
        copy = Path(run.workspace) / name
        assert copy.read_text() == (inbox / name).read_text()
        assert not str(run.workspace).startswith(str(inbox))

    drop(inbox / "a.pdf", "alpha, second edition", age_s=5)  # changed: a new file
    wait_until(lambda: len(rig.runs(schedule_id=watch.id)) == 3, what="the changed file")
    rig.sched.pause_watch(watch.id)
    wait_until(lambda: f"watch:{watch.id}" not in rig.service.job_ids(), what="paused")
    syncs = rounds["sync"]
    wait_until(lambda: rounds["sync"] >= syncs + 2, what="two syncs (a scan under way ends)")
    scans, syncs = rounds["scan"], rounds["sync"]
    drop(inbox / "c.pdf", "gamma")
    # Three more syncs re-read the watch's definition: still paused, no scan, no new run.
    wait_until(lambda: rounds["sync"] >= syncs + 3, what="three more syncs")
    assert rounds["scan"] == scans
    assert f"watch:{watch.id}" not in rig.service.job_ids()
    assert len(rig.runs(schedule_id=watch.id)) == 3
    rig.sched.resume_watch(watch.id)
    wait_until(lambda: len(rig.runs(schedule_id=watch.id)) == 4, what="c.pdf after resume")
    seen = rig.sched.store.seen_files(watch.id)
    assert sorted(Path(k.path).name for k in seen) == [
        "a.pdf",
        "a.pdf",
        "b.pdf",
        "c.pdf",
        "old.pdf",
    ]

    rig.sched.remove_watch(watch.id)
    with pytest.raises(InvalidInputError, match="not a folder"):
        rig.sched.add_watch(tmp_path / "missing", "x")
