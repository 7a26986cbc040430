"""The effect ledger itself: who writes it, its file, torn lines, several writers, growth."""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.domain import EffectClass, RunStatus, StepKind
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence import backup
from desktop_agent.persistence.ledger import EffectLedger
from tests.crash.harness import SOURCES_3, Lab, make_workspace, workspace_files
from tests.restore.lab import REPO, RestoreLab


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def effect(seq: int, name: str = "http_post") -> StepIntent:
    return StepIntent(
        seq=seq,
        kind=StepKind.TOOL_CALL,
        name=name,
        input={"tool_use_id": f"t{seq}", "arguments": {"url": "http://example.test/x"}},
        effect=EffectClass.UNSAFE,
    )


def test_the_cli_worker_ledgers_its_file_writes_and_a_restore_holds_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``desktop-agent worker`` (what ``run`` and the app start) writes the ledger."""
    lab = Lab(tmp_path)
    try:
        ws = make_workspace(tmp_path / "ws", SOURCES_3)
        run_id = lab.start(ws)
        assert cli.main(["--db", str(lab.db), "db", "backup"]) == 0
        lab.finish([run_id])  # the demo appends three notes and writes a report twice
        files = workspace_files(ws)
        ledger = Path(f"{lab.db}.effects")
        entries = EffectLedger(ledger).read()
        assert entries is not None
        written = [(e.tool, e.effect) for e in entries.entries if e.run == run_id]
        assert written == [("append_note", "idempotent")] * 3 + [("write_file", "idempotent")] * 2
        assert (mode(ledger), mode(Path(f"{ledger}.lock"))) == (0o600, 0o600)

        lab.client.close()
        capsys.readouterr()
        assert cli.main(["--json", "--db", str(lab.db), "db", "restore", "--yes"]) == 0
        out = json.loads(capsys.readouterr().out)
        lab.client = Client(lab.db)
        assert (out["needs_attention"], out["effects_in_doubt"]) == ([run_id], 5)
        assert lab.run_worker() == 0
        assert workspace_files(ws) == files  # nothing written again
        run = lab.run(run_id)
        assert run.status == RunStatus.NEEDS_ATTENTION
        assert "these 5 effects may have happened after it: append_note" in run.status_message
    finally:
        lab.close()


def test_a_torn_line_is_skipped_and_does_not_swallow_the_next(
    lab: RestoreLab,
) -> None:
    runs = [lab.order("t1"), lab.order("t2")]
    lab.backup()
    lab.work()
    # The power went while a third line was being written: a fragment, no newline.
    with open(lab.ledger, "ab") as f:
        f.write(b'{"run":"gone","seq":9,"key":"gone:9","to')
    EffectLedger(lab.ledger).record("r-after", [effect(4)])  # written after the crash

    read = EffectLedger(lab.ledger).read()
    assert read is not None and read.skipped == 1
    assert [e.run for e in read.entries][-1] == "r-after"
    assert lab.ledger.read_bytes().endswith(b'"to\n' + _line_of(lab.ledger, -1))

    out = lab.restore()
    assert sorted(out["needs_attention"]) == sorted(runs)
    assert out["unreadable_ledger_lines"] == 1
    assert out["effects_of_runs_not_in_backup"] == 1  # r-after


def _line_of(path: Path, index: int) -> bytes:
    return path.read_bytes().splitlines(keepends=True)[index]


def test_a_refused_commit_writes_no_line(client: Client) -> None:
    run = client.start_run("x", model="demo")
    ledger = EffectLedger.beside(client.db_path)
    client.store.commit(run.id, intents=[effect(1)])
    with pytest.raises(IntegrityError):
        client.store.commit(run.id, intents=[effect(1)])  # the same step twice: refused
    read = ledger.read()
    assert read is not None and [(e.run, e.seq) for e in read.entries] == [(run.id, 1)]
    assert mode(ledger.path) == 0o600


WRITER = """
import sys
from pathlib import Path
from desktop_agent.persistence.ledger import EffectLedger, Entry
ledger = EffectLedger(Path(sys.argv[1]))
who = sys.argv[2]
for i in range(int(sys.argv[3])):
    ledger.append([Entry(who, i, f"{who}:{i}", "http_post", "unsafe", 1, 0.0, "x" * 190)])
"""


def test_appends_from_several_processes_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "agent.db.effects"
    EffectLedger(path).ensure(since=0.0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{n}", "150"], env=env, cwd=REPO
        )
        for n in range(4)
    ]
    try:
        assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    read = EffectLedger(path).read()
    assert read is not None and read.skipped == 0 and read.since == 0.0
    assert sorted((e.run, e.seq) for e in read.entries) == sorted(
        (f"w{n}", i) for n in range(4) for i in range(150)
    )


TRY_FLOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
how = (fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX) | fcntl.LOCK_NB
try:
    fcntl.flock(fd, how)
except BlockingIOError:
    print("refused")
else:
    print("granted")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX's")
def test_the_ledger_s_locks_are_flock_locks_shared_for_appends_exclusive_for_compaction(
    tmp_path: Path,
) -> None:
    """A worker of an older version locked with ``flock`` directly: both must exclude."""
    ledger = EffectLedger(tmp_path / "agent.db.effects")
    ledger.ensure(since=0.0)

    def other_process_asks(how: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", TRY_FLOCK, str(ledger.lock_path), how],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout.strip()

    with ledger._locked(shared=True):  # what an append holds
        assert other_process_asks("shared") == "granted"  # appends go side by side
        assert other_process_asks("exclusive") == "refused"  # compaction waits
    with ledger._locked(shared=False):  # what compaction holds
        assert other_process_asks("shared") == "refused"
        assert other_process_asks("exclusive") == "refused"
    assert other_process_asks("exclusive") == "granted"  # released on the way out


def test_compaction_keeps_what_a_restore_of_a_kept_backup_needs(client: Client) -> None:
    """Lines older than the oldest kept backup go; a restore older than the ledger is told."""
    db = client.db_path
    run = client.start_run("queued at every backup", model="demo")
    day = 86400.0
    now = time.time()
    ledger = EffectLedger.beside(db)
    ledger.ensure(since=0.0)
    for at, seq in ((now, 1), (now + 9.5 * day, 2)):
        EffectLedger(ledger.path, clock=functools.partial(float, at)).record(run.id, [effect(seq)])

    first = backup.make_backup(db, keep=2, clock=lambda: now + 1 * day)
    outside = shutil.copy(first.path, db.parent / "kept-by-hand.db")
    backup.make_backup(db, keep=2, clock=lambda: now + 10 * day)
    backup.make_backup(db, keep=2, clock=lambda: now + 11 * day)  # the first is pruned

    read = ledger.read()
    assert read is not None
    # The oldest kept backup is from day 10: lines before day 9 (a day's margin) are gone.
    assert [e.seq for e in read.entries] == [2] and read.since == pytest.approx(now + 9 * day)
    assert mode(ledger.path) == 0o600

    client.close()
    done = backup.restore(db, Path(outside))  # made before the ledger's start
    assert done.reconciled.ledger == "too_new" and done.reconciled.held == (run.id,)
    reopened = Client(db)
    try:
        message = reopened.run(run.id).status_message
        assert "older than the effect ledger (it starts at" in message
        assert "check what this run did after" in message
    finally:
        reopened.close()
