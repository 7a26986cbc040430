"""Runs put back from an older backup: the effects that may have happened after it.

A restore (``desktop-agent db restore``) puts back a journal that is older than the world:
whatever the runs did after the backup is not in it. Every effect is written to the effect
ledger before it starts, so the restore knows which effects the restored journal does not
show finished (``desktop_agent.persistence.restored``). When the only one is the run's last
step, still open in the journal, the run waits at that step as after a crash. Otherwise the
restore ends the run's journal with an open step of kind ``error`` named
:data:`RESTORE_STEP` that lists them (its input: :func:`restore_info` fields), and the run
needs attention. The analyst decides with ``resolve``, as for an effect in doubt:

* ``skip``: the run goes on from the backup; the model is told that these actions may or
  may not have happened and to check before doing any of them again;
* ``mark_done``: the run goes on; the model is told they were done, not to repeat them;
* ``retry``: the run goes on from the backup as if they had not happened: it may do them
  again.

``probe`` cannot tell: the ledger keeps only the start of each effect's arguments.

The step's sequence number is above every lost step's, so the steps that follow get
idempotency keys never used before: a target that honours keys can neither take a new
action for one of the lost ones (which were perhaps different) nor the reverse.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from desktop_agent.domain import (
    CommandKind,
    Resolution,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
)
from desktop_agent.engine.ports import RunPatch, StepOutcome
from desktop_agent.engine.recording import close_step, commit, needs_attention, record_completed
from desktop_agent.engine.run_state import RunState

RESTORE_STEP = "restored_from_backup"
"""Name of the open ``error`` step that holds a restored run for the analyst."""

LEDGER_COMPLETE = "complete"
LEDGER_MISSING = "missing"
LEDGER_UNREADABLE = "unreadable"
LEDGER_TOO_NEW = "too_new"
"""What the restore knew of the effects after the backup (``ledger`` in the step's input):
all of them, nothing (no ledger file), nothing (a ledger it could not read), or only those
after the ledger's start, later than the backup."""

SHOWN = 3
"""Effects named in a status message; the step's input lists them all."""


def is_restore_step(step: Step | None) -> bool:
    """Whether ``step`` is the step a restore left to hold its run."""
    return step is not None and step.kind == StepKind.ERROR and step.name == RESTORE_STEP


def when(t: float, *, day: bool = True) -> str:
    """A time as the analyst's clock shows it."""
    return time.strftime("%Y-%m-%d %H:%M:%S" if day else "%H:%M:%S", time.localtime(t))


def describe_effect(effect: Mapping[str, Any], backup_at: float) -> str:
    """``http_post {"url": …} (step 2, started 10:00:03)``."""
    what = str(effect.get("what", ""))
    what = what if len(what) <= 80 else what[:79] + "…"
    at = float(effect.get("at") or 0.0)
    same_day = time.localtime(at)[:3] == time.localtime(backup_at)[:3]
    started = f", started {when(at, day=not same_day)}" if at else ""
    tool = str(effect.get("tool", "?"))
    return f"{tool}{' ' + what if what else ''} (step {effect.get('seq')}{started})"


def restore_message(info: Mapping[str, Any], run_id: str) -> str:
    """Why a restored run needs the analyst, in one line (its status message)."""
    t = float(info.get("backup_at") or 0.0)
    effects: Sequence[Mapping[str, Any]] = info.get("effects") or []
    ledger = str(info.get("ledger", LEDGER_COMPLETE))
    head = f"Restored from a backup taken at {when(t)}"
    named = ", ".join(describe_effect(e, t) for e in effects[:SHOWN])
    if len(effects) > SHOWN:
        named += f" and {len(effects) - SHOWN} more"
    decide = f"decide with `desktop-agent resolve {run_id} skip|mark_done|retry`"
    if ledger == LEDGER_COMPLETE:
        what = "this effect" if len(effects) == 1 else f"these {len(effects)} effects"
        return f"{head}; {what} may have happened after it: {named}; {decide}."
    if ledger == LEDGER_MISSING:
        why = " and the effect ledger is missing"
    elif ledger == LEDGER_UNREADABLE:
        why = " and the effect ledger cannot be read"
    else:
        since = float(info.get("ledger_since") or 0.0)
        why = f", older than the effect ledger (it starts at {when(since)})"
    known = f" It is known to have started: {named}." if named else ""
    return (
        f"{head}{why}; check what this run did after {when(t)} before resuming, "
        f"then {decide}.{known}"
    )


def step_message(backup_at: float, effect: Mapping[str, Any], run_id: str) -> str:
    """Why a restored run waits at its last step, an effect still open in the journal."""
    return (
        f"Restored from a backup taken at {when(backup_at)}; this effect may have happened "
        f"after it: {describe_effect(effect, backup_at)}. Probe it, mark it done, retry it "
        f"with the same idempotency key, or skip it (`desktop-agent resolve {run_id} ...`)."
    )


def _model_note(info: Mapping[str, Any], decision: Resolution) -> str | None:
    """What the model is told when the run goes on (None: nothing, for a retry)."""
    t = when(float(info.get("backup_at") or 0.0))
    effects: Sequence[Mapping[str, Any]] = info.get("effects") or []
    listed = "; ".join(describe_effect(e, 0.0) for e in effects)
    head = (
        f"This run's record was restored from a backup taken at {t}: what you did after "
        "that was lost from it, and you continue from there."
    )
    if decision == Resolution.MARK_DONE:
        if listed:
            return f"{head} These actions had been done after {t}: {listed}. Do not repeat them."
        return (
            f"{head} The analyst checked that the actions you took after {t} were done: do not "
            "repeat them."
        )
    if decision == Resolution.SKIP:
        if listed:
            return (
                f"{head} These actions were started after {t} and may or may not have "
                f"happened: {listed}. Do not assume either; check before doing any of them again."
            )
        return (
            f"{head} Actions you took after {t} may or may not have happened: check before "
            "repeating any action."
        )
    return None


def recover_restore(rs: RunState, step: Step) -> None:
    """Hold the run on its restore step until the analyst decides; apply the decision."""
    info: Mapping[str, Any] = step.input if isinstance(step.input, dict) else {}
    cmd = next(
        (c for c in rs.store.pending_commands(rs.run.id) if c.kind == CommandKind.RESOLVE),
        None,
    )
    if cmd is None:
        needs_attention(rs, restore_message(info, rs.run.id), step.seq)
        return
    action = str((cmd.payload or {}).get("action", ""))
    if action not in (Resolution.SKIP, Resolution.MARK_DONE, Resolution.RETRY):
        why = (
            "a probe cannot tell: the arguments of effects lost with the newer database "
            "are not kept; skip, mark_done or retry"
            if action == Resolution.PROBE
            else f"ignored: {action or 'no action'} does not decide about a restore"
        )
        commit(rs, applied=[(cmd.id, why)])
        needs_attention(rs, restore_message(info, rs.run.id), step.seq)
        return
    decision = Resolution(action)
    result = {
        Resolution.SKIP: "skipped: the run goes on from the backup",
        Resolution.MARK_DONE: "marked done: the run goes on from the backup",
        Resolution.RETRY: "retrying: the run goes on from the backup and may do them again",
    }[decision]
    note = _model_note(info, decision)
    close_step(rs, step, StepOutcome(step.seq, StepStatus.COMPLETED, {"resolved": str(decision)}))
    applied = [(cmd.id, result)]
    patch = RunPatch(status=RunStatus.RUNNING, clear_attention=True, status_message="")
    if note is None:
        commit(rs, applied=applied, patch=patch)
        return
    record_completed(
        rs,
        StepKind.STEER,
        "note",
        {"text": note, "restored": True},
        {"delivered": True},
        patch=patch,
        applied=applied,
    )
