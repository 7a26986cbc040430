"""Scheduled runs: cron and interval templates, overlap policies, runtime changes, misfires."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.ports import ModelRequest, SystemClock
from desktop_agent.scheduler.service import SchedulerConfig, SchedulerService
from desktop_agent.worker.scheduling import DbSchedulerPort
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_status
from tests.scheduler.conftest import RigFactory, answered, wait_until

HAIKU = "claude-haiku-4-5"
HOUR = 3600.0


def _done() -> ScriptedModel:
    return ScriptedModel([Reply("done")])


def _asks_first() -> ScriptedModel:
    """Each run asks the analyst a question, so it stays active until answered."""

    def script(req: ModelRequest) -> Reply:
        if answered(req.messages):
            return Reply("done")
        return Reply("one question", [("ask_user", {"question": "go on?"})])

    return ScriptedModel(script)


def test_an_interval_schedule_starts_runs_from_its_template_at_its_times(
    client: Client, make_rig: RigFactory, clock: FakeClock, tmp_path: Path
) -> None:
    ws = tmp_path / "digest-ws"
    rig = make_rig(_done())
    s = rig.sched.add_schedule(
        "Write the digest",
        every_s=HOUR,
        options=RunOptions(model=HAIKU, workspace=ws, tools=["list_files"], max_steps=7),
    )
    rig.settle()
    assert rig.runs(schedule_id=s.id) == []

    clock.advance(HOUR - 1)
    rig.settle()
    assert rig.runs(schedule_id=s.id) == []
    clock.advance(1)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 1, what="the first firing")
    (first,) = rig.runs(schedule_id=s.id)
    wait_status(rig.client, first.id, RunStatus.COMPLETED)
    assert first.goal == "Write the digest"
    assert first.created_at == s.created_at + HOUR
    assert first.model == HAIKU and first.spec.tool_names == ("list_files",)
    assert first.budget.max_steps == 7 and first.workspace == str(ws)

    clock.advance(HOUR)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 2, what="the second firing")
    # Ended first: a firing while it is active is skipped (the schedule's overlap policy).
    wait_status(rig.client, rig.runs(schedule_id=s.id)[1].id, RunStatus.COMPLETED)
    # Three firings fall due while the clock jumps: one run, not three.
    clock.advance(3 * HOUR + 60)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 3, what="the coalesced firing")
    rig.settle()
    runs = rig.runs(schedule_id=s.id)
    assert len(runs) == 3
    after = rig.sched.schedule(s.id)
    assert after.fire_count == 3
    assert after.last_fire_at == s.created_at + 5 * HOUR
    assert "3 firings coalesced" in after.last_result
    assert after.last_run_id == runs[-1].id


def test_a_cron_schedule_fires_at_its_wall_clock_times(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    start = datetime.fromtimestamp(clock.now(), UTC)
    assert (start.hour, start.minute) == (8, 0)  # FakeClock starts at 08:00 UTC
    rig = make_rig(_done())
    s = rig.sched.add_schedule(
        "Morning check", cron="30 9 * * *", timezone="UTC", options=RunOptions(model=HAIKU)
    )
    clock.advance(HOUR + 29 * 60)  # 09:29
    rig.settle()
    assert rig.runs(schedule_id=s.id) == []
    clock.advance(60)  # 09:30
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 1, what="09:30")
    clock.advance(23 * HOUR)  # 08:30 the next day
    rig.settle()
    assert len(rig.runs(schedule_id=s.id)) == 1
    clock.advance(HOUR)  # 09:30 the next day
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 2, what="09:30 the next day")
    fired = [datetime.fromtimestamp(r.created_at, UTC) for r in rig.runs(schedule_id=s.id)]
    assert [(f.day - start.day, f.hour, f.minute) for f in fired] == [(0, 9, 30), (1, 9, 30)]


def test_overlap_skip_drops_a_firing_while_the_previous_run_is_active(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    rig = make_rig(_asks_first())
    s = rig.sched.add_schedule("Poll", every_s=HOUR, options=RunOptions(model=HAIKU))
    clock.advance(HOUR)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 1, what="the first run")
    (first,) = rig.runs(schedule_id=s.id)
    wait_status(rig.client, first.id, RunStatus.WAITING)

    clock.advance(HOUR)
    wait_until(lambda: rig.sched.schedule(s.id).skipped == 1, what="a skipped firing")
    assert len(rig.runs(schedule_id=s.id)) == 1
    assert f"run {first.id} is still active" in rig.sched.schedule(s.id).last_result

    client.answer(first.id, "yes")
    rig.worker.nudge()
    wait_status(rig.client, first.id, RunStatus.COMPLETED)
    rig.settle()
    assert len(rig.runs(schedule_id=s.id)) == 1  # a skipped firing is not made up later
    clock.advance(HOUR)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 2, what="the next firing")


def test_overlap_queue_starts_the_firing_when_the_previous_run_ends(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    rig = make_rig(_asks_first())
    s = rig.sched.add_schedule(
        "Poll", every_s=HOUR, overlap="queue", options=RunOptions(model=HAIKU)
    )
    clock.advance(HOUR)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 1, what="the first run")
    (first,) = rig.runs(schedule_id=s.id)
    wait_status(rig.client, first.id, RunStatus.WAITING)

    clock.advance(HOUR)
    wait_until(lambda: rig.sched.schedule(s.id).queued == 1, what="a queued firing")
    rig.settle()
    assert len(rig.runs(schedule_id=s.id)) == 1

    client.answer(first.id, "yes")
    rig.worker.nudge()
    # No clock movement: the end of the first run starts the queued one.
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 2, what="the queued run")
    assert rig.status(first.id) == RunStatus.COMPLETED
    after = rig.sched.schedule(s.id)
    assert after.queued == 0 and after.skipped == 0


def test_schedules_are_paused_resumed_and_removed_while_the_worker_runs(
    client: Client, make_rig: RigFactory, clock: FakeClock
) -> None:
    rig = make_rig(_done())
    s = rig.sched.add_schedule("Tick", every_s=HOUR, options=RunOptions(model=HAIKU))
    wait_until(lambda: f"schedule:{s.id}" in rig.service.job_ids(), what="the job")

    rig.sched.pause_schedule(s.id)
    wait_until(lambda: f"schedule:{s.id}" not in rig.service.job_ids(), what="the job removed")
    clock.advance(2 * HOUR)
    rig.settle()
    assert rig.runs(schedule_id=s.id) == []

    resumed = rig.sched.resume_schedule(s.id)
    assert resumed.last_fire_at == clock.now()
    wait_until(lambda: f"schedule:{s.id}" in rig.service.job_ids(), what="the job back")
    rig.settle()
    assert rig.runs(schedule_id=s.id) == []  # what was missed while paused is not caught up
    clock.advance(HOUR)
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) == 1, what="a firing after resume")

    rig.sched.remove_schedule(s.id)
    wait_until(lambda: f"schedule:{s.id}" not in rig.service.job_ids(), what="the job gone")
    clock.advance(5 * HOUR)
    rig.settle()
    assert len(rig.runs(schedule_id=s.id)) == 1
    with pytest.raises(InvalidInputError, match="cron"):
        rig.sched.add_schedule("x", cron="0 25 * * *")


def test_firings_missed_while_no_worker_ran_fire_once_at_start(client: Client) -> None:
    sched = Scheduling(client)
    s = sched.add_schedule("Digest", every_s=HOUR, options=RunOptions(model=HAIKU))
    created = time.time() - 3.5 * HOUR  # made three and a half hours ago; no worker since
    with client.store.db.write() as conn:
        conn.exec_driver_sql("UPDATE schedules SET created_at = ? WHERE id = ?", (created, s.id))

    def start() -> SchedulerService:
        port = DbSchedulerPort(client.store, SystemClock(), client.db_path.parent)
        service = SchedulerService(
            port,
            SystemClock(),
            nudge=lambda: None,
            config=SchedulerConfig(sync_s=60, housekeeping_s=60, stuck_after_s=None),
        )
        service.start()
        return service

    service = start()
    try:
        wait_until(lambda: sched.schedule(s.id).fire_count == 1, what="the missed firing")
        assert service.wait_idle()
        job = service.job(f"schedule:{s.id}")
        assert job is not None and job.misfire_grace_time is None and job.coalesce
        next_real = job.next_run_time
        assert next_real is not None
        assert next_real.timestamp() == pytest.approx(created + 4 * HOUR, abs=1)
    finally:
        service.stop()
    after = sched.schedule(s.id)
    assert after.last_fire_at == pytest.approx(created + 3 * HOUR)
    assert "3 firings coalesced" in after.last_result
    (run,) = [r for r in client.runs() if r.schedule_id == s.id]
    assert run.status == RunStatus.QUEUED

    service = start()  # a second start finds nothing due
    try:
        assert service.wait_idle()
    finally:
        service.stop()
    assert sched.schedule(s.id).fire_count == 1
    assert len([r for r in client.runs() if r.schedule_id == s.id]) == 1


def test_an_interval_schedule_fires_on_real_time(client: Client, make_rig: RigFactory) -> None:
    rig = make_rig(_done(), real_time=True)
    s = rig.sched.add_schedule("Fast", every_s=1.0, options=RunOptions(model=HAIKU))
    wait_until(lambda: len(rig.runs(schedule_id=s.id)) >= 3, what="three real-time firings")
    fired = rig.sched.schedule(s.id)
    rig.sched.remove_schedule(s.id)
    runs = rig.runs(schedule_id=s.id)[:3]
    # Fired on its one-second grid of real time, however late a loaded machine runs the
    # jobs: the k-th run never starts before the k-th slot (a late firing is coalesced,
    # using up slots), and the latest firing is a slot of the grid.
    offsets = [r.created_at - s.created_at for r in runs]
    assert all(offset >= k - 1e-6 for k, offset in enumerate(offsets, start=1)), offsets
    assert offsets == sorted(offsets)
    assert fired.last_fire_at is not None and fired.fire_count >= 3
    slot = fired.last_fire_at - s.created_at
    assert slot == pytest.approx(round(slot), abs=1e-6) and round(slot) >= fired.fire_count
    for run in runs:
        wait_status(rig.client, run.id, RunStatus.COMPLETED)
