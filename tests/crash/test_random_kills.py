"""SIGKILL at seeded random moments while several long demo runs execute in one worker.

Three runs over eight sources each (about 35 steps per run) execute concurrently in a
worker child process. The test kills the child with SIGKILL a random time after it has
made progress, starts a fresh worker, and repeats until it has killed ``KILLS`` workers;
a last worker then finishes the runs. Snapshots are taken every 5 steps, so some kills
land around snapshots too.

After every kill: each step ever seen completed is still there, unchanged, and each run
has at most one open step. At the end: every run's journal equals the uninterrupted
reference run's (the only difference allowed is the result of an idempotent effect
repeated after a crash in which it was in flight); a step has attempt ``k > 1`` only if
it was in flight at ``k - 1`` or more of the crashes; every workspace is byte-identical
to the reference workspace, with one note per source.

Known defect, reported as XFAIL after every other check has passed: a kill inside
``desktop_agent.tools.files._atomic_write`` (between ``mkstemp`` and ``os.replace``, around
its fsync) leaves a hidden ``.tmp-*`` file in the workspace, so the workspace is not
byte-identical to an uninterrupted run's. Nothing else differs: the repeated write
completes the file. Once the write tool cleans up after itself the test simply passes.

The seed fixes the kill delays, not the machine's timing: each run explores different
moments. ``DESKTOP_AGENT_CRASH_SEED`` picks another seed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

from desktop_agent.domain import RunStatus, Step, StepStatus
from tests.crash.harness import (
    SOURCES_8,
    Lab,
    Reference,
    assert_notes_once_per_source,
    compare_journal,
    make_workspace,
    stray_temp_files,
    workspace_files,
)
from tests.helpers.polling import wait_until

pytestmark = pytest.mark.crash

SEED = int(os.environ.get("DESKTOP_AGENT_CRASH_SEED", "20261120"))
RUNS = 3
KILLS = 15
MAX_DELAY_S = 0.05
ENV = {"DESKTOP_AGENT_SNAPSHOT_EVERY": "5", "DESKTOP_AGENT_DEMO_DELAY": "0.01"}


def _progress(lab: Lab) -> int:
    """Changes whenever a worker commits a step's intent."""
    with lab.client.store.db.read() as conn:
        value = conn.exec_driver_sql("SELECT coalesce(sum(last_seq), 0) FROM runs").scalar()
    return int(value or 0)


def _wait_for_progress(lab: Lab, proc: subprocess.Popen[bytes], before: int, where: str) -> None:
    """Wait until the child committed one more step intent, or ended (this test's own event)."""
    wait_until(
        lambda: proc.poll() is not None or _progress(lab) > before,
        what=f"a worker to make progress ({where})",
        poll=0.003,  # soon after: the kill should land while runs are mid-way
        last=lambda: f"step intents {_progress(lab)}, {before} before; worker {proc.returncode}",
    )


def test_random_sigkills_lose_nothing_and_repeat_at_most_the_step_in_flight(
    lab: Lab, reference_8: Reference
) -> None:
    rng = random.Random(SEED)
    workspaces = [make_workspace(lab.root / f"ws-{i}", SOURCES_8) for i in range(RUNS)]
    run_ids = [lab.start(ws) for ws in workspaces]
    completed: dict[str, dict[int, Step]] = {r: {} for r in run_ids}
    in_flight_at_crash: Counter[tuple[str, int]] = Counter()
    kills = 0
    where = f"seed {SEED}"

    while kills < KILLS:
        if all(lab.run(r).status.is_terminal for r in run_ids):
            break
        before = _progress(lab)
        with lab.child(**ENV) as proc:
            _wait_for_progress(lab, proc, before, where)
            time.sleep(rng.uniform(0.0, MAX_DELAY_S))  # the seeded kill moment, not a wait
            if proc.poll() is not None:
                assert proc.returncode == 0, lab.last_log()
                continue
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait() == -signal.SIGKILL
        lab.wait_sessions_ended()  # on PostgreSQL, a commit sent just before may still land
        kills += 1
        for run_id in run_ids:
            steps = lab.steps(run_id)
            by_seq = {s.seq: s for s in steps}
            for seq, seen in completed[run_id].items():
                assert by_seq.get(seq) == seen, f"run {run_id}: completed step {seq} lost ({where})"
            open_steps = [s for s in steps if s.status == StepStatus.STARTED]
            assert len(open_steps) <= 1, f"run {run_id}: several open steps ({where})"
            for s in open_steps:
                in_flight_at_crash[(run_id, s.seq)] += 1
            completed[run_id].update({s.seq: s for s in steps if s.status != StepStatus.STARTED})

    assert kills >= KILLS // 2, f"only {kills} kills landed before the runs ended ({where})"
    assert in_flight_at_crash, f"no kill caught a step in flight ({where})"
    lab.finish(run_ids, **ENV)

    for run_id, ws in zip(run_ids, workspaces, strict=True):
        run = lab.run(run_id)
        assert run.status == RunStatus.COMPLETED, run.status_message
        final = lab.steps(run_id)
        repeats = compare_journal(final, reference_8.steps)
        for step in final:
            crashes = in_flight_at_crash[(run_id, step.seq)]
            assert step.attempt - 1 <= crashes, (
                f"run {run_id}: step {step.seq} ran {step.attempt} times but was in flight "
                f"at {crashes} crash(es) ({where})"
            )
        assert all(in_flight_at_crash[(run_id, seq)] for seq in repeats)
        for seq, seen in completed[run_id].items():
            assert final[seq - 1] == seen
        files = workspace_files(ws)
        # A write killed between writing its temporary file and renaming it is repeated
        # under the same key, which takes the temporary file over: nothing stray remains.
        assert stray_temp_files(files) == [], f"run {run_id}: stray files ({where})"
        assert files == reference_8.files, f"run {run_id}: workspace differs ({where})"
        assert_notes_once_per_source(files, SOURCES_8)
        assert run.cost_usd == pytest.approx(sum(s.cost_usd + s.salvaged_cost_usd for s in final))
