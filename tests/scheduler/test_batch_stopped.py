"""A stopped batch item counts as stopped, not done.

It frees its slot for the next item, and the batch is not finished until the run is
resumed (or cancelled).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions
from desktop_agent.client.scheduling_views import batch_item_rows
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidStateError
from desktop_agent.domain.scheduling import ItemStatus
from tests.helpers.fakes import ScriptedModel
from tests.helpers.polling import wait_status, wait_until
from tests.scheduler.conftest import RigFactory, ask_then_done

HAIKU = "claude-haiku-4-5"


def test_a_stopped_item_counts_as_stopped_and_resumes_into_done(
    client: Client, make_rig: RigFactory, tmp_path: Path
) -> None:
    lines = tmp_path / "items.txt"
    lines.write_text("first\nsecond\n")
    rig = make_rig(ScriptedModel(ask_then_done))
    batch = rig.sched.start_batch(
        "Profile {item}", lines=lines, concurrency=1, options=RunOptions(model=HAIKU)
    )

    def run_of(idx: int) -> str | None:
        return rig.sched.batch_items(batch.id)[idx].run_id

    wait_until(lambda: run_of(0) is not None, what="item 0 dispatched")
    first = run_of(0)
    assert first is not None
    wait_status(rig.client, first, RunStatus.WAITING)
    client.stop(first)
    rig.worker.nudge()
    wait_status(rig.client, first, RunStatus.STOPPED)

    # The stopped item gives its slot to the next one.
    wait_until(lambda: run_of(1) is not None, what="item 1 dispatched after the stop")
    second = run_of(1)
    assert second is not None
    wait_status(rig.client, second, RunStatus.WAITING)
    progress = rig.sched.batch_progress(batch.id)
    assert (progress.stopped, progress.running, progress.completed) == (1, 1, 0)
    assert "1 stopped" in progress.describe() and not progress.finished
    assert rig.sched.batch_items(batch.id)[0].status == ItemStatus.STOPPED
    row = batch_item_rows(client, batch.id)[0]
    assert row.item.status == ItemStatus.STOPPED and "partial report" in row.error
    with pytest.raises(InvalidStateError, match="is stopped: resume its run"):
        rig.sched.retry_batch(batch.id, [0])

    client.answer(second, "yes")
    rig.worker.nudge()
    wait_status(rig.client, second, RunStatus.COMPLETED)
    rig.settle()
    progress = rig.sched.batch_progress(batch.id)
    assert (progress.completed, progress.stopped, progress.running, progress.pending) == (
        1,
        1,
        0,
        0,
    )
    assert not progress.finished  # a stopped item is not done
    with client.store.db.read() as conn:
        stored = conn.exec_driver_sql(
            "SELECT status FROM batch_items WHERE batch_id = ? AND idx = 0", (batch.id,)
        ).scalar()
    assert stored == "stopped"  # durable, as the ends of items are

    client.resume(first)
    rig.worker.nudge()
    wait_status(rig.client, first, RunStatus.COMPLETED)
    wait_until(lambda: rig.sched.batch_progress(batch.id).finished, what="batch finished")
    final = rig.sched.batch_progress(batch.id)
    assert (final.completed, final.stopped) == (2, 0)
    assert final.describe() == "2 / 2 done"
