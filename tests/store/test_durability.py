"""What was committed stays: for other connections, after a restart, after a SIGKILL.

A SIGKILL in the middle of a stream of commits leaves whole commits, never part of one, and
every commit that had returned to its caller.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from desktop_agent.domain import (
    ApprovalState,
    CommandKind,
    RunEventKind,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
    WorkerInfo,
)
from desktop_agent.engine.ports import RunPatch, Snapshot, StepOutcome
from desktop_agent.persistence.store import SqlStore
from tests.helpers.polling import wait_for, wait_until
from tests.store.backends import StoreFactory
from tests.store.child_writer import SNAPSHOT_EVERY, STEP_COST_USD
from tests.store.runs import LEASE_S, T0, approval, claimed, intent, new_run

REPO = Path(__file__).resolve().parents[2]

KILLS = 4
"""Children killed one after the other, each taking the run over from the one before.

One kill lands between two statements of a commit only sometimes, even when the store
commits them separately; four make missing such a store very unlikely."""

ACKNOWLEDGED_BEFORE_KILL = 20
"""Commits each child must have reported before it is killed (a fraction of a second)."""


def _state(store: SqlStore) -> tuple[object, ...]:
    """Everything the suite can read about the database, through the public reads."""
    runs = store.list_runs()
    per_run = tuple(
        (
            run,
            tuple(store.load_steps(run.id)),
            store.load_snapshot(run.id),
            tuple(store.pending_commands(run.id)),
            tuple(store.list_run_approvals(run.id)),
            tuple(store.run_events(run.id)),
        )
        for run in runs
    )
    return (
        per_run,
        tuple(store.list_workers(include_stopped=True)),
        tuple(store.waiting_wake_times()),
        store.lease_owners(),
        store.change_token(),
    )


def _write_a_bit_of_everything(store: SqlStore) -> None:
    store.register_worker(WorkerInfo("worker-a", "host", 11, T0, T0), proc_started_at=T0)
    new_run(store, "run-1")
    lease = claimed(store, "run-1", "worker-a")
    store.commit(
        "run-1",
        intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo")],
        patch=RunPatch(status=RunStatus.RUNNING, started_at=T0),
        lease=lease,
    )
    store.save_partial("run-1", 1, "Half", Usage(5, 1), 0.001, lease=lease)
    store.restart_step("run-1", 1, salvaged="Half", lease=lease)
    cmd = store.add_command("run-1", CommandKind.STEER, {"text": "look at 2026"})
    store.commit(
        "run-1",
        outcome=StepOutcome(
            1, StepStatus.COMPLETED, {"content": []}, usage=Usage(9, 3), cost_usd=0.02
        ),
        intents=[intent(2, kind=StepKind.APPROVAL, name="send_email")],
        approvals=[approval("run-1", 2)],
        applied_commands=[(cmd, "noted")],
        snapshot=Snapshot(1, {"turns": 1}),
        patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.TIMER, wake_at=T0 + 60),
        lease=lease,
    )
    store.add_command("run-1", CommandKind.PAUSE)
    store.record_event("run-1", RunEventKind.LATE_EFFECT, "sent anyway", seq=2, data={"e": 1})
    new_run(store, "run-2", created_at=T0 + 1)
    decided = replace(approval("run-1", 2), state=ApprovalState.REJECTED, decision_note="no")
    store.commit("run-1", approvals=[decided])


def test_every_write_reads_back_from_another_connection_and_after_a_restart(
    store_factory: StoreFactory,
) -> None:
    _write_a_bit_of_everything(store_factory.handle.store)
    written = _state(store_factory.handle.store)

    other = store_factory.open()  # another process's view, opened while the first is open
    assert _state(other.store) == written

    again = store_factory.reopen()  # every connection closed, then a fresh start
    assert _state(again.store) == written
    assert again.store.get_approval("run-1:2:a").state == ApprovalState.REJECTED


@contextlib.contextmanager
def _child_writer(
    url: str, run_id: str, claim_at: float
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """The child writer, with the step numbers it reported; killed and reaped on exit."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.child_writer", url, run_id, str(claim_at)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    reported: list[int] = []
    assert proc.stdout is not None
    out = proc.stdout

    def read() -> None:
        for line in out:
            reported.append(int(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield proc, reported
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join()  # the pipe is closed: every reported line has been read
        if proc.stderr is not None:
            proc.stderr.close()
        out.close()


def _kill_while_writing(url: str, claim_at: float) -> int:
    """Run a child writer, SIGKILL it mid-stream; the last step it reported committed."""
    with _child_writer(url, "run-1", claim_at) as (proc, reported):

        def enough() -> bool:
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"the child writer ended by itself: {err}")
            return len(reported) >= ACKNOWLEDGED_BEFORE_KILL

        wait_for(enough, what=f"{ACKNOWLEDGED_BEFORE_KILL} commits of the child writer")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    if url.startswith("postgresql"):
        _wait_backends_gone(url)
    return max(reported)


def _wait_backends_gone(url: str) -> None:
    """Wait until the server has ended the killed child's sessions.

    A COMMIT the child sent just before its kill is still carried out by its server
    process; reading before that ends saw the run's row of the commit (``last_seq`` 99)
    but not its step, read a moment earlier.
    """
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    others = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    try:
        with engine.connect() as conn:

            def gone() -> bool:
                count = conn.execute(others).scalar_one()
                conn.rollback()  # the statistics are a snapshot per transaction
                return bool(count == 0)

            wait_until(gone, what="the killed writer's sessions to end on the server")
    finally:
        engine.dispose()


def _assert_whole(store: SqlStore, acknowledged: int) -> int:
    """Check the journal holds every acknowledged commit and only whole ones; its last seq."""
    steps = store.load_steps("run-1")
    last = len(steps)
    # Every acknowledged commit is there; the one in flight at the kill may be too, whole.
    assert last in (acknowledged, acknowledged + 1)
    assert [s.seq for s in steps] == list(range(1, last + 1))
    assert all(s.status == StepStatus.COMPLETED for s in steps[:-1])
    assert steps[-1].status == StepStatus.STARTED
    run = store.get_run("run-1")
    done = last - 1
    assert (run.last_seq, run.usage) == (last, Usage(done, done))
    assert run.cost_usd == pytest.approx(done * STEP_COST_USD)
    newest = done - done % SNAPSHOT_EVERY
    assert store.load_snapshot("run-1") == Snapshot(newest, {"done": newest})
    return last


@pytest.mark.crash
def test_commits_acknowledged_before_a_sigkill_are_all_there_and_whole(
    store_factory: StoreFactory,
) -> None:
    url = store_factory.backend.settings().url
    new_run(store_factory.handle.store)
    store_factory.close()  # a child is the only writer while it runs

    last = 0
    for kill in range(KILLS):
        # Each child claims the run once its predecessor's lease has run out.
        acknowledged = _kill_while_writing(url, T0 + kill * (LEASE_S + 1))
        assert acknowledged >= last + ACKNOWLEDGED_BEFORE_KILL - 1
        last = _assert_whole(store_factory.reopen().store, acknowledged)
        store_factory.close()

    # The killed writers hold nothing: another worker takes the run over and goes on.
    store = store_factory.reopen().store
    assert store.get_run("run-1").lease_epoch == KILLS
    lease = claimed(store, "run-1", "worker-b", T0 + KILLS * (LEASE_S + 1))
    assert lease.epoch == KILLS + 1
    store.commit(
        "run-1",
        outcome=StepOutcome(last, StepStatus.COMPLETED, {}),
        intents=[intent(last + 1)],
        lease=lease,
    )
    assert store.get_run("run-1").last_seq == last + 1
