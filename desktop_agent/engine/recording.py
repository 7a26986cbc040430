"""Writing the journal of an activation: commits, buffered outcomes and recorded steps.

Every helper of the loop writes through these functions, so that the time worked, the
snapshots, the fold of what was written into the working state and the handling of a lost
lease or a failed write are done in one place. An effect's outcome is buffered
(:func:`finish_step`) and written with the next commit, together with whatever comes next
(the next intent, a wait, a change of the run's status): one transaction per step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from desktop_agent.domain import (
    JSON,
    Approval,
    EffectClass,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.errors import LeaseLost, StorageError, UnrecordedOutcomeError
from desktop_agent.engine import fencing
from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.engine.run_state import RunState, Suspend
from desktop_agent.engine.state import apply_step

_NO_USAGE = Usage()


def commit(
    rs: RunState,
    *,
    intents: Sequence[StepIntent] = (),
    patch: RunPatch | None = None,
    applied: Sequence[tuple[int, str]] = (),
    approvals: Sequence[Approval] = (),
) -> None:
    """Write the buffered outcome, new intents and run changes in one transaction.

    Raises:
        LeaseLost: another worker has claimed the run; nothing was written. An effect
            whose outcome was buffered is reported as an event on the run.
        UnrecordedOutcomeError: storage failed while the outcome of a tool's effect was
            being written: the journal shows the step started, not how it ended.
    """
    outcome, rs.outcome = rs.outcome, None
    effect, rs.effect = rs.effect, None
    patch = _with_time_worked(rs, patch)
    snapshot = _snapshot_due(rs, outcome)
    if snapshot is not None:
        rs.crash_point("before_snapshot")
    _write(rs, outcome, effect, intents, patch, snapshot, applied, approvals)
    if snapshot is not None:
        rs.crash_point("after_snapshot")
    if outcome is not None:
        rs.crash_point("after_outcome")
        _release_spent(rs)
    if patch.status is not None or patch.budget is not None or patch.spec is not None:
        rs.run = rs.store.get_run(rs.run.id)
    for intent in intents:
        if intent.status == StepStatus.STARTED:
            rs.state.scalars.last_seq = max(rs.state.scalars.last_seq, intent.seq)
        else:
            fold_local(rs, intent.seq, intent.kind, intent.name, intent.input, intent)


def _release_spent(rs: RunState) -> None:
    """Drop the monthly cap's hold for a call whose cost was just written.

    See :func:`desktop_agent.engine.budget.release_on_commit`.
    """
    token, rs.spent_reservation = rs.spent_reservation, None
    if token is not None and rs.cfg.spend_cap is not None:
        try:
            rs.cfg.spend_cap.release(rs.run.id, token)
        except Exception:  # the commit stands; the activation's end tries again
            rs.spent_reservation = token


def _with_time_worked(rs: RunState, patch: RunPatch | None) -> RunPatch:
    """``patch`` plus the time worked since the last commit (while the run was running)."""
    now = rs.clock.now()
    active = now - rs.mark if rs.run.status == RunStatus.RUNNING else 0.0
    rs.mark = now
    active = max(0.0, active)
    # The store adds the outcome's cost and tokens to the run's totals itself.
    if patch is None:
        patch = RunPatch(add_active_seconds=active)
    else:
        patch = dataclasses.replace(patch, add_active_seconds=patch.add_active_seconds + active)
    rs.active_seconds += patch.add_active_seconds
    return patch


def _snapshot_due(rs: RunState, outcome: StepOutcome | None) -> Snapshot | None:
    """The snapshot to write with ``outcome``, every ``snapshot_every`` outcomes."""
    if outcome is None:
        return None
    rs.since_snapshot += 1
    if rs.since_snapshot < rs.cfg.snapshot_every:
        return None
    rs.since_snapshot = 0
    data = rs.state.scalars.to_json()
    data["last_seq"] = outcome.seq
    return Snapshot(seq=outcome.seq, state=data)


def _write(
    rs: RunState,
    outcome: StepOutcome | None,
    effect: tuple[StepKind, str] | None,
    intents: Sequence[StepIntent],
    patch: RunPatch,
    snapshot: Snapshot | None,
    applied: Sequence[tuple[int, str]],
    approvals: Sequence[Approval],
) -> None:
    """The store's commit, with what a lost lease or a failed write means for an effect."""
    try:
        rs.store.commit(
            rs.run.id,
            outcome=outcome,
            intents=intents,
            patch=patch,
            snapshot=snapshot,
            applied_commands=applied,
            approvals=approvals,
        )
    except LeaseLost:
        if outcome is not None and effect is not None:
            fencing.report_late_outcome(rs, outcome, *effect)
        raise
    except StorageError as exc:
        if outcome is not None and effect is not None and effect[0] == StepKind.TOOL_CALL:
            # The tool acted; the journal will show its step started, not how it ended.
            raise UnrecordedOutcomeError(exc, outcome.seq) from exc
        raise


