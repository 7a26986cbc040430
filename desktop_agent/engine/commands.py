"""The analyst's commands, applied at each step boundary.

Commands are rows (see ``JournalStore.pending_commands``). :func:`boundary` reads them
when there may be some and applies each with the handler for its kind; a handler may
pause, cancel or stop the run. Resolutions of an effect in doubt and answers to a question
are not handled here: they stay queued for the recovery or the wait that reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from desktop_agent.domain import (
    JSON,
    ApprovalState,
    Budget,
    Command,
    CommandKind,
    RunStatus,
    Step,
    StepKind,
    WaitReason,
)
from desktop_agent.domain.errors import RunCancelled
from desktop_agent.engine import edits, restored
from desktop_agent.engine.endings import finish_stopped
from desktop_agent.engine.ports import RunPatch
from desktop_agent.engine.recording import commit, record_completed
from desktop_agent.engine.run_state import RunState, Suspend

RESUMED_NOTE = (
    "The analyst stopped this run earlier (a partial report was written) and has now "
    "resumed it. Continue the work from where you left off."
)
"""The note a stopped run's conversation gets when it is resumed."""

_RUNNING = RunPatch(status=RunStatus.RUNNING, status_message="", clear_wait=True)


def boundary(rs: RunState, open_step: Step | None) -> None:
    """Apply the analyst's commands; may pause, cancel or stop the run."""
    if rs.cancel.cancelled:
        raise RunCancelled("cancelled")
    first, rs.read_commands = rs.read_commands, False
    hinted = rs.cancel.take_commands_hint()
    cmds = rs.store.pending_commands(rs.run.id) if first or hinted else []
    for cmd in cmds:
        apply_command(rs, cmd, open_step=open_step)
    run = rs.run
    if run.status in (RunStatus.PAUSED, RunStatus.STOPPED):
        # A stopped run woken by a command that does not resume it (a budget
        # extension) stays stopped, as a paused one stays paused.
        raise Suspend(run.status)
    if open_step is None and run.status == RunStatus.NEEDS_ATTENTION:
        raise Suspend(run.status)
    if open_step is None and run.status == RunStatus.WAITING:
        # Woken early (e.g. to apply a note): keep waiting until the wake time.
        if run.wait_reason == WaitReason.CREDENTIALS:
            raise Suspend(run.status)
        if run.wake_at is not None and rs.clock.now() < run.wake_at:
            raise Suspend(run.status)


def apply_command(rs: RunState, cmd: Command, *, open_step: Step | None) -> None:
    """Apply one command row (or leave it for the open step it must wait for)."""
    handler = _HANDLERS.get(cmd.kind)
    if handler is not None:
        handler(rs, cmd, open_step)


