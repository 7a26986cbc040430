"""Tool uses: approvals, the engine's own tools, execution, and recovery of tool steps.

Every function takes the activation's :class:`~desktop_agent.engine.run_state.RunState`.
The engine's own tools are defined in :mod:`desktop_agent.engine.request` (with what the
model is sent) and named here too, where the rest of the app has always found them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from typing import Any

from desktop_agent.domain import (
    JSON,
    AgentSpec,
    Approval,
    ApprovalPolicy,
    ApprovalState,
    Command,
    CommandKind,
    EffectClass,
    Resolution,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.errors import LeaseLost, RunCancelled, plain_error, storage_problem
from desktop_agent.engine import fencing, sanitize
from desktop_agent.engine.builtin_tools import CONTROL_TOOLS, SERVER_TOOLS
from desktop_agent.engine.commands import boundary
from desktop_agent.engine.ports import (
    RunPatch,
    StepIntent,
    StepOutcome,
    Tool,
    ToolContext,
    ToolInputError,
    ToolProvider,
    ToolResult,
)
from desktop_agent.engine.recording import (
    close_step,
    commit,
    finish_step,
    mark_running,
    needs_attention,
    open_wait,
    record_completed,
    start_step,
)
from desktop_agent.engine.run_state import RunState
from desktop_agent.engine.waits import resume_question, resume_sleep, resume_wait

log = logging.getLogger(__name__)

MAX_WAIT_S = 10 * 366 * 86400.0
"""Longest wait the ``wait`` tool accepts."""

_DECIDED = RunPatch(status=RunStatus.RUNNING, clear_attention=True, status_message="")
"""The run goes on after the analyst decided about a step in doubt."""


def current_definition(run: Run, tools: ToolProvider) -> AgentSpec:
    """The run's definition with the installed tools' versions (dropping missing tools)."""
    updated = []
    for name, version in run.spec.tools:
        if name in CONTROL_TOOLS or name in SERVER_TOOLS:
            updated.append((name, version))
            continue
        tool = tools.get(name)
        if tool is not None:
            updated.append((name, tool.version))
    return dataclasses.replace(run.spec, tools=tuple(updated))


def definition_problem(run: Run, tools: ToolProvider) -> str | None:
    """Why the run's recorded agent definition no longer matches the installed tools."""
    problems = []
    for name, version in run.spec.tools:
        if name in CONTROL_TOOLS or name in SERVER_TOOLS:
            continue
        tool = tools.get(name)
        if tool is None:
            problems.append(f"tool {name!r} is no longer installed")
        elif tool.version != version:
            problems.append(f"tool {name!r} changed from version {version} to {tool.version}")
    if not problems:
        return None
    return (
        "The agent definition changed since this run started ("
        + "; ".join(problems)
        + "). Accept the new definition to continue, or cancel."
    )


# --------------------------------------------------------------------------- tool uses


def _tool_context(
    rs: RunState, seq: int, attempt: int = 1, timeout_s: float | None = None
) -> ToolContext:
    """The context of a tool call; with ``timeout_s``, of the call that performs the effect.

    Only the effect's context carries the lease check for its point of no return (which
    renews the lease for ``timeout_s`` more) and the fencing token.
    """
    ctx = ToolContext(
        run_id=rs.run.id,
        seq=seq,
        idempotency_key=f"{rs.run.id}:{seq}",
        workspace=rs.workspace,
        clock=rs.clock,
        cancel=rs.cancel,
        settings=rs.cfg.settings,
        attempt=attempt,
    )
    if timeout_s is None:
        return ctx
    return dataclasses.replace(
        ctx, check_lease=rs.lease_check(timeout_s), fencing_token=rs.fencing_token
    )


def _timeout_of(rs: RunState, tool: Tool, args: Mapping[str, JSON], ctx: ToolContext) -> float:
    """How long the tool's effect may take: its own ``timeout_s()``, or the engine's default.

    A tool without the method, or whose answer is unusable, gets the default.
    """
    default = rs.cfg.effect_timeout_s
    own = getattr(tool, "timeout_s", None)
    if not callable(own):
        return default
    try:
        value = own(args, ctx)
    except Exception:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value) if 0 < value < math.inf else default


