"""Durable times across SIGKILL: real worker processes, killed, and restarted hours "later".

Each worker here is ``python -m desktop_agent --db DB worker``. Hours pass between two
workers through ``DESKTOP_AGENT_CLOCK_OFFSET``: the restarted worker's clock runs ahead of
real time, so every wake-up, deadline and firing that fell due "while it was down" is due
when it starts. Each is expected to happen exactly once, also across a further restart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.domain import ApprovalState, EffectClass, Run, RunStatus, StepKind, WaitReason
from desktop_agent.domain.errors import RateLimitedError
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.engine.ports import ModelRequest
from tests.conftest import MakeExecutor, drain
from tests.helpers import postgres
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import wait_worker
from tests.scheduler.conftest import Children, kill, wait_until

pytestmark = pytest.mark.crash


@pytest.fixture(params=postgres.BACKENDS)
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The database of the test, as a SQLite file or on PostgreSQL (the same tests hold)."""
    with postgres.database_for(tmp_path / "data", request.param):
        yield tmp_path / "data" / "desktop-agent.db"


HOUR = 3600.0
Journal = list[tuple[int, str, str, str, int]]


def journal(client: Client, run_id: str) -> Journal:
    return [(s.seq, str(s.kind), s.name, str(s.status), s.attempt) for s in client.steps(run_id)]


def demo_finishes_alone(client: Client) -> None:
    """Child workers' settings: the demo model writes its report without asking."""
    client.settings.ask_overwrite = False
    client.settings.save(client.db_path)


def test_wake_ups_that_fell_due_while_the_worker_was_down_fire_once_at_restart(
    client: Client, make_executor: MakeExecutor, children: Children, tmp_path: Path
) -> None:
    demo_finishes_alone(client)
    t0 = time.time()
    ws = tmp_path / "approve-ws"
    ws.mkdir()
    (ws / "x.md").write_text("original\n")

    def first_moves(req: ModelRequest) -> Reply:
        goal = str(req.messages[0])
        if "timer" in goal:
            hours = int(goal.split("timer ")[1][0])
            return Reply("sleeping", [("wait", {"until": t0 + hours * HOUR})])
        if "rate" in goal:
            return Reply(raises=RateLimitedError("429 slow down", retry_after=1.5 * HOUR))
        return Reply("overwrite", [("write_file", {"path": "x.md", "content": "by default\n"})])

    runs = {
        "t1": client.start_run("timer 1", model="demo").id,
        "t2": client.start_run("timer 2", model="demo").id,
        "t3": client.start_run("timer 3", model="demo").id,
        "rate": client.start_run("rate limited", model="demo").id,
        "approval": client.start_run("approval", model="demo", workspace=ws).id,
    }
    engine = client.settings.updated(
        {
            "ask_unsafe": True,
            "ask_overwrite": True,
            "approval_deadline_s": HOUR,
            "approval_default": "approve",
        }
    )
    # First activations here (a scripted model stands in for the demo), until each waits.
    drain(
        client.store,
        make_executor(ScriptedModel(first_moves), config=EngineConfig(settings=engine)),
    )
    reasons = {k: client.run(v).wait_reason for k, v in runs.items()}
    assert reasons == {
        "t1": WaitReason.TIMER,
        "t2": WaitReason.TIMER,
        "t3": WaitReason.TIMER,
        "rate": WaitReason.RATE_LIMIT,
        "approval": WaitReason.APPROVAL,
    }
    schedule = Scheduling(client).add_schedule(
        "Hourly digest", every_s=HOUR, options=RunOptions(model="demo")
    )

    def scheduled() -> list[Run]:
        return [r for r in client.runs() if r.schedule_id == schedule.id]

    with children.worker() as proc:  # nothing is due yet
        wait_worker(client, proc=proc, log=children.log)
        # Its scheduler built every job from the database and ran its first housekeeping
        # and a sync, and the worker polled three times: anything due would have started.
        children.wait_rounds(housekeeping=1, sync=1, poll=3)
        kill(proc)
    assert all(client.run(r).status == RunStatus.WAITING for r in runs.values())
    assert scheduled() == []

    with children.worker(offset_s=2.5 * HOUR) as proc:  # two and a half hours later
        due = [runs[k] for k in ("t1", "t2", "rate", "approval")]
        wait_until(
            lambda: (
                all(client.run(r).status == RunStatus.COMPLETED for r in due)
                and [r.status for r in scheduled()] == [RunStatus.COMPLETED]
            ),
            what=f"the due wake-ups:\n{children.log()}",
        )
        children.wait_rounds(children.rounds(), sync=1, poll=3)  # nothing more to fire
        kill(proc)
    t3 = client.run(runs["t3"])
    assert t3.status == RunStatus.WAITING and t3.wake_at == pytest.approx(t0 + 3 * HOUR)
    fired = Scheduling(client).schedule(schedule.id)
    assert fired.fire_count == 1 and "2 firings coalesced" in fired.last_result
    (approval,) = client.store.list_approvals(None, runs["approval"])
    assert approval.state == ApprovalState.EXPIRED and "(approve)" in approval.decision_note
    assert (ws / "x.md").read_text() == "by default\n"
    for key in ("t1", "t2"):
        (sleep,) = [s for s in client.steps(runs[key]) if s.kind == StepKind.SLEEP]
        assert sleep.attempt == 1 and sleep.finished_at is not None
        assert sleep.finished_at >= t0 + 2.5 * HOUR  # woken on the restarted worker's clock
    before = {k: journal(client, v) for k, v in runs.items()}
    before["scheduled"] = journal(client, scheduled()[0].id)

    with children.worker(offset_s=2.5 * HOUR) as proc:  # and once more: nothing fires again
        wait_worker(client, proc=proc, log=children.log)
        children.wait_rounds(housekeeping=1, sync=2, poll=3)
        kill(proc)
    after = {k: journal(client, v) for k, v in runs.items()}
    assert len(scheduled()) == 1
    after["scheduled"] = journal(client, scheduled()[0].id)
    assert after == before
    assert Scheduling(client).schedule(schedule.id).fire_count == 1
    assert client.run(runs["t3"]).status == RunStatus.WAITING


