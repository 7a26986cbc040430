"""Which run controls apply to a run in its current status (mirrors the client's checks)."""

from __future__ import annotations

from enum import StrEnum

from desktop_agent.domain import Run, RunStatus, WaitReason
from desktop_agent.domain.agents import AgentKind


class Control(StrEnum):
    """A command the analyst can give a run."""

    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    CANCEL = "cancel"
    STOP = "stop"
    STEER = "steer"
    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    ANSWER = "answer"
    EXTEND_BUDGET = "extend_budget"
    RESOLVE = "resolve"


_WAKEABLE = frozenset({WaitReason.RATE_LIMIT, WaitReason.CREDENTIALS, WaitReason.TIMER})
_DECISIONS = frozenset({Control.APPROVE, Control.EDIT, Control.REJECT})


def allowed_controls(run: Run | None, pending_approvals: int = 0) -> frozenset[Control]:
    """The controls that make sense for ``run`` now (none without a run)."""
    if run is None:
        return frozenset()
    if run.spec.agent == AgentKind.CLAUDE_CODE:
        # A Claude Code session is only read: the one thing desktop-agent decides for it
        # is a tool call its hook asked about.
        decide = pending_approvals > 0 and run.status.is_active
        return _DECISIONS if decide else frozenset()
    status = run.status
    out: set[Control] = set()
    if status.is_active:
        out |= {Control.CANCEL, Control.STOP, Control.STEER, Control.EXTEND_BUDGET}
        if status not in (RunStatus.PAUSED, RunStatus.STOPPED):
            out.add(Control.PAUSE)
    if status == RunStatus.STOPPED:
        out.discard(Control.STOP)  # stopped already; resume continues it, cancel ends it
    if status in (RunStatus.PAUSED, RunStatus.STOPPED) or (
        status == RunStatus.WAITING and run.wait_reason in _WAKEABLE
    ):
        out.add(Control.RESUME)
    if status == RunStatus.FAILED:
        out.add(Control.RETRY)
    if pending_approvals > 0 and status.is_active:
        out |= {Control.APPROVE, Control.EDIT, Control.REJECT}
    if status == RunStatus.WAITING and run.wait_reason == WaitReason.HUMAN_INPUT:
        out.add(Control.ANSWER)
    if status == RunStatus.NEEDS_ATTENTION:
        out.add(Control.RESOLVE)
    return frozenset(out)