def _policy(rs: RunState, tool: Tool) -> ApprovalPolicy:
    for name, policy in rs.run.spec.approval_overrides:
        if name == tool.name:
            return ApprovalPolicy(policy)
    return tool.approval


def _approval_rule(rs: RunState, tool: Tool, args: Mapping[str, JSON]) -> str | None:
    """Why this call must be approved, or None."""
    policy = _policy(rs, tool)
    if policy == ApprovalPolicy.NEVER:
        return None
    try:
        reason = tool.approval_reason(args, _tool_context(rs, rs.next_seq))
    except ToolInputError:
        # Malformed: it will not run, and the model reads why at once; no one to bother.
        return None
    except Exception as exc:  # a tool that cannot check a call gets a human look at it
        log.warning("%s could not check a call", tool.name, exc_info=True)
        why = plain_error(exc, empty="")
        reason = f"{tool.name} could not check this call" + (
            f": {why}" if why else " (its check gave no reason)"
        )
    if policy == ApprovalPolicy.ASK:
        return f"the policy for {tool.name} is to ask"
    settings = rs.cfg.settings
    if tool.effect == EffectClass.UNSAFE and settings.ask_unsafe:
        return f"{tool.name} acts on the outside world and cannot be undone"
    if settings.ask_overwrite:
        return reason
    return None


def _effect_of(tool: Tool, args: Mapping[str, JSON], ctx: ToolContext) -> EffectClass:
    """The effect class of one call: a tool may refine its own with ``effect_of()``.

    An endpoint that honours idempotency keys makes an otherwise unsafe POST idempotent.
    A refinement that fails keeps the class the tool declares.
    """
    refine = getattr(tool, "effect_of", None)
    if not callable(refine):
        return tool.effect
    try:
        return EffectClass(refine(args, ctx))
    except Exception:
        return tool.effect


def next_tool_use(rs: RunState) -> None:
    """Answer the first pending tool use, asking for approvals first where needed."""
    conv = rs.state.conversation
    requests = []
    for use in conv.pending:
        if use["id"] in conv.decisions or use["name"] in CONTROL_TOOLS:
            continue
        tool = rs.tools.get(use["name"])
        if tool is None or use["name"] not in rs.run.spec.tool_names:
            continue
        raw = use.get("input")
        args: dict[str, JSON] = raw if isinstance(raw, dict) else {}
        rule = _approval_rule(rs, tool, args)
        if rule:
            requests.append((use, rule))
    if requests:
        open_approvals(rs, requests)
        return
    execute_tool_use(rs, conv.pending[0], None, 1)


def _stated_reason(rs: RunState) -> str:
    """The text the model wrote alongside its tool calls: its stated reason."""
    msgs = rs.state.conversation.messages
    if not msgs or msgs[-1]["role"] != "assistant":
        return ""
    return "\n".join(
        str(b.get("text", "")) for b in msgs[-1]["content"] if b.get("type") == "text"
    ).strip()


def open_approvals(rs: RunState, requests: list[tuple[dict[str, Any], str]]) -> None:
    """Record one approval step for the calls that need it, and hibernate."""
    seq = rs.next_seq
    now = rs.clock.now()
    deadline_s = rs.cfg.settings.approval_deadline_s
    deadline = now + deadline_s if deadline_s is not None else None
    default = rs.cfg.settings.approval_default
    reason = _stated_reason(rs)
    records = []
    items = []
    for i, (use, rule) in enumerate(requests, start=1):
        approval_id = f"{rs.run.id}.{seq}.{i}"
        records.append(
            Approval(
                id=approval_id,
                run_id=rs.run.id,
                seq=seq,
                tool=str(use["name"]),
                arguments=use.get("input"),
                reason=reason,
                rule=rule,
                deadline=deadline,
                default_action=default,
                created_at=now,
            )
        )
        items.append(
            {
                "tool_use_id": use["id"],
                "name": use["name"],
                "arguments": use.get("input"),
                "approval_id": approval_id,
                "rule": rule,
            }
        )
    names = ", ".join(str(u["name"]) for u, _ in requests)
    step = open_wait(
        rs,
        StepIntent(seq=seq, kind=StepKind.APPROVAL, name="approval", input={"requests": items}),
        approvals=records,
        patch=RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.APPROVAL,
            wake_at=deadline,
            status_message=f"Waiting for approval: {names}",
        ),
    )
    # Decisions may already be waiting as commands: look before hibernating.
    boundary(rs, step)
    resume_wait(rs, step)