def fold_local(
    rs: RunState,
    seq: int,
    kind: StepKind,
    name: str,
    input_: JSON,
    intent: StepIntent | None = None,
    outcome: StepOutcome | None = None,
) -> None:
    """Fold a step we just wrote (or are about to) into the in-memory state."""
    now = rs.clock.now()
    error: str | None = None
    usage, cost, spent, spent_usd = _NO_USAGE, 0.0, _NO_USAGE, 0.0
    if outcome is not None:
        status, output, error = outcome.status, outcome.output, outcome.error
        usage, cost = outcome.usage or _NO_USAGE, outcome.cost_usd
        spent, spent_usd = rs.salvage.get(seq, (_NO_USAGE, 0.0))
    elif intent is not None:
        status, output = intent.status, intent.output
    else:
        status, output = StepStatus.STARTED, None
    step = Step(
        run_id=rs.run.id,
        seq=seq,
        kind=kind,
        name=name,
        status=status,
        input=input_,
        output=output,
        error=error,
        usage=usage,
        cost_usd=cost,
        salvaged_usage=spent,
        salvaged_cost_usd=spent_usd,
        started_at=now,
        finished_at=now,
    )
    apply_step(rs.state, step)


def start_step(rs: RunState, intent: StepIntent) -> None:
    """Record the intent of an effect (step 1 of the protocol), before the effect starts."""
    rs.crash_point("before_intent")
    commit(rs, intents=[intent])
    rs.crash_point("after_intent")


def record_completed(
    rs: RunState,
    kind: StepKind,
    name: str,
    input_: JSON,
    output: JSON,
    *,
    effect: EffectClass | None = None,
    patch: RunPatch | None = None,
    applied: Sequence[tuple[int, str]] = (),
) -> int:
    """Record a step that is complete as it is written, in one commit.

    A note, a tool use answered without an effect, the engine's own ``update_plan``, a
    report: the step goes in with the buffered outcome, ``patch`` and ``applied``.

    Returns:
        The step's sequence number.
    """
    seq = rs.next_seq
    intent = StepIntent(
        seq=seq,
        kind=kind,
        name=name,
        input=input_,
        effect=effect,
        status=StepStatus.COMPLETED,
        output=output,
    )
    commit(rs, intents=[intent], patch=patch, applied=applied)
    return seq


def open_wait(
    rs: RunState,
    intent: StepIntent,
    *,
    patch: RunPatch | None = None,
    approvals: Sequence[Approval] = (),
) -> Step:
    """Record a wait step (approval, sleep, question, budget) and hold it as the open step."""
    commit(rs, intents=[intent], patch=patch, approvals=approvals)
    rs.open_step = rs.store.load_steps(rs.run.id, from_seq=intent.seq)[0]
    return rs.open_step


def finish_step(
    rs: RunState, seq: int, kind: StepKind, name: str, input_: JSON, outcome: StepOutcome
) -> None:
    """Buffer the outcome of an effect; it is written with the next commit."""
    rs.crash_point("after_effect")
    rs.effect = (kind, name)
    _hold(rs, seq, kind, name, input_, outcome)


def close_step(rs: RunState, step: Step, outcome: StepOutcome) -> None:
    """Buffer the outcome that closes ``step`` (a wait, a decision, a step not redone).

    It is written with the next commit; unlike an effect's (:func:`finish_step`), a lost
    lease drops it without an event: nothing outside happened.
    """
    _hold(rs, step.seq, step.kind, step.name, step.input, outcome)


def _hold(
    rs: RunState, seq: int, kind: StepKind, name: str, input_: JSON, outcome: StepOutcome
) -> None:
    rs.outcome = outcome
    fold_local(rs, seq, kind, name, input_, outcome=outcome)


def close_wait(
    rs: RunState,
    step: Step,
    output: JSON,
    *,
    worked_s: float = 0.0,
    applied: Sequence[tuple[int, str]] = (),
) -> None:
    """Complete an open wait step and mark the run running again.

    ``worked_s`` counts towards the run's time budget (the run's own timer waits do;
    waits on the analyst do not). ``applied`` are the commands that ended the wait.
    """
    close_step(rs, step, StepOutcome(step.seq, StepStatus.COMPLETED, output))
    rs.open_step = None
    commit(
        rs,
        patch=RunPatch(
            status=RunStatus.RUNNING,
            clear_wait=True,
            status_message="",
            add_active_seconds=max(0.0, worked_s),
        ),
        applied=applied,
    )


def suspend(rs: RunState, patch: RunPatch) -> None:
    """Commit ``patch`` and end the activation."""
    commit(rs, patch=patch)
    raise Suspend(patch.status)


def needs_attention(rs: RunState, message: str, seq: int | None) -> None:
    """End the activation with the run waiting for the analyst (about step ``seq``)."""
    suspend(
        rs,
        RunPatch(
            status=RunStatus.NEEDS_ATTENTION,
            status_message=message,
            attention_seq=seq,
            clear_wait=True,
        ),
    )


def mark_running(rs: RunState) -> None:
    """Record that the run is running again (after a wait, a pause, a decision)."""
    if rs.run.status != RunStatus.RUNNING:
        commit(rs, patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True))
