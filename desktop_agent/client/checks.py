"""Checks for the desktop app: arguments against the tool, and what a crash left behind.

A tool's own validation of (edited) arguments before an approval; runs interrupted by a
worker that died, and runs that need attention, after a crash.

Plain Python, called off the GUI thread.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from desktop_agent.agents.claude_code_hooks import approval_tool
from desktop_agent.client.api import WORKER_STALE_S, Client
from desktop_agent.domain import JSON, Approval, ApprovalState, Run, RunStatus, StepKind, WorkerInfo
from desktop_agent.engine.edits import edit_problem, shape_problem
from desktop_agent.persistence.identity import vanish_notice
from desktop_agent.procs import process_alive

__all__ = [
    "CheckResult",
    "RecoveryItem",
    "RecoveryReport",
    "check_arguments",
    "final_check",
    "recovery_report",
    "shape_problem",
]

# --------------------------------------------------------------------------- approvals


@dataclass(frozen=True)
class CheckResult:
    """The outcome of a tool's check of some arguments.

    Attributes:
        ok: True passed, False failed, None could not be checked here.
        message: what the check said.
    """

    ok: bool | None
    message: str


def check_arguments(client: Client, approval: Approval, arguments: JSON) -> CheckResult:
    """Run the checks an edit must pass on ``arguments`` now (read-only; schema included).

    The same check (:func:`~desktop_agent.engine.edits.edit_problem`) decides whether
    :meth:`Client.approve` records an edit, and the worker runs the tool's check again right
    before the approved call; this preview lets the analyst see a problem before deciding.
    """
    tool = approval_tool(approval.run_id, approval.tool) or client._tools.get(approval.tool)
    if tool is None:
        return CheckResult(None, f"{approval.tool} cannot be checked here")
    ctx = client.tool_context(approval)
    if ctx is None:
        return CheckResult(None, f"run {approval.run_id} is not in the database any more")
    problem = edit_problem(tool, arguments, ctx)
    if problem:
        return CheckResult(False, problem)
    return CheckResult(True, "the arguments pass the tool's checks")


def final_check(client: Client, approval: Approval) -> CheckResult | None:
    """What the worker's last check before the approved call said, once it ran."""
    if approval.state in (ApprovalState.PENDING, ApprovalState.REJECTED, ApprovalState.EXPIRED):
        return None
    steps = client.steps(approval.run_id, approval.seq + 1, limit=50)
    approval_step = client.step(approval.run_id, approval.seq)
    use_id = next(
        (
            r.get("tool_use_id")
            for r in (approval_step.input or {}).get("requests", [])
            if r.get("approval_id") == approval.id
        ),
        None,
    )
    for step in steps:
        if step.kind != StepKind.TOOL_CALL or (step.input or {}).get("tool_use_id") != use_id:
            continue
        content = str((step.output or {}).get("content", ""))
        if content.startswith("Not executed: the check before running failed"):
            return CheckResult(False, content)
        return CheckResult(True, f"passed; the call ran as step {step.seq}")
    return None


# --------------------------------------------------------------------------- recovery


@dataclass(frozen=True)
class RecoveryItem:
    """A run the analyst should hear about after a crash.

    Attributes:
        run: the run as found at start.
        interrupted: its worker died while holding it (it is resumed by the next worker).
        why: what happened, in a sentence.
    """

    run: Run
    interrupted: bool
    why: str


@dataclass(frozen=True)
class RecoveryReport:
    """What the app found at start: dead workers, interrupted runs, runs needing you.

    ``vanished``: the note of a worker that stopped because the database file was deleted
    or replaced under it ("" when none; see ``persistence/identity.py``).
    """

    dead_workers: tuple[WorkerInfo, ...]
    items: tuple[RecoveryItem, ...]
    vanished: str = ""

    @property
    def empty(self) -> bool:
        """Nothing to report."""
        return not self.items


def recovery_report(client: Client, *, now: float | None = None) -> RecoveryReport:
    """Runs interrupted by a worker that died, and runs that need attention."""
    now = time.time() if now is None else now
    host = socket.gethostname()
    dead: list[WorkerInfo] = []
    live: set[str] = set()
    for info, started in client._store.list_workers():
        gone = (info.host == host and not process_alive(info.pid, started)) or (
            now - info.heartbeat_at > 2 * WORKER_STALE_S
        )
        if gone:
            dead.append(info)
        else:
            live.add(info.id)
    by_id = {w.id: w for w in dead}
    active = client._store.list_runs([s for s in RunStatus if s.is_active], limit=100_000)
    items = []
    for run in active:
        owner = run.lease_owner
        if owner is not None and owner not in live:
            worker = by_id.get(owner)
            who = f"worker pid {worker.pid}" if worker else "a worker that is gone"
            why = f"{who} stopped while it held this run; the next worker resumes it"
            if run.status == RunStatus.NEEDS_ATTENTION and run.status_message:
                why += f". Needs attention: {run.status_message}"
            items.append(RecoveryItem(run, True, why))
        elif run.status == RunStatus.NEEDS_ATTENTION:
            items.append(RecoveryItem(run, False, run.status_message or "needs attention"))
    vanished = vanish_notice(client.db_path.parent) or ""
    return RecoveryReport(tuple(dead), tuple(items), vanished)