def _decided_args(rs: RunState, use: Mapping[str, Any]) -> tuple[JSON, bool]:
    """The arguments to run a tool use with, and whether the analyst decided it.

    An edited decision runs its own arguments only: if they are missing, nothing runs
    (the call gets an error result) rather than the call the analyst replaced.
    """
    decision = rs.state.conversation.decisions.get(str(use["id"]))
    if decision is None:
        return use.get("input"), False
    if decision.get("state") == ApprovalState.EDITED:
        return decision.get("arguments"), True
    return decision.get("arguments", use.get("input")), True


def _control_tool(rs: RunState, use: Mapping[str, Any], args: JSON) -> None:
    seq = rs.next_seq
    name = str(use["name"])
    args = args if isinstance(args, dict) else {}
    base = {"tool_use_id": use["id"], "arguments": args}
    if name == "update_plan":
        items = args.get("items")
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("text"), str) for i in items
        ):
            result = ToolResult("invalid arguments: items must be a list of {text, done}", True)
            plan: list[dict[str, JSON]] = rs.state.scalars.plan
        else:
            plan = [{"text": str(i["text"]), "done": bool(i.get("done"))} for i in items]
            done = sum(1 for i in plan if i["done"])
            result = ToolResult(f"Plan saved ({done}/{len(plan)} done).", data={"plan": plan})
        record_completed(
            rs,
            StepKind.TOOL_CALL,
            name,
            base,
            {"content": result.content, "is_error": result.is_error, "data": result.data},
            effect=EffectClass.READ_ONLY,
        )
        return
    if name == "wait":
        now = rs.clock.now()
        until = args.get("until")
        seconds = args.get("seconds")
        if isinstance(until, int | float) and not isinstance(until, bool):
            wake = float(until)
        elif isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
            wake = now + float(seconds)
        else:
            _immediate_result(rs, use, "invalid arguments: give seconds or until", True)
            return
        if not math.isfinite(wake) or wake >= now + MAX_WAIT_S:
            # inf, nan or centuries away: no clock or calendar can hold it
            _immediate_result(rs, use, "invalid arguments: a wait must end within 10 years", True)
            return
        step = open_wait(
            rs,
            StepIntent(
                seq=seq, kind=StepKind.SLEEP, name=name, input={**base, "until": wake, "from": now}
            ),
        )
        resume_sleep(rs, step)
        return
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        _immediate_result(rs, use, "invalid arguments: question must be a non-empty string", True)
        return
    step = open_wait(
        rs,
        StepIntent(
            seq=seq, kind=StepKind.QUESTION, name=name, input={**base, "question": question}
        ),
        patch=RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.HUMAN_INPUT,
            status_message=f"Question for you: {question}"[:300],
        ),
    )
    resume_question(rs, step)


def _immediate_result(rs: RunState, use: Mapping[str, Any], text: str, is_error: bool) -> None:
    """Answer a tool use without any effect (unknown tool, refused, invalid)."""
    record_completed(
        rs,
        StepKind.TOOL_CALL,
        str(use["name"]),
        {"tool_use_id": use["id"], "arguments": use.get("input")},
        {"content": text, "is_error": is_error},
    )


