"""Claude Code sessions as runs: imported from disk, and their approvals decided in the inbox.

:func:`import_claude_code` brings the sessions Claude Code keeps on disk into the journal
(``desktop-agent import claude-code``, and the app's worker when ``claude_code_watch`` is
on): a new session becomes a run, a grown one gets only what is new, an unchanged one
writes nothing. Nothing is written to Claude Code's files.

:func:`answer_hook` is ``desktop-agent hook claude-code``: Claude Code's ``PreToolUse``
hook. A call the analyst's rules let through is answered at once with nothing (Claude
Code's own permissions apply); a call they ask about becomes a pending approval of the
session's run, in the same rows as our own runs' approvals, so the inbox and its dialog
show it (tool, arguments, reason, rule) and take the decision. Nobody runs the engine for
a Claude Code session, so the hook process itself waits for the decision (reading the
decision's command row), applies it and answers Claude Code: allowed, with the edited
arguments if the analyst changed them, or denied with the analyst's reason. With no
decision before the deadline, the approval expires and the ``approval_default`` setting
answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from desktop_agent.agents import claude_code as cc
from desktop_agent.agents.claude_code_hooks import Rule, decision_of, hook_output, rule_for
from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalState,
    Command,
    StepKind,
    Usage,
)
from desktop_agent.domain.errors import DesktopAgentError, InvalidInputError
from desktop_agent.llm.pricing import model_info
from desktop_agent.persistence.imported_sessions import ImportedSessions
from desktop_agent.procs import process_alive

if TYPE_CHECKING:
    from desktop_agent.client.api import Client

DEFAULT_WAIT_S = 600.0
"""How long the hook waits for the analyst by default: Claude Code's own default timeout
of a command hook is ten minutes too (``--install`` writes the hook's timeout a little
longer than the wait)."""

POLL_S = 0.25
"""How often the waiting hook reads the database."""

Progress = Callable[[int, int, "cc.FoundSession"], None]


def price(model: str, usage: Usage, one_hour: int, at: float) -> float:
    """Dollars of one response at the prices of its day (``llm/pricing.py``)."""
    day = datetime.fromtimestamp(at, UTC).date().isoformat()
    return model_info(model, on=day).cost(usage, cache_write_1h_tokens=one_hour)


def _journal(client: Client) -> ImportedSessions:
    return ImportedSessions(client._store.db)


# --------------------------------------------------------------------------- importing


@dataclass(frozen=True)
class ImportSummary:
    """What one ``import claude-code`` did.

    Attributes:
        folder: Claude Code's projects folder that was read.
        sessions: what happened to each session found.
        failed: sessions that could not be imported, with why.
    """

    folder: Path
    sessions: tuple[cc.Imported, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()

    def count(self, outcome: str) -> int:
        """How many sessions had ``outcome`` (``new``, ``grown``, ``unchanged``)."""
        return sum(1 for s in self.sessions if s.outcome == outcome)

    @property
    def steps_added(self) -> int:
        """Steps appended to journals, every session together."""
        return sum(s.steps_added for s in self.sessions)

    @property
    def steps_completed(self) -> int:
        """Open steps that got their outcome."""
        return sum(s.steps_completed for s in self.sessions)


def import_claude_code(
    client: Client,
    project: Path | None = None,
    since: float | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import the sessions of one project folder, or of every project, changed since ``since``.

    A session that cannot be read is reported in ``failed`` and the others go on.

    Raises:
        InvalidInputError: the SDK is missing, or the sessions folder or ``project`` is not
            there (the message says what to do).
    """
    found = cc.find_sessions(project.expanduser().absolute() if project else None, since)
    journal = _journal(client)
    done: list[cc.Imported] = []
    failed: list[tuple[str, str]] = []
    for i, session in enumerate(found):
        if progress is not None:
            progress(i, len(found), session)
        try:
            done.append(cc.import_session(session, journal, price))
        except (DesktopAgentError, OSError, ValueError) as exc:
            failed.append((session.session_id, str(exc) or type(exc).__name__))
    expire_orphaned_approvals(client)
    return ImportSummary(cc.projects_folder(), tuple(done), tuple(failed))


# --------------------------------------------------------------------------- the hook


@dataclass(frozen=True)
class HookCall:
    """One ``PreToolUse`` call as Claude Code hands it to the hook.

    Attributes:
        session_id: Claude Code's session.
        transcript_path: its transcript.
        cwd: the folder Claude Code works in.
        tool: the tool's name.
        arguments: the call's ``tool_input``.
        tool_use_id: the call's id.
        agent_type: the subagent making the call ("" for the main conversation).
    """

    session_id: str
    transcript_path: str
    cwd: str
    tool: str
    arguments: dict[str, Any]
    tool_use_id: str
    agent_type: str = ""


