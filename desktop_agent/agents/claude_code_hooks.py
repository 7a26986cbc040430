"""Claude Code's approvals under the analyst's rules, and what never runs a Claude Code run.

Claude Code runs a ``PreToolUse`` hook before each tool call: a command it gives the call
as JSON on standard input (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_use_id``), whose standard output
may decide it (``hookSpecificOutput``: ``permissionDecision`` ``allow``, ``deny`` or
``ask``, a ``permissionDecisionReason``, and ``updatedInput`` to run the call with other
arguments). No output leaves the call to Claude Code's own permissions. (The contract of
the Claude Agent SDK's ``PreToolUseHookInput`` and ``PreToolUseHookSpecificOutput``.)

:func:`rule_for` says whether the analyst's rules, the ones our own runs follow, ask about a
call: a per-tool policy (``ask``: always; ``never``: the tool is disabled), then the
settings ``ask_unsafe`` (Bash, MCP tools and any tool not known to be harmless act on the
outside world) and ``ask_overwrite`` (Write over a file with different content, an Edit of
an existing file). :func:`hook_output` is the answer Claude Code reads.

:class:`ReadOnlySession` is the worker's driver for ``claude-code`` runs: it never executes
one. A decision on an approval is applied as the waiting hook would apply it (whichever of
the two reads it first); a command sent to such a run by mistake (a note, a pause, a
cancel) is applied as declined, and a run that was queued (a "run again" of an import) is
parked saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from desktop_agent.agents.claude_code import RUN_PREFIX, WRITE_TOOLS, effect_of
from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalPolicy,
    ApprovalState,
    Command,
    CommandKind,
    EffectClass,
    Run,
    RunStatus,
)
from desktop_agent.engine.edits import shape_problem
from desktop_agent.engine.ports import (
    CancelToken,
    JournalStore,
    LeaseGuard,
    RunPatch,
    ToolContext,
    ToolResult,
)

Decision = Literal["allow", "deny", "ask"]

DECLINED = (
    "declined: Claude Code drives this session; desktop-agent only shows it "
    "(and decides the approvals it asks for)"
)


@dataclass(frozen=True)
class Rule:
    """What the analyst's rules say of one call.

    Attributes:
        action: ``none`` (nothing to ask: Claude Code's own permissions apply), ``ask``
            (the analyst decides) or ``deny`` (the tool is disabled).
        why: the rule, in words (shown with the approval, or given to Claude).
    """

    action: Literal["none", "ask", "deny"]
    why: str = ""


def rule_for(
    tool: str,
    arguments: Mapping[str, Any],
    *,
    policies: Mapping[str, str],
    ask_unsafe: bool,
    ask_overwrite: bool,
    cwd: Path | None = None,
) -> Rule:
    """Whether the analyst must decide a Claude Code call (our runs' rules, see the module).

    Args:
        tool: Claude Code's name of the tool.
        arguments: the call's ``tool_input``.
        policies: per-tool policy (``always``, ``ask``, ``never``) by tool name.
        ask_unsafe: the ``ask_unsafe`` setting.
        ask_overwrite: the ``ask_overwrite`` setting.
        cwd: the session's folder (relative paths are under it).
    """
    policy = policies.get(tool, ApprovalPolicy.ALWAYS)
    if policy == ApprovalPolicy.NEVER:
        return Rule("deny", f"{tool} is disabled by the analyst's policy")
    if policy == ApprovalPolicy.ASK:
        return Rule("ask", f"the policy for {tool} is to ask")
    if effect_of(tool) == EffectClass.UNSAFE and ask_unsafe:
        return Rule("ask", f"{tool} acts on the outside world and cannot be undone")
    if tool in WRITE_TOOLS and ask_overwrite:
        why = _overwrite(tool, arguments, cwd)
        if why:
            return Rule("ask", why)
    return Rule("none")


def _overwrite(tool: str, arguments: Mapping[str, Any], cwd: Path | None) -> str:
    """Why a write replaces something already there ("" when it does not)."""
    raw = arguments.get("file_path") or arguments.get("notebook_path")
    if not isinstance(raw, str) or not raw:
        return ""
    path = Path(raw).expanduser()
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    if not path.is_file():
        return ""
    size = path.stat().st_size
    if tool == "Write":
        try:
            same = path.read_text(encoding="utf-8") == arguments.get("content")
        except (OSError, UnicodeDecodeError):
            same = False
        return "" if same else f"would overwrite {raw} ({size} bytes)"
    return f"would change {raw} ({size} bytes)"


def hook_output(decision: Decision, reason: str, updated_input: JSON = None) -> dict[str, Any]:
    """The JSON a ``PreToolUse`` hook prints to decide a call."""
    out: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    }
    if decision == "allow" and isinstance(updated_input, dict):
        out["updatedInput"] = updated_input
    return {"hookSpecificOutput": out}


_SCHEMAS: dict[str, dict[str, JSON]] = {
    "Bash": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
            "timeout": {"type": "number"},
            "run_in_background": {"type": "boolean"},
        },
        "required": ["command"],
    },
    "Write": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"],
    },
    "Edit": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        "required": ["file_path", "old_string", "new_string"],
    },
}
"""The arguments of Claude Code's most asked-about tools (Claude Code checks the rest)."""


@dataclass(frozen=True)
class ClaudeCodeTool:
    """A Claude Code tool as the approval dialog and the edit check see it (never run here).

    An edited call is checked for its shape and, for Bash, Write and Edit, their fields;
    Claude Code checks the call itself before it runs it.
    """

    name: str

    @property
    def version(self) -> str:
        """Claude Code's, not ours."""
        return "claude-code"

    @property
    def description(self) -> str:
        """What the dialog says of it."""
        return f"Claude Code's {self.name} tool"

    @property
    def input_schema(self) -> Mapping[str, JSON]:
        """Its arguments, where known."""
        return _SCHEMAS.get(self.name, {"type": "object"})

    @property
    def effect(self) -> EffectClass:
        """As :func:`effect_of` says."""
        return effect_of(self.name)

    @property
    def approval(self) -> ApprovalPolicy:
        """The default policy (the rules decide)."""
        return ApprovalPolicy.ALWAYS

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Never: Claude Code runs its tools."""
        return ToolResult(f"{self.name} runs in Claude Code, not here", is_error=True)

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Nothing beyond the rules."""
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Nothing to check here: Claude Code checks the call."""
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """Unknown."""
        return None


def approval_tool(run_id: str, tool: str) -> ClaudeCodeTool | None:
    """The Claude Code tool an approval of a Claude Code session asks about (else None)."""
    return ClaudeCodeTool(tool) if run_id.startswith(RUN_PREFIX) else None


@dataclass(frozen=True)
class Decided:
    """An analyst's decision on a Claude Code call, as the approval records it.

    Attributes:
        state: approved, edited or rejected.
        arguments: the arguments the call runs with (the edited ones for an edit).
        note: the analyst's reason.
        refused: why the decision cannot apply ("" when it can): an edit that is no
            JSON object of arguments (the approval stays pending).
    """

    state: ApprovalState
    arguments: JSON
    note: str
    refused: str = ""


def decision_of(command: Command, approval: Approval) -> Decided:
    """What an approve or reject command decides of ``approval`` (the engine's reading)."""
    payload = command.payload if isinstance(command.payload, dict) else {}
    note = str(payload.get("reason", ""))
    if command.kind == CommandKind.REJECT:
        return Decided(ApprovalState.REJECTED, approval.arguments, note)
    if "arguments" in payload:
        edited = payload["arguments"]
        problem = shape_problem(edited)
        if problem:
            return Decided(ApprovalState.PENDING, approval.arguments, note, problem)
        return Decided(ApprovalState.EDITED, edited, note)
    return Decided(ApprovalState.APPROVED, approval.arguments, note)


Decide = Callable[[Approval, ApprovalState, JSON, str, Command], bool]
"""Applies a decision while the approval is pending (False: it no longer was)."""


class ReadOnlySession:
    """The worker's driver of ``claude-code`` runs: never executes one.

    A decision on a pending approval is applied (as the hook waiting for it would: the
    first of the two to read it does, through ``decide``); every other command is applied
    as declined; a run that was queued (a "run again" of an import) is parked saying why.

    Args:
        store: the journal (the worker's, fenced by the lease it is given).
        decide: applies a decision (``ImportedSessions.decide``).
    """

    def __init__(self, store: JournalStore, decide: Decide) -> None:
        self.store = store
        self.decide = decide

    def execute(self, run: Run, cancel: CancelToken, lease: LeaseGuard | None) -> RunStatus:
        """Apply the run's decisions, decline its other commands, park it if it was queued."""
        applied = []
        for command in self.store.pending_commands(run.id):
            if command.kind not in (CommandKind.APPROVE, CommandKind.REJECT):
                applied.append((command.id, DECLINED))
                continue
            payload = command.payload if isinstance(command.payload, dict) else {}
            approval_id = str(payload.get("approval_id", ""))
            approval = next(
                (a for a in self.store.list_run_approvals(run.id) if a.id == approval_id), None
            )
            if approval is None or approval.state != ApprovalState.PENDING:
                applied.append((command.id, f"ignored: approval {approval_id} is not pending"))
                continue
            decided = decision_of(command, approval)
            if decided.refused:
                applied.append((command.id, f"refused: {decided.refused}; {approval_id} pending"))
            elif not self.decide(approval, decided.state, decided.arguments, decided.note, command):
                applied.append((command.id, f"ignored: approval {approval_id} is not pending"))
        status = self.store.get_run(run.id).status
        patch = None
        if status in (RunStatus.QUEUED, RunStatus.RUNNING):
            status = RunStatus.NEEDS_ATTENTION
            patch = RunPatch(
                status=status,
                status_message=(
                    "a Claude Code session is read-only here: continue it in Claude Code "
                    f"(claude --resume {run.spec.session_id})"
                ),
            )
        if applied or patch is not None:
            self.store.commit(
                run.id,
                applied_commands=applied,
                patch=patch,
                lease=lease.lease if lease is not None else None,
            )
        return status