def execute_tool_use(
    rs: RunState, use: Mapping[str, Any], open_seq: int | None, attempt: int
) -> None:
    """Intent, effect and outcome of one tool call."""
    name = str(use["name"])
    args, decided = _decided_args(rs, use)
    if name in CONTROL_TOOLS and name in rs.run.spec.tool_names:
        _control_tool(rs, use, args)
        return
    tool = rs.tools.get(name)
    if tool is None or name not in rs.run.spec.tool_names:
        _immediate_result(rs, use, f"unknown tool {name!r}: it is not available to this run", True)
        return
    if _policy(rs, tool) == ApprovalPolicy.NEVER and not decided:
        _immediate_result(rs, use, f"{name} is disabled by the analyst's policy", True)
        return
    if not isinstance(args, dict):
        _immediate_result(rs, use, "invalid arguments: expected a JSON object", True)
        return
    if sanitize.too_deep(args):
        why = f"invalid arguments: nested deeper than {sanitize.MAX_ARG_DEPTH} levels"
        _immediate_result(rs, use, why, True)
        return
    seq = open_seq if open_seq is not None else rs.next_seq
    timeout = _timeout_of(rs, tool, args, _tool_context(rs, seq, attempt))
    ctx = _tool_context(rs, seq, attempt, timeout)
    input_ = {"tool_use_id": use["id"], "arguments": args}
    if decided and open_seq is None:
        try:
            problem = tool.validate(args, ctx)
        except ToolInputError as exc:
            problem = f"invalid arguments: {exc}"
        if problem:
            _immediate_result(
                rs, use, f"Not executed: the check before running failed: {problem}", True
            )
            return
    # Never start an effect on a lease about to expire: it must outlast the effect.
    rs.ensure_lease(timeout)
    if open_seq is None:
        effect = _effect_of(tool, args, ctx)
        start_step(
            rs, StepIntent(seq=seq, kind=StepKind.TOOL_CALL, name=name, input=input_, effect=effect)
        )
    try:
        result = run_tool(tool, args, ctx)
    except LeaseLost:
        # The tool's last check (ctx.check_lease) found the run taken: it did not act.
        fencing.report_abandoned(rs, seq, name)
        raise
    finish_step(
        rs,
        seq,
        StepKind.TOOL_CALL,
        name,
        input_,
        StepOutcome(
            seq,
            StepStatus.COMPLETED,
            {"content": result.content, "is_error": result.is_error, "data": result.data},
        ),
    )