def parse_hook_call(text: str) -> HookCall:
    """Read the hook's standard input.

    Raises:
        InvalidInputError: it is not the JSON of a ``PreToolUse`` call.
    """
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidInputError("the hook's input is not JSON (Claude Code sends JSON)") from None
    if not isinstance(data, dict):
        raise InvalidInputError("the hook's input is not a JSON object")
    event = data.get("hook_event_name")
    if event != "PreToolUse":
        raise InvalidInputError(
            f"this hook answers PreToolUse calls, not {event!r}: configure it under PreToolUse"
        )
    session_id = str(data.get("session_id") or "")
    if not session_id:
        raise InvalidInputError("the hook's input names no session_id")
    arguments = data.get("tool_input")
    return HookCall(
        session_id=session_id,
        transcript_path=str(data.get("transcript_path") or ""),
        cwd=str(data.get("cwd") or ""),
        tool=str(data.get("tool_name") or ""),
        arguments=arguments if isinstance(arguments, dict) else {},
        tool_use_id=str(data.get("tool_use_id") or ""),
        agent_type=str(data.get("agent_type") or ""),
    )


def hook_rule(settings: Any, call: HookCall, policies: Mapping[str, str]) -> Rule:
    """What the analyst's rules say of the call (no database, no SDK: the hook's fast path)."""
    return rule_for(
        call.tool,
        call.arguments,
        policies=policies,
        ask_unsafe=bool(settings.ask_unsafe),
        ask_overwrite=bool(settings.ask_overwrite),
        cwd=Path(call.cwd) if call.cwd else None,
    )