def test_a_batch_killed_halfway_resumes_at_the_right_item_and_does_none_twice(
    client: Client, children: Children, tmp_path: Path
) -> None:
    demo_finishes_alone(client)
    lines = tmp_path / "items.txt"
    lines.write_text("".join(f"item {i:02d}\n" for i in range(50)))
    sched = Scheduling(client)
    batch = sched.start_batch(
        "Summarise {item}", lines=lines, concurrency=4, options=RunOptions(model="demo")
    )

    with children.worker(DESKTOP_AGENT_DEMO_DELAY="0.05") as proc:
        wait_until(
            lambda: sched.batch_progress(batch.id).completed >= 20,
            60,
            f"20 items done:\n{children.log()}",
        )
        kill(proc)
    at_kill = {i.idx: i for i in sched.batch_items(batch.id)}
    done_at_kill = sum(i.status == "completed" for i in at_kill.values())
    assert 20 <= done_at_kill < 50
    dispatched = {idx: i.run_id for idx, i in at_kill.items() if i.run_id is not None}
    assert sorted(dispatched) == list(range(len(dispatched)))  # in order, none skipped
    in_flight = {r for idx, r in dispatched.items() if at_kill[idx].status == "running"}

    with children.worker() as proc:
        wait_until(
            lambda: sched.batch_progress(batch.id).finished,
            60,
            f"the rest of the batch:\n{children.log()}",
        )
        kill(proc)
    progress = sched.batch_progress(batch.id)
    assert progress.describe() == "50 / 50 done"
    items = sched.batch_items(batch.id)
    runs = {r.id: r for r in client.runs(limit=1000) if r.parent_id == batch.id}
    assert len(runs) == 50 and {i.run_id for i in items} == set(runs)
    for item in items:
        assert item.attempts == 1
        if item.idx in dispatched:
            assert item.run_id == dispatched[item.idx]  # the same run, resumed
    later = [i for i in items if i.idx not in dispatched]
    assert later, "the kill came after every item was dispatched"
    created = [runs[str(i.run_id)].created_at for i in later]
    assert created == sorted(created)  # restarted at the first item not yet started
    for run_id, run in runs.items():
        assert run.status == RunStatus.COMPLETED
        assert run.goal == f"Summarise {items[[i.run_id for i in items].index(run_id)].item}"
        steps = client.steps(run_id)
        writes = [s for s in steps if s.name == "write_file"]
        assert len(writes) == 2  # draft and revision, once each
        repeated = [s for s in steps if s.attempt > 1]
        if run_id not in in_flight:
            assert repeated == []
        assert all(s.effect != EffectClass.UNSAFE for s in repeated)
        assert (Path(run.workspace) / "report.md").exists()
        # In the database's data folder (on PostgreSQL too), not the worker's current one.
        assert Path(run.workspace).is_relative_to(client.db_path.parent / "workspaces")


def test_a_file_dropped_while_the_worker_was_down_starts_exactly_one_run(
    client: Client, children: Children, tmp_path: Path
) -> None:
    demo_finishes_alone(client)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "before.md").write_text("# Before\nThere before the watch.\n")
    sched = Scheduling(client)
    watch = sched.add_watch(
        inbox, "Summarise {name}", every_s=0.5, options=RunOptions(model="demo")
    )

    def started() -> list[Run]:
        return [r for r in client.runs() if r.schedule_id == watch.id]

    with children.worker() as proc:
        wait_worker(client, proc=proc, log=children.log)
        children.wait_rounds(scan=2, poll=3)  # the first scan only notes what is there
        kill(proc)
    assert started() == []

    dropped = inbox / "while-down.md"
    dropped.write_text("# While down\nThis landed while no worker ran.\n")
    past = time.time() - 10
    os.utime(dropped, (past, past))

    with children.worker() as proc:
        wait_until(
            lambda: [r.status for r in started()] == [RunStatus.COMPLETED],
            what=f"the run for the dropped file:\n{children.log()}",
        )
        children.wait_rounds(children.rounds(), scan=3)  # several more scans
        kill(proc)
    with children.worker() as proc:
        wait_worker(client, proc=proc, log=children.log)
        children.wait_rounds(scan=3, poll=3)
        kill(proc)
    (run,) = started()
    assert run.goal == "Summarise while-down.md"
    assert (Path(run.workspace) / "while-down.md").read_text() == dropped.read_text()
    assert "while-down.md" in (Path(run.workspace) / "report.md").read_text()
    seen = {Path(k.path).name for k in sched.store.seen_files(watch.id)}
    assert seen == {"before.md", "while-down.md"}
