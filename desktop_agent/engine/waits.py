"""Waits: a run hibernates on an open step until what it waits for has happened.

Approvals, timers (the ``wait`` tool), questions to the analyst and budgets are open steps;
resuming one either closes it (the run goes on) or hibernates again.
"""

from __future__ import annotations

import dataclasses
import time

from desktop_agent.domain import (
    ApprovalState,
    CommandKind,
    RunStatus,
    Step,
    StepKind,
    WaitReason,
)
from desktop_agent.engine import budget as budgets
from desktop_agent.engine.ports import RunPatch
from desktop_agent.engine.recording import close_wait, commit, suspend
from desktop_agent.engine.run_state import RunState


def resume_wait(rs: RunState, step: Step) -> None:
    """Finish an open wait step if what it waits for has happened; else hibernate."""
    handler = {
        StepKind.APPROVAL: _resume_approval,
        StepKind.SLEEP: resume_sleep,
        StepKind.QUESTION: resume_question,
        StepKind.BUDGET: budgets.resume_budget_wait,
    }[step.kind]
    handler(rs, step)


def _resume_approval(rs: RunState, step: Step) -> None:
    records = rs.store.get_approvals(rs.run.id, step.seq)
    now = rs.clock.now()
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
        commit(rs, approvals=expired)
        records = rs.store.get_approvals(rs.run.id, step.seq)
    pending = [r for r in records if r.state == ApprovalState.PENDING]
    if pending:
        deadlines = [r.deadline for r in pending if r.deadline is not None]
        suspend(
            rs,
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.APPROVAL,
                wake_at=min(deadlines) if deadlines else None,
                status_message="Waiting for approval: " + ", ".join(r.tool for r in pending),
            ),
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
    close_wait(rs, step, {"decisions": decisions})


def resume_sleep(rs: RunState, step: Step) -> None:
    """Close a ``wait`` sleep once its time has come; else hibernate until then."""
    until = float((step.input or {}).get("until", 0))
    now = rs.clock.now()
    if now >= until:
        slept = until - float((step.input or {}).get("from", until))
        close_wait(rs, step, {"content": f"Waited until {time.ctime(until)}."}, worked_s=slept)
        return
    suspend(
        rs,
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.TIMER,
            wake_at=until,
            status_message=f"Sleeping until {time.ctime(until)}",
        ),
    )


def resume_question(rs: RunState, step: Step) -> None:
    """Close a question once the analyst answered it; else hibernate."""
    for cmd in rs.store.pending_commands(rs.run.id):
        if cmd.kind == CommandKind.ANSWER:
            answer = str((cmd.payload or {}).get("text", ""))
            close_wait(
                rs, step, {"content": answer}, applied=[(cmd.id, f"answered step {step.seq}")]
            )
            return
    question = str((step.input or {}).get("question", ""))
    suspend(
        rs,
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.HUMAN_INPUT,
            status_message=f"Question for you: {question}"[:300],
        ),
    )