@dataclass
class HookClock:
    """Time and sleep of the waiting hook (tests make them fast)."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = POLL_S


@dataclass
class _Waiting:
    client: Client
    approval: Approval
    journal: ImportedSessions
    clock: HookClock = field(default_factory=HookClock)


def answer_hook(
    client: Client,
    call: HookCall,
    policies: Mapping[str, str] | None = None,
    *,
    wait_s: float = DEFAULT_WAIT_S,
    clock: HookClock | None = None,
) -> dict[str, Any] | None:
    """The hook's answer to Claude Code: None (nothing to say), or its decision's JSON.

    Blocks while the analyst decides (at most ``wait_s``). Interrupted (Claude Code ends
    the hook), the approval expires saying so and the interruption goes on.
    """
    rule = hook_rule(client.settings, call, policies or {})
    if rule.action == "none":
        return None
    if rule.action == "deny":
        return hook_output("deny", rule.why)
    clock = clock or HookClock()
    expire_orphaned_approvals(client, now=clock.now())
    run_id = ensure_session_run(client, call)
    approval = _ask(client, call, run_id, rule, wait_s, clock.now())
    return _wait(_Waiting(client, approval, _journal(client), clock))


def ensure_session_run(client: Client, call: HookCall) -> str:
    """Import (or bring up to date) the call's session; its run's id.

    Without the SDK, or before the transcript exists, the run is made from what the hook
    knows (a later import fills it in).
    """
    journal = _journal(client)
    try:
        found = cc.find_session(call.session_id)
        if found is not None:
            return cc.import_session(found, journal, price).run_id
    except InvalidInputError:
        pass  # no SDK: the run is made below
    run_id = cc.session_run_id(journal, call.session_id)
    existing, _steps, _cursor = journal.known(run_id)
    if existing is None:
        journal.save(_bare_plan(call, run_id), 0)
    return run_id


def _bare_plan(call: HookCall, run_id: str) -> cc.ImportPlan:
    now = time.time()
    folder = Path(call.transcript_path).parent if call.transcript_path else Path()
    session = cc.FoundSession(
        session_id=call.session_id,
        path=Path(call.transcript_path) if call.transcript_path else folder,
        cwd=call.cwd,
        title="",
        summary="",
        first_prompt="",
        created_at=now,
        modified_at=now,
    )
    read = cc.SessionRead(session, (), (), now)
    return cc.plan_import(read, run_id=run_id, existing=None, steps=(), files={}, price=price)


def _ask(
    client: Client, call: HookCall, run_id: str, rule: Rule, wait_s: float, now: float
) -> Approval:
    settings = client.settings
    who = f" ({call.agent_type} subagent)" if call.agent_type else ""
    approval = Approval(
        id="",
        run_id=run_id,
        seq=0,
        tool=call.tool,
        arguments=call.arguments,
        reason=_stated_reason(client, run_id),
        rule=rule.why,
        deadline=now + wait_s,
        default_action=settings.approval_default,
        created_at=now,
    )
    request: dict[str, JSON] = {
        "tool_use_id": call.tool_use_id,
        "name": call.tool,
        "arguments": call.arguments,
        "rule": rule.why,
    }
    me = psutil.Process()
    hook: dict[str, JSON] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": me.create_time(),
        "deadline": now + wait_s,
    }
    message = f"Claude Code asks to run {call.tool}{who}: approve or reject it (the session waits)"
    return _journal(client).open_approval(approval, request, hook, message)


def _stated_reason(client: Client, run_id: str) -> str:
    """What the model said before the call (the last response's text), for the dialog."""
    try:
        steps = client.steps(run_id, max(1, client.run(run_id).last_seq - 5))
    except DesktopAgentError:
        return ""
    for step in reversed(steps):
        out = step.output if isinstance(step.output, dict) else {}
        texts = [
            str(b.get("text", ""))
            for b in out.get("content") or []
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        if step.kind == StepKind.MODEL_CALL and any(t.strip() for t in texts):
            return "\n".join(t for t in texts if t.strip())[:2000]
    return ""


def _wait(w: _Waiting) -> dict[str, Any]:
    approval, journal, clock = w.approval, w.journal, w.clock
    deadline = approval.deadline or clock.now() + DEFAULT_WAIT_S
    try:
        while True:
            state, command = journal.decision(approval)
            if command is not None:
                answer = _apply(w, command)
                if answer is not None:
                    return answer
            elif state != ApprovalState.PENDING:
                return _answer_of(w.client, approval.id)
            if clock.now() >= deadline:
                return _expire(w, "no decision before the deadline")
            clock.sleep(clock.poll_s)
    except BaseException:
        _close_expired(w, "Claude Code stopped waiting before a decision (the hook was ended)")
        raise


def _apply(w: _Waiting, command: Command) -> dict[str, Any] | None:
    """Apply the analyst's decision and answer; None when it was refused (keep waiting)."""
    approval, journal = w.approval, w.journal
    decided = decision_of(command, approval)
    if decided.refused:  # left pending: the refusal is the command's result
        journal.refuse_command(command.id, f"refused: {decided.refused}; {approval.id} pending")
        return None
    journal.decide(approval, decided.state, decided.arguments, decided.note, command)
    return _answer_of(w.client, approval.id)  # as applied here, or by a worker first


def _expire(w: _Waiting, why: str) -> dict[str, Any]:
    approval = w.approval
    approved = approval.default_action == "approve"
    note = f"{why}; the default action ({'approve' if approved else 'reject'}) was applied"
    # Decided meanwhile, or expired here: the row says which.
    w.journal.close_approval(
        approval,
        ApprovalState.EXPIRED,
        arguments=approval.arguments,
        note=note,
        label="expired_approved" if approved else "expired_rejected",
    )
    return _answer_of(w.client, approval.id)


def _close_expired(w: _Waiting, why: str) -> None:
    # When the database is gone too, the next import or hook cleans up.
    with contextlib.suppress(DesktopAgentError):
        w.journal.close_approval(
            w.approval,
            ApprovalState.EXPIRED,
            arguments=w.approval.arguments,
            note=why,
            label="expired_rejected",
        )


def _answer_of(client: Client, approval_id: str) -> dict[str, Any]:
    """The answer a decided approval gives Claude Code (whoever applied the decision)."""
    decided = client._store.get_approval(approval_id)
    note = decided.decision_note
    if decided.state in (ApprovalState.APPROVED, ApprovalState.EDITED):
        edited = decided.decided_arguments if decided.state == ApprovalState.EDITED else None
        said = " with edited arguments" if edited is not None else ""
        return hook_output(
            "allow", f"Approved in desktop-agent{said}" + (f": {note}" if note else ""), edited
        )
    if decided.state == ApprovalState.EXPIRED:
        if decided.default_action == "approve":
            return hook_output("allow", f"desktop-agent: {note}")
        return hook_output("deny", f"desktop-agent: {note}")
    why = note or "the analyst rejected this call in desktop-agent"
    return hook_output("deny", f"Rejected in desktop-agent: {why}")


def expire_orphaned_approvals(client: Client, now: float | None = None) -> int:
    """Close the approvals whose hook is gone (killed before it could); how many.

    A hook on this machine whose process has ended, or any hook past its deadline by a
    minute, waits no more: its approval expires (the call it asked about was decided by
    Claude Code meanwhile, or never made).
    """
    now = time.time() if now is None else now
    journal = _journal(client)
    host = socket.gethostname()
    closed = 0
    for approval, hook in journal.waiting_approvals(cc.RUN_PREFIX):
        info = hook if isinstance(hook, dict) else {}
        deadline = float(info.get("deadline") or approval.deadline or 0)
        gone = info.get("host") == host and not process_alive(
            int(info.get("pid") or 0), float(info.get("started") or 0)
        )
        if gone or (deadline and now > deadline + 60):
            journal.close_approval(
                approval,
                ApprovalState.EXPIRED,
                arguments=approval.arguments,
                note="the Claude Code hook that asked ended before a decision",
                label="expired_rejected",
            )
            closed += 1
    return closed
