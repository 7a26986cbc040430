"""The schedule and batch filters: runs started by the scheduler's own store paths."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.client.search import SearchFilters
from tests.conftest import MakeExecutor
from tests.helpers import postgres
from tests.helpers.fakes import Reply
from tests.search.conftest import HAIKU, finish, make_run_in

pytestmark = pytest.mark.parametrize("backend", postgres.BACKENDS)


def test_schedule_and_batch_filters_keep_only_their_runs(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sched = Scheduling(client, time.time)
    options = RunOptions(model=HAIKU, workspace=str(ws))
    schedule = sched.add_schedule("Morning pelican census", every_s=3600, options=options)
    fired = sched.store.fire_schedule(schedule, time.time(), 1, time.time(), make_run_in(ws))
    assert fired.run_id
    lines = tmp_path / "items.txt"
    lines.write_text("north shore\nsouth shore\n")
    batch = sched.start_batch("Pelican census of {item}", lines=lines, options=options)
    started = sched.store.pump(make_run_in(ws), time.time())
    assert len(started) == 2
    loose = client.start_run("Pelican census by hand", model=HAIKU, workspace=ws)
    finish(client, make_executor, [Reply("Counted.")])

    every = {h.run_id for h in client.search("pelican census")}
    assert every == {fired.run_id, loose.id, *started}
    by_schedule = client.search("pelican", SearchFilters(schedule_id=schedule.id))
    assert {h.run_id for h in by_schedule} == {fired.run_id}
    by_batch = client.search("pelican", SearchFilters(batch_id=batch.id))
    assert {h.run_id for h in by_batch} == set(started)
