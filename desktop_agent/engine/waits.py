"""Waits: a run hibernates on an open step until what it waits for has happened.

Approvals, timers (the ``wait`` tool), questions to the analyst and budgets are open steps;
resuming one either closes it (the run goes on) or hibernates again.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from desktop_agent.domain import (
    JSON,
    ApprovalState,
    CommandKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.engine import budget as budgets
from desktop_agent.engine.ports import (
    RunPatch,
    StepOutcome,
)

if TYPE_CHECKING:
    from desktop_agent.engine.loop import Activation


def resume_wait(act: Activation, step: Step) -> None:
    """Finish an open wait step if what it waits for has happened; else hibernate."""
    handler = {
        StepKind.APPROVAL: _resume_approval,
        StepKind.SLEEP: resume_sleep,
        StepKind.QUESTION: resume_question,
        StepKind.BUDGET: budgets.resume_budget_wait,
    }[step.kind]
    handler(act, step)


def close_wait(act: Activation, step: Step, output: JSON, *, worked_s: float = 0.0) -> None:
    """Complete an open wait step and mark the run running again.

    ``worked_s`` counts towards the run's time budget (the run's own timer waits do;
    waits on the analyst do not).
    """
    act._outcome = StepOutcome(step.seq, StepStatus.COMPLETED, output)
    act._fold_local(step.seq, step.kind, step.name, step.input, outcome=act._outcome)
    act.open_step = None
    act.commit(
        patch=RunPatch(
            status=RunStatus.RUNNING,
            clear_wait=True,
            status_message="",
            add_active_seconds=max(0.0, worked_s),
        )
    )


def _resume_approval(act: Activation, step: Step) -> None:
    records = act.store.get_approvals(act.run.id, step.seq)
    now = act.clock.now()
    expired = []
    for rec in records:
        if rec.state == ApprovalState.PENDING and rec.deadline is not None and rec.deadline <= now:
            action = "approve" if rec.default_action == "approve" else "reject"
            expired.append(
                dataclasses.replace(
                    rec,
                    state=ApprovalState.EXPIRED,
                    decided_arguments=rec.arguments,
                    decision_note=(
                        f"no decision before the deadline; the default action ({action}) "
                        "was applied"
                    ),
                    decided_at=now,
                )
            )
    if expired:
        act.commit(approvals=expired)
        records = act.store.get_approvals(act.run.id, step.seq)
    pending = [r for r in records if r.state == ApprovalState.PENDING]
    if pending:
        deadlines = [r.deadline for r in pending if r.deadline is not None]
        act.suspend(
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.APPROVAL,
                wake_at=min(deadlines) if deadlines else None,
                status_message="Waiting for approval: " + ", ".join(r.tool for r in pending),
            )
        )
    by_id = {r.id: r for r in records}
    decisions = []
    for item in (step.input or {}).get("requests", []):
        rec = by_id[item["approval_id"]]
        label = str(rec.state)
        if rec.state == ApprovalState.EXPIRED:
            approved = rec.default_action == "approve"
            label = "expired_approved" if approved else "expired_rejected"
        decisions.append(
            {
                "tool_use_id": item["tool_use_id"],
                "approval_id": rec.id,
                "state": label,
                "arguments": rec.decided_arguments,
                "note": rec.decision_note,
            }
        )
    close_wait(act, step, {"decisions": decisions})


def resume_sleep(act: Activation, step: Step) -> None:
    """Close a ``wait`` sleep once its time has come; else hibernate until then."""
    until = float((step.input or {}).get("until", 0))
    now = act.clock.now()
    if now >= until:
        slept = until - float((step.input or {}).get("from", until))
        close_wait(act, step, {"content": f"Waited until {time.ctime(until)}."}, worked_s=slept)
        return
    act.suspend(
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.TIMER,
            wake_at=until,
            status_message=f"Sleeping until {time.ctime(until)}",
        )
    )


def resume_question(act: Activation, step: Step) -> None:
    """Close a question once the analyst answered it; else hibernate."""
    for cmd in act.store.pending_commands(act.run.id):
        if cmd.kind == CommandKind.ANSWER:
            answer = str((cmd.payload or {}).get("text", ""))
            act._outcome = StepOutcome(step.seq, StepStatus.COMPLETED, {"content": answer})
            act._fold_local(step.seq, step.kind, step.name, step.input, outcome=act._outcome)
            act.open_step = None
            act.commit(
                patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True, status_message=""),
                applied=[(cmd.id, f"answered step {step.seq}")],
            )
            return
    question = str((step.input or {}).get("question", ""))
    act.suspend(
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.HUMAN_INPUT,
            status_message=f"Question for you: {question}"[:300],
        )
    )
