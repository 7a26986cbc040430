"""Batch runs: one goal over many items, a few at a time, with durable per-item progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError, InvalidStateError, PermanentError
from desktop_agent.domain.scheduling import ItemStatus
from desktop_agent.engine.ports import ModelRequest
from tests.helpers.fakes import Reply, ScriptedModel
from tests.scheduler.conftest import RigFactory, ask_then_done, goal_number, wait_until

HAIKU = "claude-haiku-4-5"


def test_a_batch_runs_its_items_a_few_at_a_time_and_reports_progress(
    client: Client, make_rig: RigFactory, tmp_path: Path
) -> None:
    lines = tmp_path / "companies.txt"
    lines.write_text("".join(f"company {i}\n" for i in range(10)) + "\n   \n")
    rig = make_rig(ScriptedModel(ask_then_done))
    batch = rig.sched.start_batch(
        "Profile {item}", lines=lines, concurrency=3, options=RunOptions(model=HAIKU)
    )
    assert batch.total == 10 and batch.source == f"lines of {lines}"

    def waiting() -> list[str]:
        return [r.id for r in rig.runs(parent_id=batch.id) if r.status == RunStatus.WAITING]

    wait_until(lambda: len(waiting()) == 3, what="three items running")
    rig.settle()
    progress = rig.sched.batch_progress(batch.id)
    assert (progress.running, progress.pending, progress.completed) == (3, 7, 0)
    items = rig.sched.batch_items(batch.id)
    assert [i.status for i in items[:4]] == [ItemStatus.RUNNING] * 3 + [ItemStatus.PENDING]
    goals = {r.id: r.goal for r in rig.runs(parent_id=batch.id)}
    assert [goals[i.run_id] for i in items[:3] if i.run_id] == [
        "Profile company 0",
        "Profile company 1",
        "Profile company 2",
    ]

    done = 0
    while done < 10:
        for run_id in waiting():
            client.answer(run_id, "yes")
            done += 1
        rig.worker.nudge()
        wait_until(
            lambda n=done: rig.sched.batch_progress(batch.id).completed >= n,  # type: ignore[misc]
            what=f"{done} done",
        )
        active = [r for r in rig.runs(parent_id=batch.id) if r.status.is_active]
        assert len(active) <= 3
    final = rig.sched.batch_progress(batch.id)
    assert final.describe() == "10 / 10 done" and final.finished
    runs = rig.runs(parent_id=batch.id)
    assert len(runs) == 10
    assert sorted(goal_number(f"Goal: {r.goal}") for r in runs) == list(range(10))


def test_failed_items_are_retried_alone(
    client: Client, make_rig: RigFactory, tmp_path: Path
) -> None:
    broken = {3, 7}

    def script(req: ModelRequest) -> Reply:
        if goal_number(req.messages) in broken:
            return Reply(raises=PermanentError("this document cannot be read"))
        return Reply("done")

    folder = tmp_path / "reports"
    folder.mkdir()
    for i in range(9):
        (folder / f"r{i}.md").write_text(f"report {i}\n")
    (folder / "notes.txt").write_text("not a report\n")
    rig = make_rig(ScriptedModel(script))
    batch = rig.sched.start_batch(
        "Summarise report {name}", folder=folder, pattern="*.md", options=RunOptions(model=HAIKU)
    )
    assert batch.total == 9
    wait_until(lambda: rig.sched.batch_progress(batch.id).finished, what="the batch to end")
    progress = rig.sched.batch_progress(batch.id)
    assert (progress.completed, progress.failed) == (7, 2)
    assert progress.describe() == "7 / 9 done · 2 failed"
    items = rig.sched.batch_items(batch.id)
    failed = [i.idx for i in items if i.status == ItemStatus.FAILED]
    assert failed == [3, 7]
    first_runs = {i.idx: i.run_id for i in items}
    # Each run got a copy of its file in a workspace of its own.
    run3 = client.run(str(first_runs[3]))
    assert (Path(run3.workspace) / "r3.md").read_text() == "report 3\n"
    assert run3.goal == "Summarise report r3.md"

    with pytest.raises(InvalidStateError, match=r"item 0 .* is completed"):
        rig.sched.retry_batch(batch.id, [0])
    broken.clear()
    assert rig.sched.retry_batch(batch.id, [3]) == [3]
    wait_until(lambda: rig.sched.batch_progress(batch.id).failed == 1, what="item 3 again")
    wait_until(lambda: rig.sched.batch_progress(batch.id).finished, what="the retry to end")
    assert rig.sched.retry_batch(batch.id) == [7]
    wait_until(lambda: rig.sched.batch_progress(batch.id).completed == 9, what="all done")

    items = rig.sched.batch_items(batch.id)
    for item in items:
        if item.idx in (3, 7):
            assert item.attempts == 2 and item.run_id != first_runs[item.idx]
        else:
            assert item.attempts == 1 and item.run_id == first_runs[item.idx]
    assert len(rig.runs(parent_id=batch.id)) == 11  # nine, plus one retry of each failed item
    with pytest.raises(InvalidInputError, match="no failed"):
        rig.sched.retry_batch(batch.id)
