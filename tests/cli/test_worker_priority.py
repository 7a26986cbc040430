"""A worker can run at a lower CPU priority, and the app starts its own that way.

Real ``python -m desktop_agent worker`` processes on a real database; their priority is
read from ``/proc`` for every thread, since Linux keeps a nice value per thread.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psutil
import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from tests.helpers.polling import wait_for, wait_worker


def _thread_nices(pid: int) -> dict[int, int]:
    """The nice value of each thread of ``pid`` (field 19 of /proc/PID/task/TID/stat)."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended while being read
            stat = (task / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            out[int(task.name)] = int(fields[16])
    return out


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_worker_started_nicer_runs_every_thread_at_that_priority(tmp_path: Path) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    if ours > 15:
        pytest.skip("this test already runs at nearly the lowest priority")
    client = Client(tmp_path / "data" / "desktop-agent.db", Settings())
    pid = client.spawn_worker(nice=3)
    proc = psutil.Process(pid)
    try:
        wait_worker(client, pid)
        # The worker registers before its heartbeat and pool threads are all up: wait for
        # them (a worker that never starts one fails here, saying which threads it had).
        nices = wait_for(
            lambda: n if len(n := _thread_nices(pid)) >= 2 else None,
            what="the worker's threads besides the main one",
            last=lambda: _thread_nices(pid),
        )
        assert set(nices.values()) == {ours + 3}, nices
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        client.close()
