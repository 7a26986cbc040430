"""A restore from a backup never repeats blindly what the runs did after the backup.

The bug: a corrupt database was restored with ``db restore`` from the backup taken when
the worker started; the runs re-ran from there and re-sent every POST with the same keys.
Here real worker child processes POST to a local sink that counts requests by idempotency
key; backups and restores go through the CLI. After a restore, the effect ledger puts
every POST the restored journal does not show finished in doubt, and ``resolve`` decides.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from desktop_agent.domain import EffectClass, RunStatus, StepKind, StepStatus
from desktop_agent.persistence.backup import list_backups
from desktop_agent.persistence.ledger import EffectLedger
from tests.helpers.polling import wait_until
from tests.restore.child_worker import NOT_AGAIN
from tests.restore.lab import RestoreLab, lab_settings

RESTORE_STEP = "restored_from_backup"


def taken_at(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def b_at(backup: Path) -> float:
    """When a backup was made, from its name (as ``db backups`` shows it)."""
    (info,) = [
        b for b in list_backups(backup.parent.parent / "desktop-agent.db") if b.path == backup
    ]
    return info.created_at


def test_restoring_the_backup_taken_before_the_posts_resends_none(lab: RestoreLab) -> None:
    runs = [lab.order(f"o{i}") for i in range(6)]
    lab.backup()  # the runs are queued: nothing has happened yet
    lab.work()  # each run POSTs its order once and completes
    assert {r: lab.keys(r) for r in runs} == {r: [f"{r}:2"] for r in runs}

    lab.corrupt()
    out = lab.restore()
    lab.work()  # a worker on the restored database

    # Not one POST is sent again: each run waits for the analyst instead.
    assert {r: lab.keys(r) for r in runs} == {r: [f"{r}:2"] for r in runs}
    assert sorted(out["needs_attention"]) == sorted(runs)
    assert (out["effects_in_doubt"], out["effect_ledger"]) == (6, "complete")
    for r in runs:
        run = lab.run(r)
        assert run.status == RunStatus.NEEDS_ATTENTION
        assert run.status_message.startswith(
            f"Restored from a backup taken at {taken_at(out['backup_at'])}; this effect may "
            "have happened after it: http_post"
        ), run.status_message
        held = lab.steps(r)[-1]
        assert (held.kind, held.name, held.status) == (
            StepKind.ERROR,
            RESTORE_STEP,
            StepStatus.STARTED,
        )
        assert run.attention_seq == held.seq
        assert [e["key"] for e in held.input["effects"]] == [f"{r}:2"]

    # A note to a run that waits for a decision about a restore waits for it too: the
    # run stays as it is, and a worker goes idle.
    code, out, err = lab.command("steer", runs[3], "carry on")
    assert code == 0, err
    assert "it waits while step 3 is in doubt and is delivered once you decide" in out
    lab.work()
    assert lab.client.store.get_command(1).result == ""  # not applied yet
    assert lab.steps(runs[3])[-1].name == RESTORE_STEP

    # The analyst decides, as after a crash.
    skip, retry, done, noted = runs[:4]
    lab.resolve(skip, "skip")
    lab.resolve(retry, "retry")
    lab.resolve(done, "mark_done")
    lab.resolve(noted, "skip")
    lab.work()

    # The note follows the decision (and the model's note about the restore).
    marker = next(s for s in lab.steps(noted) if s.name == RESTORE_STEP)
    notes = [(s.seq, s.input["text"]) for s in lab.steps(noted) if s.kind == StepKind.STEER]
    assert notes[1:] == [(marker.seq + 2, "carry on")] and notes[0][0] == marker.seq + 1
    assert lab.run(noted).status == RunStatus.COMPLETED

    assert lab.keys(skip) == [f"{skip}:2"]  # not sent again
    assert lab.run(skip).status == RunStatus.COMPLETED
    assert lab.run(skip).status_message == NOT_AGAIN  # the model was told, and heeded it
    (note,) = [s for s in lab.steps(skip) if s.kind == StepKind.STEER]
    assert "may or may not have happened" in note.input["text"]
    marker = next(s for s in lab.steps(skip) if s.name == RESTORE_STEP)
    assert marker.status == StepStatus.COMPLETED and note.seq == marker.seq + 1

    assert lab.run(done).status == RunStatus.COMPLETED and lab.keys(done) == [f"{done}:2"]
    (note,) = [s for s in lab.steps(done) if s.kind == StepKind.STEER]
    assert "had been done" in note.input["text"]

    # A retry sends it again, under a key never used before (the lost step's key is not
    # reused for whatever the run now does at that point).
    assert lab.run(retry).status == RunStatus.COMPLETED
    first, again = lab.keys(retry)
    marker = next(s for s in lab.steps(retry) if s.name == RESTORE_STEP)
    assert first == f"{retry}:2" and int(again.split(":")[1]) > marker.seq
    assert marker.output == {"resolved": "retry"}

    for r in runs[4:]:  # undecided: still waiting, still sent once
        assert lab.run(r).status == RunStatus.NEEDS_ATTENTION and lab.keys(r) == [f"{r}:2"]


def test_an_older_backup_holds_what_happened_since_and_counts_runs_it_lacks(
    lab: RestoreLab,
) -> None:
    early = [lab.order("a1"), lab.order("a2")]
    old = lab.backup()
    lab.work()  # a1 and a2 POST
    lab.backup()  # a newer backup, which shows both POSTs finished
    late = lab.order("b1")
    lab.work()  # b1 POSTs: its run is in no backup but the newest database

    line = lab.restore(old, as_json=False)
    lab.work()

    assert [lab.keys(r) for r in [*early, late]] == [[f"{r}:2"] for r in [*early, late]]
    assert line.startswith(f"restored {old.name}")
    assert "2 runs need you: 2 effects may have happened after" in line
    assert "`desktop-agent runs --status needs_attention` lists them" in line
    assert "1 effect of runs created after the backup is not in it" in line
    assert len(line.splitlines()) == 1
    assert all(lab.run(r).status == RunStatus.NEEDS_ATTENTION for r in early)
    assert late not in {r.id for r in lab.client.runs()}


def test_with_the_ledger_lost_every_run_unfinished_at_the_backup_waits(
    lab: RestoreLab,
) -> None:
    finished = lab.order("done")
    lab.work()  # finished before the backup: nothing it does can be in doubt
    queued = [lab.order("q1"), lab.order("q2")]
    lab.backup()
    lab.work()  # q1 and q2 POST
    lab.ledger.unlink(missing_ok=True)  # lost with the database

    out = lab.restore()
    lab.work()

    assert [lab.keys(r) for r in queued] == [[f"{r}:2"] for r in queued]
    assert out["effect_ledger"] == "missing"
    assert sorted(out["needs_attention"]) == sorted(queued)
    assert lab.run(finished).status == RunStatus.COMPLETED
    t = taken_at(out["backup_at"])
    for r in queued:
        assert lab.run(r).status_message.startswith(
            f"Restored from a backup taken at {t} and the effect ledger is missing; check what "
            f"this run did after {t} before resuming"
        )

    q1, q2 = queued
    lab.resolve(q1, "retry")  # the analyst checked: q1's order never arrived
    lab.resolve(q2, "skip")
    lab.work()
    assert len(lab.keys(q1)) == 2 and lab.run(q1).status == RunStatus.COMPLETED
    assert lab.keys(q2) == [f"{q2}:2"] and lab.run(q2).status_message == NOT_AGAIN


def test_repeated_restores_lose_nothing_and_settle_what_was_decided(lab: RestoreLab) -> None:
    r1, r2 = lab.order("r1"), lab.order("r2")
    b1 = lab.backup()
    lab.work()  # both POST
    lab.restore(b1)
    out = lab.restore(b1)  # again: the first restore left the ledger as it was
    lab.work()
    assert [lab.keys(r1), lab.keys(r2)] == [[f"{r1}:2"], [f"{r2}:2"]]
    assert sorted(out["needs_attention"]) == sorted([r1, r2]) and out["effects_in_doubt"] == 2

    b2 = lab.backup()  # holds both runs waiting on their restore steps
    lab.resolve(r1, "retry")
    lab.work()  # r1 POSTs again, after b2
    assert len(lab.keys(r1)) == 2 and lab.run(r1).status == RunStatus.COMPLETED

    out = lab.restore(b2)
    lab.work()
    assert [len(lab.keys(r1)), len(lab.keys(r2))] == [2, 1]  # nothing sent again
    assert sorted(out["needs_attention"]) == sorted([r1, r2]) and out["effects_in_doubt"] == 3
    held = lab.steps(r1)[-1]
    assert [e["key"] for e in held.input["effects"]] == [f"{r1}:2", lab.keys(r1)[1]]
    # r1 has waited since the first restore: the question is still what it did after b1.
    assert held.input["backup_at"] < out["backup_at"]
    superseded = lab.steps(r1)[-2]
    assert (superseded.name, superseded.status) == (RESTORE_STEP, StepStatus.FAILED)

    lab.resolve(r2, "skip")
    lab.work()
    b3 = lab.backup()  # r2's decision is in it
    out = lab.restore(b3)
    assert out["needs_attention"] == [r1]  # r2's POST was decided about: it stays settled
    assert lab.run(r2).status == RunStatus.COMPLETED


def test_an_effect_open_in_the_restored_journal_waits_at_its_step(lab: RestoreLab) -> None:
    r = lab.order("x")
    # The POST reaches the sink, then the worker dies before writing its outcome.
    assert lab.worker(DESKTOP_AGENT_CRASH_AT="after_effect:2") == -signal.SIGKILL
    assert lab.keys(r) == [f"{r}:2"]
    b = lab.backup()  # its journal shows step 2 started, not finished

    out = lab.restore(b)
    lab.work()

    assert lab.keys(r) == [f"{r}:2"]
    run = lab.run(r)
    assert run.status_message.startswith(
        f"Restored from a backup taken at {taken_at(b_at(b))}; this effect may have "
        "happened after it: http_post"
    ), run.status_message
    assert out["needs_attention"] == [r] and run.attention_seq == 2
    assert "retry it with the same idempotency key" in run.status_message
    lab.resolve(r, "retry")
    lab.work()
    assert lab.keys(r) == [f"{r}:2", f"{r}:2"]  # the crash path's retry: same key
    assert lab.run(r).status == RunStatus.COMPLETED


def test_an_idempotent_effect_open_in_the_restored_journal_is_not_redone_unasked(
    lab: RestoreLab,
) -> None:
    r = lab.order("keyed")
    settings = lab_settings()
    settings.idempotent_post_prefixes = [lab.server.url("/orders/")]
    settings.save(lab.db)  # this endpoint honours keys: a POST to it is idempotent
    assert lab.worker(DESKTOP_AGENT_CRASH_AT="after_effect:2") == -signal.SIGKILL
    assert lab.client.store.get_step(r, 2).effect == EffectClass.IDEMPOTENT
    b = lab.backup()

    lab.restore(b)
    lab.work()  # after a crash alone it would repeat it at once (same key); not here

    assert lab.keys(r) == [f"{r}:2"]
    assert lab.run(r).status == RunStatus.NEEDS_ATTENTION
    assert lab.run(r).status_message.startswith("Restored from a backup taken at")
    lab.resolve(r, "skip")
    lab.work()
    assert lab.keys(r) == [f"{r}:2"] and lab.run(r).status == RunStatus.COMPLETED
    assert lab.client.store.get_step(r, 2).output["resolved"] == "skipped"


@pytest.mark.parametrize("how", ["resolve retry", "idempotent, by itself"])
def test_an_effect_started_again_after_the_backup_is_held_by_the_restore(
    lab: RestoreLab, how: str
) -> None:
    """A step started again (``restart_step``) writes its own ledger line.

    The run's first POST was left in doubt by a crash long before the backup: the backup
    shows its step open, and the compaction after a later backup drops the first attempt's
    line (it is older than every kept backup). The POST is then sent again, after the
    backup: by the analyst's ``resolve retry``, or by the worker itself for an endpoint that
    honours keys. Only the line of that second attempt tells a restore of the backup that
    the POST may have happened since.
    """
    r = lab.order("again")
    if how.startswith("idempotent"):
        settings = lab_settings()
        settings.idempotent_post_prefixes = [lab.server.url("/orders/")]
        settings.save(lab.db)
    assert lab.worker(DESKTOP_AGENT_CRASH_AT="after_effect:2") == -signal.SIGKILL
    (first,) = _ledgered(lab, r)
    wait_until(lambda: int(time.time()) > int(first[2]), what="the next second")
    b = lab.backup()  # in a later second than the first attempt's line
    assert EffectLedger.beside(lab.db).compact(b_at(b)) == 1  # older than the oldest backup

    if how == "resolve retry":
        lab.work()  # the unsafe POST waits for the analyst
        assert lab.run(r).status == RunStatus.NEEDS_ATTENTION
        lab.resolve(r, "retry")
    lab.work()
    assert lab.keys(r) == [f"{r}:2", f"{r}:2"] and lab.run(r).status == RunStatus.COMPLETED
    assert [(seq, attempt) for seq, attempt, _at in _ledgered(lab, r)] == [(2, 2)]

    lab.corrupt()
    out = lab.restore(b)
    lab.work()

    assert lab.keys(r) == [f"{r}:2", f"{r}:2"]  # not sent a third time
    assert (out["needs_attention"], out["effects_in_doubt"]) == ([r], 1)
    run = lab.run(r)
    assert run.status == RunStatus.NEEDS_ATTENTION and run.attention_seq == 2
    assert run.status_message.startswith(
        f"Restored from a backup taken at {taken_at(b_at(b))}; this effect may have happened "
        "after it: http_post"
    ), run.status_message


def _ledgered(lab: RestoreLab, run_id: str) -> list[tuple[int, int, float]]:
    """(seq, attempt, time) of the run's lines in the effect ledger."""
    read = EffectLedger.beside(lab.db).read()
    assert read is not None
    return [(e.seq, e.attempt, e.at) for e in read.entries if e.run == run_id]