def _cancel(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    commit(rs, applied=[(cmd.id, "cancelled")])
    raise RunCancelled("cancelled by the analyst")


def _pause(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    status = rs.run.status
    if status.is_terminal or status in (RunStatus.PAUSED, RunStatus.STOPPED):
        commit(rs, applied=[(cmd.id, f"ignored: run is {status}")])
        return
    commit(
        rs,
        applied=[(cmd.id, "paused")],
        patch=RunPatch(status=RunStatus.PAUSED, status_message="Paused by the analyst"),
    )


def _resume(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    status = rs.run.status
    if status == RunStatus.STOPPED:
        _resume_stopped(rs, cmd)
    elif status in (RunStatus.PAUSED, RunStatus.FAILED, RunStatus.WAITING):
        commit(rs, applied=[(cmd.id, "resumed")], patch=_RUNNING)
        payload = cmd.payload if isinstance(cmd.payload, dict) else {}
        lost = payload.get("storage")  # the worker's resume after a storage pause
        if isinstance(lost, dict):
            rs.storage_resume = lost
    elif status == RunStatus.NEEDS_ATTENTION and rs.run.attention_seq is None:
        # Parked after an internal or storage error: try again.
        commit(rs, applied=[(cmd.id, "retrying")], patch=_RUNNING)
    elif status == RunStatus.NEEDS_ATTENTION:
        commit(rs, applied=[(cmd.id, "ignored: decide about the step in doubt with resolve")])
    else:
        commit(rs, applied=[(cmd.id, f"ignored: run is {status}")])


def _resume_stopped(rs: RunState, cmd: Command) -> None:
    """Continue a stopped run from its journal, telling the model it was resumed.

    The partial report stays in the journal; the conversation is the one the run had
    when it stopped (a wait it was in was closed, so a tool call that waited for an
    approval is asked again). The note goes the way of the analyst's notes.
    """
    _deliver_note(
        rs,
        cmd,
        {"text": RESUMED_NOTE, "resumed": True},
        "resumed after a stop; note at step {seq}",
        _RUNNING,
    )


def _steer(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    if open_step is not None:
        # A note never follows an open step: it is delivered once the step is closed
        # (a wait ends, an effect in doubt is decided about, an interrupted call is made
        # again). Meanwhile it wakes nothing (WorkerQueries).
        rs.read_commands = True
        return
    text = str((cmd.payload or {}).get("text", ""))
    _deliver_note(rs, cmd, {"text": text}, "delivered as step {seq}")


def _deliver_note(
    rs: RunState, cmd: Command, note: JSON, applied: str, patch: RunPatch | None = None
) -> None:
    """Record ``note`` as a delivered steer step, applying ``cmd`` in the same commit.

    ``applied`` is the command's outcome text; ``{seq}`` in it names the note's step.
    """
    text = applied.format(seq=rs.next_seq)
    record_completed(
        rs,
        StepKind.STEER,
        "note",
        note,
        {"delivered": True},
        patch=patch,
        applied=[(cmd.id, text)],
    )


def extend(budget: Budget, payload: JSON) -> Budget:
    """Apply an ``extend_budget`` command's payload to ``budget``."""
    data = payload if isinstance(payload, dict) else {}
    return budget.extended(
        cost_usd=float(data.get("cost_usd", 0) or 0),
        steps=int(data.get("steps", 0) or 0),
        time_s=float(data.get("time_s", 0) or 0),
        tokens=int(data.get("tokens", 0) or 0),
    )


def _extend_budget(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    new = extend(rs.run.budget, cmd.payload or {})
    commit(rs, applied=[(cmd.id, "budget extended")], patch=RunPatch(budget=new.to_json()))


def _stop(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    if rs.run.status == RunStatus.STOPPED:
        commit(rs, applied=[(cmd.id, "ignored: run is already stopped")])
        return
    commit(rs, applied=[(cmd.id, "stopping")])
    finish_stopped(rs, "Stopped by the analyst")


def _resolve(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    # A resolution of the step in doubt is read by the recovery it belongs to.
    if not _resolves_open_step(rs):
        commit(rs, applied=[(cmd.id, "ignored: no step of this run is in doubt")])


def _resolves_open_step(rs: RunState) -> bool:
    step = rs.open_step
    if restored.is_restore_step(step):
        return True  # effects a restore left in doubt (engine/restored.py)
    return step is not None and step.kind == StepKind.TOOL_CALL and step.effect is not None


def _answer(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    # An answer to the question the run asks is read by the wait it belongs to.
    if not (rs.open_step is not None and rs.open_step.kind == StepKind.QUESTION):
        commit(rs, applied=[(cmd.id, "ignored: the run asked no question")])


def _decide(rs: RunState, cmd: Command, open_step: Step | None) -> None:
    apply_decision(rs, cmd)


def apply_decision(rs: RunState, cmd: Command) -> None:
    """Record an approve/edit/reject command on its approval record."""
    payload = cmd.payload or {}
    approval_id = str(payload.get("approval_id", ""))
    try:
        seq = int(approval_id.rsplit(".", 2)[1])
    except (IndexError, ValueError):
        commit(rs, applied=[(cmd.id, f"ignored: no approval {approval_id}")])
        return
    match = [a for a in rs.store.get_approvals(rs.run.id, seq) if a.id == approval_id]
    if not match or match[0].state != ApprovalState.PENDING:
        commit(rs, applied=[(cmd.id, f"ignored: approval {approval_id} is not pending")])
        return
    rec = match[0]
    now = rs.clock.now()
    if cmd.kind == CommandKind.REJECT:
        state, args = ApprovalState.REJECTED, rec.arguments
    elif "arguments" in payload:
        # An edit runs as edited or not at all: one that cannot run is refused here (the
        # approval stays pending), never read as approving the original call.
        args = payload["arguments"]
        problem = edits.edit_problem(rs.tools.get(rec.tool), args)
        if problem:
            commit(rs, applied=[(cmd.id, f"refused: {problem}; approval {approval_id} pending")])
            return
        state = ApprovalState.EDITED
    else:
        state, args = ApprovalState.APPROVED, rec.arguments

    decided = dataclasses.replace(
        rec,
        state=state,
        decided_arguments=args,
        decision_note=str(payload.get("reason", "")),
        decided_at=now,
    )
    commit(rs, approvals=[decided], applied=[(cmd.id, str(state))])


_Handler = Callable[[RunState, Command, "Step | None"], None]

_HANDLERS: dict[CommandKind, _Handler] = {
    CommandKind.CANCEL: _cancel,
    CommandKind.PAUSE: _pause,
    CommandKind.RESUME: _resume,
    CommandKind.STEER: _steer,
    CommandKind.EXTEND_BUDGET: _extend_budget,
    CommandKind.APPROVE: _decide,
    CommandKind.REJECT: _decide,
    CommandKind.STOP: _stop,
    CommandKind.RESOLVE: _resolve,
    CommandKind.ANSWER: _answer,
}
"""How each kind of command is applied at a boundary."""