def run_tool(tool: Tool, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
    """Call a tool, turning its failures into error results the model can read."""
    try:
        result = tool.run(args, ctx)
    except RunCancelled:
        raise
    except ToolInputError as exc:
        return ToolResult(f"invalid arguments for {tool.name}: {exc}", is_error=True)
    except Exception as exc:  # a tool's bug must not kill the run
        log.warning("tool %s failed", tool.name, exc_info=True)  # the class, for debugging
        why = plain_error(exc, empty="")
        text = f"{tool.name} failed: {why}" if why else f"{tool.name} failed without saying why"
        return ToolResult(sanitize.clean_text(text), is_error=True)
    result = sanitize.clean_result(result)
    if len(result.content) > 200_000:
        cut = result.content[:200_000]
        return ToolResult(cut + "\n[... output truncated at 200,000 characters]", result.is_error)
    return result


def recover_tool_call(rs: RunState, step: Step) -> None:
    """A tool call was in flight when the last activation died: repeat it or ask."""
    use = {"id": (step.input or {}).get("tool_use_id"), "name": step.name}
    args = (step.input or {}).get("arguments", {})
    use["input"] = args
    resolution = None
    for cmd in rs.store.pending_commands(rs.run.id):
        if cmd.kind == CommandKind.RESOLVE:
            resolution = cmd
            break
    # An idempotent effect is repeated, unless the analyst was asked about it (after a
    # restore, see engine/restored.py) and has answered.
    if step.effect != EffectClass.UNSAFE and resolution is None and not _held(rs, step):
        attempt = rs.store.restart_step(rs.run.id, step.seq, salvaged=None)
        mark_running(rs)
        _rerun(rs, step, use, args, attempt)
        return
    if resolution is None:
        # Asked already (after a crash, or a restore): the reason given then stands.
        needs_attention(
            rs,
            rs.run.status_message
            if _held(rs, step) and rs.run.status_message
            else _doubt_message(rs, step),
            step.seq,
        )
        return
    _resolve_in_doubt(rs, step, use, args, resolution)


def _doubt_message(rs: RunState, step: Step) -> str:
    """Why the effect of ``step`` may or may not have happened, and what the analyst can do."""
    choices = "Probe it, mark it done, retry it with the same idempotency key, or skip it."
    lost = rs.storage_resume
    if lost is not None and lost.get("seq") == step.seq:
        # The worker saw the effect end; storage failed as its outcome was written.
        problem = storage_problem(str(lost.get("problem", "")))
        return (
            f"Step {step.seq} ({step.name}) ran, but {problem} when its outcome was to be "
            "recorded: whether it happened is unknown, and it cannot be safely repeated. " + choices
        )
    return (
        f"Step {step.seq} ({step.name}) was in flight when the worker stopped, and its "
        "effect cannot be safely repeated: it may or may not have happened. " + choices
    )


def _held(rs: RunState, step: Step) -> bool:
    """Whether the run waits for the analyst's decision about ``step``."""
    return rs.run.status == RunStatus.NEEDS_ATTENTION and rs.run.attention_seq == step.seq


def _rerun(rs: RunState, step: Step, use: Mapping[str, Any], args: JSON, attempt: int) -> None:
    tool = rs.tools.get(step.name)
    if tool is None:
        why = f"tool {step.name!r} is no longer installed"
        close_step(rs, step, StepOutcome(step.seq, StepStatus.FAILED, None, why))
        return
    execute_tool_use(rs, use, step.seq, attempt)


def _resolve_in_doubt(
    rs: RunState, step: Step, use: Mapping[str, Any], args: JSON, cmd: Command
) -> None:
    action = Resolution(str((cmd.payload or {}).get("action", "skip")))
    tool = rs.tools.get(step.name)
    ctx = _tool_context(rs, step.seq)
    if action == Resolution.PROBE:
        happened = None
        if tool is not None and isinstance(args, dict):
            try:
                happened = tool.probe(args, ctx)
            except Exception as exc:  # a failing probe tells nothing
                happened = None
                note = f"probe failed: {exc}"
            else:
                note = ""
        if happened is None:
            commit(rs, applied=[(cmd.id, "probe could not tell")])
            needs_attention(
                rs,
                f"Step {step.seq} ({step.name}): the probe could not tell whether the effect "
                f"happened{': ' + note if note else ''}. Mark it done, retry, or skip.",
                step.seq,
            )
            return
        if not happened:
            _retry_in_doubt(rs, step, use, args, cmd, "probe: not done; retrying")
            return
        content = "The effect had already happened (confirmed by probing the target)."
        _close_in_doubt(rs, step, cmd, content, False, "probe: already done")
    elif action == Resolution.MARK_DONE:
        content = "The analyst confirmed this effect had already happened."
        _close_in_doubt(rs, step, cmd, content, False, "marked done")
    elif action == Resolution.SKIP:
        content = (
            "Skipped by the analyst after a crash: the effect may or may not have happened. "
            "Do not assume it did."
        )
        _close_in_doubt(rs, step, cmd, content, True, "skipped")
    else:
        _retry_in_doubt(rs, step, use, args, cmd, "retrying with the same idempotency key")


def _retry_in_doubt(
    rs: RunState, step: Step, use: Mapping[str, Any], args: JSON, cmd: Command, result: str
) -> None:
    """Do the effect of ``step`` again, with the same idempotency key, as the analyst chose."""
    commit(rs, applied=[(cmd.id, result)], patch=_DECIDED)
    attempt = rs.store.restart_step(rs.run.id, step.seq, salvaged=None)
    _rerun(rs, step, use, args, attempt)


def _close_in_doubt(
    rs: RunState, step: Step, cmd: Command, content: str, is_error: bool, result: str
) -> None:
    output = {"content": content, "is_error": is_error, "resolved": result}
    close_step(rs, step, StepOutcome(step.seq, StepStatus.COMPLETED, output))
    commit(rs, applied=[(cmd.id, result)], patch=_DECIDED)
