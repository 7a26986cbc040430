"""How an activation ends a run: completed, or stopped and cancelled with a partial report."""

from __future__ import annotations

import dataclasses

from desktop_agent.domain import ApprovalState, RunStatus, StepKind, StepStatus
from desktop_agent.engine import report
from desktop_agent.engine.ports import RunPatch, StepOutcome
from desktop_agent.engine.recording import commit, record_completed
from desktop_agent.engine.run_state import Finish, RunState


def finish_completed(rs: RunState) -> None:
    """The model gave its final answer."""
    text = rs.state.conversation.final_text
    first = text.strip().splitlines()[0] if text.strip() else "Finished"
    commit(
        rs,
        patch=RunPatch(
            status=RunStatus.COMPLETED,
            finished_at=rs.clock.now(),
            status_message=first[:200],
            clear_wait=True,
        ),
    )
    raise Finish(RunStatus.COMPLETED)


def finish_stopped(rs: RunState, why: str) -> None:
    """Stop gracefully at the analyst's request, leaving a partial report.

    The run is not done: ``resume`` continues it from its journal, ``cancel`` ends it.
    Commands queued behind the stop stay queued for the next activation (a resume
    sent right after a stop is carried out, not dropped).
    """
    path = report.write_partial_report(rs, why)
    _end_with_report(rs, RunStatus.STOPPED, f"{why}; partial report: {path}", why, path)


def finish_cancelled(rs: RunState) -> None:
    """End after a cancel, leaving a partial report."""
    path = report.write_partial_report(rs, "Cancelled by the analyst")
    _end_with_report(
        rs, RunStatus.CANCELLED, f"Cancelled; partial report: {path}", "cancelled", path
    )


def _end_with_report(rs: RunState, status: RunStatus, message: str, why: str, path: str) -> None:
    _expire_pending_approvals(rs, why)
    if rs.outcome is None and rs.open_step is not None:
        # Close the step left open (a wait, or an effect never resumed) so that the
        # journal stays a sequence of closed records followed by the report. What it
        # had spent (a model call saves its spend as it streams) stays spent.
        left = rs.open_step
        rs.outcome = StepOutcome(
            left.seq, StepStatus.FAILED, None, why, usage=left.usage, cost_usd=left.cost_usd
        )
        rs.open_step = None
    record_completed(
        rs,
        StepKind.REPORT,
        "partial_report",
        {"reason": why},
        {"path": path, "report": report.partial_report_text(rs, why)},
        patch=RunPatch(
            status=status,
            finished_at=rs.clock.now() if status.is_terminal else None,
            status_message=message,
            clear_wait=True,
        ),
        applied=[(c.id, "ignored: the run ended") for c in rs.store.pending_commands(rs.run.id)]
        if status.is_terminal
        else [],
    )
    raise Finish(status)


def _expire_pending_approvals(rs: RunState, why: str) -> None:
    stale = [
        dataclasses.replace(
            a,
            state=ApprovalState.EXPIRED,
            decision_note=f"the run ended ({why})",
            decided_at=rs.clock.now(),
        )
        for a in rs.store.list_run_approvals(rs.run.id)
        if a.state == ApprovalState.PENDING
    ]
    if stale:
        commit(rs, approvals=stale)
