"""After a restore: every effect the restored journal does not show finished is in doubt.

A backup is older than the world. Whatever the runs did after it is missing from the
restored journal, and a run resumed from it would do it again (with the same idempotency
keys: the steps line up). The effect ledger (:mod:`desktop_agent.persistence.ledger`) kept,
beside the database, a line for every effect started; :func:`reconcile` reads it and, in
the restored copy, *before* that copy is put in place:

* an effect of the ledger is **settled** when the restored journal shows its step finished
  (same sequence number, same tool), or when an earlier restore listed it and the analyst
  has decided about it since (a completed :data:`~desktop_agent.engine.restored.RESTORE_STEP`
  step lists its key);
* every other effect of a run the backup holds is **in doubt**: its run needs the analyst
  (see :mod:`desktop_agent.engine.restored` for what ``resolve`` then does). When it is
  the run's last step, still open in the journal, the run waits at that step as after a
  crash; otherwise the run's journal gets an open restore step listing the effects, with a
  sequence number above all of them so that no idempotency key is ever used twice;
* a run with nothing in doubt may resume: model calls and read-only steps repeat harmlessly,
  and every effect it started after the backup would be in the ledger. The time of the
  backup matters only here: the ledger must reach back to it. When it does not (there is no
  ledger, it cannot be read, or it starts after the backup), nothing says what a run did
  after the backup, so every run not finished then needs the analyst;
* effects of runs created after the backup cannot be put in doubt (their runs are gone):
  they are counted, and stay listed in the ledger.

The ledger itself is never changed by a restore, so a second restore knows as much as the
first. Decisions that were pending in the restored copy for a run now held (approvals,
resolves, resumes, answers) were made about a state the world has left: they are marked
ignored rather than carried out.

The restored file is read and changed with ``sqlite3`` itself (nothing else has it open,
and it may be of any schema version), with statements built from the declared tables and
rendered once (:mod:`~desktop_agent.persistence.compiled`). They name only columns every
schema version has (migration 0001 on), so that this works on a backup of any version.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Select, bindparam, case, func, insert, select, update

from desktop_agent.domain import ApprovalState, RunStatus, StepKind, StepStatus
from desktop_agent.domain.errors import StorageError
from desktop_agent.engine.restored import (
    LEDGER_COMPLETE,
    LEDGER_MISSING,
    LEDGER_TOO_NEW,
    LEDGER_UNREADABLE,
    RESTORE_STEP,
    restore_message,
    step_message,
    when,
)
from desktop_agent.persistence.compiled import execute
from desktop_agent.persistence.ledger import LEDGERED, Contents, EffectLedger, Entry, summarize
from desktop_agent.persistence.tables import approvals, commands, runs, steps, workers

_DECISIONS = ("resolve", "resume", "approve", "reject", "answer")
"""Pending commands of a held run that were decided about the world before the restore."""

_FINISHED = (str(StepStatus.COMPLETED), str(StepStatus.FAILED))
_TERMINAL = frozenset(str(s) for s in RunStatus if s.is_terminal)

_RUNS = select(runs.c.id, runs.c.status, runs.c.last_seq)
_STEPS = select(steps.c.run_id, steps.c.seq, steps.c.kind, steps.c.name, steps.c.status)
_STEP = select(
    steps.c.seq,
    steps.c.kind,
    steps.c.name,
    steps.c.status,
    steps.c.effect,
    steps.c.input,
    steps.c.started_at,
).where(steps.c.run_id == bindparam("run"), steps.c.seq == bindparam("at_seq"))
_RESTORE_STEPS = select(steps.c.input).where(
    steps.c.kind == bindparam("kind"),
    steps.c.name == bindparam("name"),
    steps.c.status == bindparam("status"),
)
"""Inputs of restore steps in a given status (parameters ``kind``, ``name``, ``status``)."""

_INSERT_STEP = insert(steps)

_CLOSE_STEP = update(steps).where(
    steps.c.run_id == bindparam("run"), steps.c.seq == bindparam("at_seq")
)

_EXPIRE_APPROVALS = (
    update(approvals)
    .where(
        approvals.c.run_id == bindparam("run"),
        approvals.c.seq == bindparam("at_seq"),
        approvals.c.state == bindparam("pending"),
    )
    .values(
        state=bindparam("expired"),
        decision_note=bindparam("note"),
        decided_at=bindparam("now"),
    )
)

_HOLD = (
    update(runs)
    .where(runs.c.id == bindparam("run"))
    .values(
        last_seq=case((runs.c.last_seq > bindparam("seq"), runs.c.last_seq), else_=bindparam("seq"))
    )
)
"""Hold a run for the analyst at step ``seq`` (parameters: ``run``, ``seq``, and the columns
it sets)."""

_VOID_DECISIONS = update(commands).where(
    commands.c.run_id == bindparam("run"),
    commands.c.applied_at.is_(None),
    commands.c.kind.in_([bindparam(f"kind{i}") for i in range(len(_DECISIONS))]),
)
"""Mark the pending decisions of a run applied (parameters: ``run``, ``kind0``, ... and the
columns it sets)."""


def _newest_time_query() -> Select[Any]:
    def newest(column: ColumnElement[float]) -> ColumnElement[float]:
        return func.coalesce(select(func.max(column)).scalar_subquery(), 0)

    return select(
        func.max(
            newest(runs.c.updated_at),
            newest(steps.c.started_at),
            newest(steps.c.finished_at),
            newest(workers.c.heartbeat_at),
        )
    )


_NEWEST_TIME = _newest_time_query()
"""The newest time the database records (SQLite's ``max()`` of several values)."""


@dataclass(frozen=True)
class Reconciled:
    """What :func:`reconcile` found and did.

    Attributes:
        backup_at: the time the restored copy stands for.
        ledger: ``complete``, ``missing``, ``unreadable`` or ``too_new`` (it starts later).
        ledger_since: when the ledger starts (None: unknown).
        held: runs that now need the analyst.
        in_doubt: effects in doubt in those runs.
        orphaned: effects of runs the backup does not hold (created after it).
        skipped_lines: ledger lines that could not be read.
    """

    backup_at: float
    ledger: str
    ledger_since: float | None = None
    held: tuple[str, ...] = ()
    in_doubt: int = 0
    orphaned: int = 0
    skipped_lines: int = 0

    def summary(self, ledger_path: Path) -> str:
        """What the user must know, as the tail of one line."""
        t = when(self.backup_at)
        see = "`desktop-agent runs --status needs_attention` lists them"
        n = len(self.held)
        runs = f"{n} run{'s' if n != 1 else ''}"
        if self.ledger == LEDGER_COMPLETE:
            text = (
                f"{runs} need{'s' if n == 1 else ''} you: {self.in_doubt} effect"
                f"{'s' if self.in_doubt != 1 else ''} may have happened after {t} ({see})"
                if n
                else f"no run needs you: the effect ledger shows no effect in doubt after {t}"
            )
        else:
            why = {
                LEDGER_MISSING: "the effect ledger is missing",
                LEDGER_UNREADABLE: "the effect ledger cannot be read",
            }.get(self.ledger, "the effect ledger does not reach back to the backup")
            text = (
                f"{why}: {runs} not finished at {t} need{'s' if n == 1 else ''} you; check "
                f"what each did after it ({see})"
                if n
                else f"{why}, but every run had finished at {t}: none needs you"
            )
        if self.orphaned:
            text += (
                f"; {self.orphaned} effect{'s' if self.orphaned != 1 else ''} of runs created "
                f"after the backup {'are' if self.orphaned != 1 else 'is'} not in it "
                f"({ledger_path} lists them)"
            )
        if self.skipped_lines:
            text += f"; {self.skipped_lines} unreadable ledger line(s) skipped"
        return text


@dataclass
class _Run:
    """What the reconciliation needs of one restored run."""

    id: str
    status: str
    last_seq: int
    steps: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    """seq -> (kind, name, status)"""


def reconcile(
    db_file: Path, ledger: EffectLedger, backup_at: float | None, now: float
) -> Reconciled:
    """Hold every run of the database at ``db_file`` whose effects after the backup are unknown.

    Args:
        db_file: the restored copy, not yet in place (nothing else has it open).
        ledger: the effect ledger of the database it will replace.
        backup_at: when the copy was made (None: unknown; the newest time it records is
            taken instead).
        now: the time of the changes.

    Raises:
        StorageError: the copy cannot be read or written.
    """
    try:
        conn = sqlite3.connect(db_file, isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open the restored copy {db_file}: {exc}") from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, as backups are
        conn.execute("BEGIN IMMEDIATE")
        try:
            t = backup_at if backup_at is not None else _newest_time(conn)
            done = _reconcile(conn, ledger, t, now)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise StorageError(
            f"cannot check the restored copy against the effect ledger: {exc}"
        ) from None
    finally:
        conn.close()
    return done


def _reconcile(conn: sqlite3.Connection, ledger: EffectLedger, t: float, now: float) -> Reconciled:
    contents, state = _read(ledger, t)
    runs = _load_runs(conn)
    settled = _settled_keys(conn)
    latest: dict[str, dict[str, Entry]] = {}
    for e in contents.entries if contents else []:
        if e.key not in settled:
            latest.setdefault(e.run, {})[e.key] = e  # the newest attempt of each key
    held: list[str] = []
    in_doubt = 0
    for run in runs.values():
        lost = sorted(
            (e for e in latest.get(run.id, {}).values() if not _shown(run, e)),
            key=lambda e: e.seq,
        )
        n = _hold(conn, run, lost, state, contents, t, now)
        if n is not None:
            held.append(run.id)
            in_doubt += n
    orphaned = sum(len(keys) for run_id, keys in latest.items() if run_id not in runs)
    return Reconciled(
        backup_at=t,
        ledger=state,
        ledger_since=contents.since if contents else None,
        held=tuple(held),
        in_doubt=in_doubt,
        orphaned=orphaned,
        skipped_lines=contents.skipped if contents else 0,
    )


def _read(ledger: EffectLedger, t: float) -> tuple[Contents | None, str]:
    """The ledger's contents and how far it answers for the time after ``t``."""
    try:
        contents = ledger.read()
    except StorageError:
        return None, LEDGER_UNREADABLE
    if contents is None:
        # A new ledger, from now on: a second restore of this backup must find it too new,
        # not complete (what happened after the backup stays unknown).
        ledger.ensure()
        return None, LEDGER_MISSING
    if contents.since is None:
        return contents, LEDGER_UNREADABLE
    if not contents.complete_since(t):
        return contents, LEDGER_TOO_NEW
    return contents, LEDGER_COMPLETE


def _hold(
    conn: sqlite3.Connection,
    run: _Run,
    lost: list[Entry],
    state: str,
    contents: Contents | None,
    t: float,
    now: float,
) -> int | None:
    """Hold ``run`` for the analyst if it must be; returns the effects in doubt (None: free)."""
    last = max(run.steps, default=0)
    trailing = _step(conn, run.id, last) if last else None
    is_open = trailing is not None and trailing["status"] == str(StepStatus.STARTED)
    if state == LEDGER_COMPLETE:
        if not lost:
            return None
        if (
            is_open
            and trailing is not None
            and trailing["kind"] == str(StepKind.TOOL_CALL)
            and [e.seq for e in lost] == [last]
        ):
            # The open step itself: it waits for the analyst as after a crash.
            message = step_message(t, _effect(lost[0]), run.id)
            _set_held(conn, run.id, last, message, t, now)
            return 1
    elif run.status in _TERMINAL and not lost:
        return None
    effects = [_effect(e) for e in lost]
    backup_at, ledger_state = t, state
    if is_open and trailing is not None:
        previous = _close_open(conn, run.id, trailing, t, now)
        if previous is not None:  # held by an earlier restore, never decided: it stands
            backup_at = min(t, float(previous.get("backup_at") or t))
            if previous.get("ledger", LEDGER_COMPLETE) != LEDGER_COMPLETE:
                ledger_state = str(previous["ledger"])
            known = {e["key"] for e in effects}
            effects += [e for e in previous.get("effects") or [] if e.get("key") not in known]
        elif trailing["effect"] in LEDGERED and f"{run.id}:{last}" not in {
            e["key"] for e in effects
        }:
            effects.append(_journal_effect(run.id, trailing))
    effects.sort(key=lambda e: int(e.get("seq") or 0))
    seq = max([last, run.last_seq] + [int(e.get("seq") or 0) for e in effects]) + 1
    info: dict[str, Any] = {
        "backup_at": backup_at,
        "ledger": ledger_state,
        "ledger_since": contents.since if contents else None,
        "effects": effects,
    }
    execute(
        conn,
        _INSERT_STEP,
        {
            "run_id": run.id,
            "seq": seq,
            "kind": str(StepKind.ERROR),
            "name": RESTORE_STEP,
            "status": str(StepStatus.STARTED),
            "effect": None,
            "attempt": 1,
            "input": _dumps(info),
            "output": None,
            "error": None,
            "partial_text": "",
            "started_at": now,
            "finished_at": None,
        },
    )
    _set_held(conn, run.id, seq, restore_message(info, run.id), backup_at, now)
    return len(effects)


def _set_held(
    conn: sqlite3.Connection, run_id: str, seq: int, message: str, t: float, now: float
) -> None:
    """The run needs the analyst about step ``seq``; decisions pending from before are void."""
    execute(
        conn,
        _HOLD,
        {
            "run": run_id,
            "seq": seq,
            "status": str(RunStatus.NEEDS_ATTENTION),
            "status_message": message,
            "attention_seq": seq,
            "wait_reason": None,
            "wake_at": None,
            "updated_at": now,
            "lease_owner": None,
            "lease_expires_at": None,
        },
    )
    execute(
        conn,
        _VOID_DECISIONS,
        {
            "run": run_id,
            "applied_at": now,
            "result": f"ignored: superseded by the restore of a backup taken at {when(t)}",
            **{f"kind{i}": kind for i, kind in enumerate(_DECISIONS)},
        },
    )


def _close_open(
    conn: sqlite3.Connection, run_id: str, step: sqlite3.Row, t: float, now: float
) -> dict[str, Any] | None:
    """Close the run's open last step (its outcome was lost); the input of a restore step."""
    seq = int(step["seq"])
    execute(
        conn,
        _CLOSE_STEP,
        {
            "run": run_id,
            "at_seq": seq,
            "status": str(StepStatus.FAILED),
            "error": f"restored from a backup taken at {when(t)}: "
            "what became of this step is not known",
            "finished_at": now,
        },
    )
    if step["kind"] == str(StepKind.APPROVAL):
        execute(
            conn,
            _EXPIRE_APPROVALS,
            {
                "run": run_id,
                "at_seq": seq,
                "pending": str(ApprovalState.PENDING),
                "expired": str(ApprovalState.EXPIRED),
                "note": f"restored from a backup taken at {when(t)}",
                "now": now,
            },
        )
    if step["kind"] == str(StepKind.ERROR) and step["name"] == RESTORE_STEP:
        info = _loads(step["input"])
        return info if isinstance(info, dict) else {}
    return None


def _shown(run: _Run, e: Entry) -> bool:
    """Whether the restored journal shows the ledger's effect finished."""
    step = run.steps.get(e.seq)
    return (
        step is not None
        and step[0] == str(StepKind.TOOL_CALL)
        and step[1] == e.tool
        and step[2] in _FINISHED
    )


def _effect(e: Entry) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "key": e.key,
        "tool": e.tool,
        "effect": e.effect,
        "at": e.at,
        "what": e.what,
    }


def _journal_effect(run_id: str, step: sqlite3.Row) -> dict[str, Any]:
    """An open effect step the ledger does not list (it was missing, or the line was lost)."""
    data = _loads(step["input"])
    args = data.get("arguments") if isinstance(data, dict) else data
    return {
        "seq": int(step["seq"]),
        "key": f"{run_id}:{step['seq']}",
        "tool": str(step["name"]),
        "effect": str(step["effect"]),
        "at": float(step["started_at"]),
        "what": summarize(args),
    }


def _load_runs(conn: sqlite3.Connection) -> dict[str, _Run]:
    found = {
        str(run_id): _Run(str(run_id), str(status), int(last_seq or 0))
        for run_id, status, last_seq in execute(conn, _RUNS, {})
    }
    for run_id, seq, kind, name, status in execute(conn, _STEPS, {}):
        run = found.get(run_id)
        if run is not None:
            run.steps[int(seq)] = (kind, name, status)
    return found


def _step(conn: sqlite3.Connection, run_id: str, seq: int) -> sqlite3.Row | None:
    row: sqlite3.Row | None = execute(conn, _STEP, {"run": run_id, "at_seq": seq}).fetchone()
    return row


def _settled_keys(conn: sqlite3.Connection) -> set[str]:
    """Keys listed by restore steps the analyst has decided about."""
    keys: set[str] = set()
    decided = {
        "kind": str(StepKind.ERROR),
        "name": RESTORE_STEP,
        "status": str(StepStatus.COMPLETED),
    }
    for (text,) in execute(conn, _RESTORE_STEPS, decided):
        info = _loads(text)
        if isinstance(info, dict):
            keys.update(_keys(info.get("effects") or []))
    return keys


def _keys(effects: Iterable[Any]) -> set[str]:
    return {str(e["key"]) for e in effects if isinstance(e, Mapping) and "key" in e}


def _newest_time(conn: sqlite3.Connection) -> float:
    """The newest time the database records: the copy was made no earlier."""
    row = execute(conn, _NEWEST_TIME, {}).fetchone()
    return float(row[0] or 0.0)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _loads(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
