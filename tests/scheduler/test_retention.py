"""Retention: finished runs archived to a compressed file and removed; size and VACUUM."""

from __future__ import annotations

import stat
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.persistence.archive import ARCHIVE_FORMAT, read_archive
from desktop_agent.persistence.db import head_revision
from desktop_agent.scheduler.service import SchedulerConfig
from desktop_agent.worker.scheduling import scheduler_config
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.scheduler.conftest import RigFactory, wait_until

HAIKU = "claude-haiku-4-5"
DAY = 86400.0
FAKE_KEY = "sk-ant-api03-" + "x" * 24


def _finished_run(client: Client, make_executor: MakeExecutor, clock: FakeClock, goal: str) -> str:
    client.store.now = clock.now
    run = client.start_run(goal, model=HAIKU)
    client.steer(run.id, f"use the key {FAKE_KEY} if asked")  # must never reach an archive
    drain(client.store, make_executor(ScriptedModel([Reply("done")]), clock=clock), clock=clock)
    assert client.run(run.id).status == RunStatus.COMPLETED
    return run.id


def test_old_finished_runs_are_archived_then_removed(
    client: Client, make_executor: MakeExecutor, clock: FakeClock
) -> None:
    sched = Scheduling(client, clock.now)
    old = _finished_run(client, make_executor, clock, "old one")
    old_steps = len(client.steps(old))
    clock.advance(40 * DAY)
    recent = _finished_run(client, make_executor, clock, "recent one")
    active = client.start_run("still queued", model=HAIKU).id

    result = sched.archive(30 * DAY)
    assert result.run_ids == [old]
    assert result.path is not None and result.path.parent == client.db_path.parent / "archives"
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    (record,) = read_archive(result.path)
    assert record["format"] == ARCHIVE_FORMAT
    assert record["run"]["id"] == old and record["run"]["goal"] == "old one"
    assert record["run"]["spec"]["model"] == HAIKU
    assert len(record["steps"]) == old_steps
    assert [c["kind"] for c in record["commands"]] == ["steer"]
    assert record["approvals"] == []
    text = result.path.read_bytes()
    assert FAKE_KEY.encode() not in text and "[redacted]" in str(record["commands"])

    assert {r.id for r in client.runs()} == {recent, active}
    with client.store.db.read() as conn:
        for table in ("steps", "commands", "snapshots", "approvals"):
            n = conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE run_id = ?", (old,))
            assert n.scalar() == 0, table
    again = sched.archive(30 * DAY)
    assert again.path is None and again.run_ids == []

    info = sched.db_info()
    assert info.rows["runs"] == 2 and info.revision == head_revision()
    after = sched.vacuum()
    assert after.wal_bytes == 0 and after.file_bytes > 0


def test_retention_is_off_by_default_and_archives_in_the_worker_when_set(
    client: Client, make_executor: MakeExecutor, make_rig: RigFactory, clock: FakeClock
) -> None:
    assert Settings().retention_days is None
    assert scheduler_config(Settings()).retention_s is None
    assert scheduler_config(Settings(retention_days=30)).retention_s == 30 * DAY

    sched = Scheduling(client, clock.now)
    batch_lines = client.db_path.parent / "items.txt"
    batch_lines.write_text("one\n")
    old = _finished_run(client, make_executor, clock, "old one")
    batch = sched.start_batch("Do {item}", lines=batch_lines, options=RunOptions(model=HAIKU))
    config = SchedulerConfig(sync_s=0.1, housekeeping_s=0.1, retention_s=30 * DAY)
    rig = make_rig(ScriptedModel([Reply("done")]), config=config)
    wait_until(lambda: sched.batch_progress(batch.id).completed == 1, what="the batch item")
    rig.settle()
    assert client.run(old).status == RunStatus.COMPLETED  # not old enough yet

    clock.advance(31 * DAY)
    wait_until(lambda: client.runs() == [], what="retention to archive both runs")
    archives = list((client.db_path.parent / "archives").glob("runs-*.jsonl.gz"))
    archived = {rec["run"]["id"] for path in archives for rec in read_archive(path)}
    assert old in archived and len(archived) == 2
    # The batch's progress outlives its archived runs.
    assert sched.batch_progress(batch.id).describe() == "1 / 1 done"
    assert Path(archives[0]).stat().st_size > 0
