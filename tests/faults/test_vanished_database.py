"""A database file deleted or replaced under a running worker is noticed, and said.

A real worker child process executes a demo run; the test deletes the SQLite file (or
moves another database into its place) mid-run. On POSIX systems the worker's open
descriptors keep the old file alive, so without a check it would go on in a file nobody
else sees. What must hold:

* the worker logs the plain message and exits with an error, not as a finished worker;
* it claims nothing from the file now at the path (the replacement's queued run is left
  queued and unclaimed);
* the app and the CLI show the message (``Client.storage_warning``, the recovery report,
  ``desktop-agent runs``) from a note in the data folder, since the database cannot hold it;
* the note names the run the worker held, with its goal and last step, and a copy of the
  old file holds the run's journal as it was written before the deletion.

SQLite only: a PostgreSQL database has no file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.cli.commands import main as cli_main
from desktop_agent.client.api import Client
from desktop_agent.client.checks import recovery_report
from desktop_agent.domain import RunStatus, Step, StepStatus
from tests.crash.harness import (
    GOAL,
    SOURCES_8,
    WORKER_TIMEOUT_S,
    Lab,
    comparable,
    lab_settings,
    make_workspace,
)
from tests.helpers.polling import wait_until

SLOW_DEMO = {"DESKTOP_AGENT_DEMO_DELAY": "0.3"}
"""Model calls slow enough that the run is still under way when the file goes."""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """A SQLite database with crash-test settings (the check is for files only)."""
    lab = Lab(tmp_path)
    yield lab
    lab.close()


def _under_way(lab: Lab, run_id: str, proc: subprocess.Popen[bytes]) -> list[Step]:
    """Wait until the worker has saved a few steps of the run; those steps."""
    wait_until(
        lambda: proc.poll() is None and lab.run(run_id).last_seq >= 3,
        WORKER_TIMEOUT_S,
        f"run {run_id} under way",
    )
    steps = lab.steps(run_id)
    assert lab.run(run_id).status == RunStatus.RUNNING
    return steps


def _exit_code(lab: Lab, proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the worker went on after its database file vanished:\n{lab.last_log()}"
        ) from None


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, (pattern, sorted(p.name for p in folder.iterdir()))
    return found[0]


def _check_recovery(lab: Lab, run_id: str, before: list[Step], what: str) -> str:
    """The note and the copy in the data folder; returns the message (the note's first line)."""
    data = lab.db.parent
    note = _one(data, "database-vanished-*.txt")
    copy = _one(data, "desktop-agent.recovered-*.db")
    text = note.read_text(encoding="utf-8")
    message = text.splitlines()[0]
    assert message.startswith(
        f"the database file {lab.db} was {what} while this worker was running; "
        "it stopped claiming runs"
    ), message
    assert str(copy) in message and str(note) in message and "What to do:" in message
    # The run it held, in plain words: id, goal, last step.
    held = next(line for line in text.splitlines() if line.startswith(f"- run {run_id}:"))
    assert repr(GOAL) in held and "last saved step" in held, held
    # The copy is a database of its own, holding the run's journal as it was written.
    recovered = Client(copy, lab_settings())
    try:
        run = recovered.run(run_id)
        steps = recovered.steps(run_id)
    finally:
        recovered.close()
    assert run.goal == GOAL
    assert run.status == RunStatus.RUNNING  # stopped as it was: not failed, not cancelled
    # Every step saved before the file went is there as it was (a step whose outcome was
    # still to come then may have been completed since, in the old file).
    assert len(steps) >= len(before)
    for got, seen in zip(steps, before, strict=False):
        if seen.status == StepStatus.STARTED:
            assert (got.seq, got.kind, got.name, got.input) == (
                seen.seq,
                seen.kind,
                seen.name,
                seen.input,
            )
        else:
            assert comparable(got) == comparable(seen)
    assert all(s.status != StepStatus.FAILED for s in steps)
    assert f"last saved step {run.last_seq}" in held
    return message


def _shown(lab: Lab, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The app and the CLI, on whatever database is now at the path, show the message."""
    fresh = Client(lab.db, lab_settings())
    try:
        assert fresh.storage_warning() == message  # the app's storage note, the CLI's warning
        assert recovery_report(fresh).vanished == message  # the app's "worker lost" notice
    finally:
        fresh.close()
    capsys.readouterr()
    assert cli_main(["--db", str(lab.db), "runs"]) == 0
    err = capsys.readouterr().err
    assert f"desktop-agent: warning: {message}" in err, err


@pytest.mark.parametrize("suffixes", [("",), ("", "-wal", "-shm")], ids=["file", "with-log"])
def test_a_deleted_database_file_stops_the_worker_and_is_saved(
    lab: Lab, capsys: pytest.CaptureFixture[str], suffixes: tuple[str, ...]
) -> None:
    ws = make_workspace(lab.root / "ws", SOURCES_8)
    run_id = lab.start(ws)
    with lab.child(**SLOW_DEMO) as proc:
        before = _under_way(lab, run_id, proc)
        lab.close()  # the test's own connections let go of the file too
        for suffix in suffixes:  # the file alone, or with its write-ahead log and index
            os.unlink(f"{lab.db}{suffix}")
        code = _exit_code(lab, proc)
    log = lab.last_log()
    assert code != 0, log
    assert "ERROR" in log and f"the database file {lab.db} was deleted while this worker" in log
    assert "its database file was deleted or replaced" in log  # the exit's own error line
    message = _check_recovery(lab, run_id, before, "deleted")
    assert message in log
    assert not lab.db.exists()  # the worker made no new file at the path
    assert not Path(f"{lab.db}-wal").exists()  # nor left the old log for the next file
    _shown(lab, message, capsys)
    fresh = Client(lab.db, lab_settings())  # a new database at the path starts empty
    try:
        assert fresh.runs() == []
    finally:
        fresh.close()


def test_a_replaced_database_file_is_not_touched_and_nothing_is_claimed_from_it(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = make_workspace(lab.root / "ws", SOURCES_8)
    run_id = lab.start(ws)
    # Another database, with a run queued in it, to be moved into place.
    other_db = lab.root / "other" / "desktop-agent.db"
    lab_settings().save(other_db)
    other = Client(other_db, lab_settings())
    queued = other.start_run(
        "Another goal", model="demo", workspace=make_workspace(lab.root / "ws2", SOURCES_8)
    ).id
    other.close()
    with lab.child(**SLOW_DEMO) as proc:
        before = _under_way(lab, run_id, proc)
        lab.close()
        os.replace(other_db, lab.db)
        code = _exit_code(lab, proc)
    log = lab.last_log()
    assert code != 0, log
    assert f"the database file {lab.db} was replaced by another file while this worker" in log
    message = _check_recovery(lab, run_id, before, "replaced by another file")
    # The file now at the path is the other database, untouched: its run was never claimed.
    now = Client(lab.db, lab_settings())
    try:
        run = now.run(queued)
        assert (run.status, run.lease_owner, run.last_seq) == (RunStatus.QUEUED, None, 0)
        assert [r.id for r in now.runs()] == [queued]
        assert now.worker_status().worker is None  # the worker never registered there
    finally:
        now.close()
    _shown(lab, message, capsys)
