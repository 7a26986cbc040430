"""The driver of runs on the Claude Agent SDK (``agent``: ``agent-sdk``).

Registered in :mod:`desktop_agent.worker.agents`. A worker claims such a run like any
other (lease, fencing) and hands it here. One activation is one connection of the SDK's
``ClaudeSDKClient`` (in the pool thread, under ``anyio.run``), in a fresh
``CLAUDE_CONFIG_DIR``: the session lives in the journal's database
(:class:`~desktop_agent.persistence.sdk_sessions.JournalSessionStore`, every transcript
line mirrored at once), so any worker resumes it, after a crash too. The session's id goes
into the run's spec as soon as the SDK names it.

Without an API key (or another credential of the CLI's) the run waits for one, as our own
runs do, before any session starts.

The activation works on the engine's :class:`~desktop_agent.engine.run_state.RunState` and
writes through the engine's recording helpers, so the journal has the shapes of our own
runs (the timeline, search, usage, export and compare read it alike) and every write is
fenced by the lease:

* each assistant message is a ``model_call`` step (intent at its first block, outcome with
  its usage, priced by :mod:`desktop_agent.llm.pricing`, when the next message arrives);
  each tool result a ``tool_call`` step; a sub-agent's own messages are not steps;
* the ``PreToolUse`` hook applies the analyst's rules (:mod:`desktop_agent.agents.sdk_policy`):
  allowed calls run (after the lease is confirmed); one that needs approval is deferred:
  the session stops with it, the driver opens an ``approval`` step and its ``approvals``
  rows as ``engine/control.py`` does (the inbox and its dialog show tool, arguments and
  reason), and the run waits holding no thread. The decision is a command the engine's
  ``boundary`` applies; the next activation resumes the session, which runs the call again
  and the hook answers it: allowed (with the edited arguments), or denied with the
  analyst's reason, which the model reads;
* before an approved call runs again, its ``tool_call`` intent is written, and its outcome
  only once the call's result is in the session store: a worker killed meanwhile leaves
  the step open, and the next one looks in the stored transcript. A result there closes
  the step (the call is not run twice); none leaves a call that acts on the world *in
  doubt*: the run needs the analyst (``resolve``: retry, skip or mark done), as an unsafe
  effect of our own runs does. The Claude Code CLI dies with a killed worker (on Linux,
  ``agents/sdk_session.py`` ``guarded_cli``): no turn goes on unrecorded;
* budgets: after each model call, and every ``watch_s`` while the session works, the run's
  budget is checked (``engine/budget.py`` ``exceeded``: dollars, time, steps, tokens); at
  the limit the session is interrupted and the run waits on a ``budget`` step, so *extend*
  resumes it. A pause, stop, cancel or note interrupts the session the same way; a note is
  the resumed session's next message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop_agent.agents.sdk_policy import Decision, SdkTools, decide, effect_of
from desktop_agent.config import Settings
from desktop_agent.domain import (
    JSON,
    Approval,
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
from desktop_agent.domain.errors import (
    DesktopAgentError,
    KnownError,
    LeaseLost,
    NondeterminismError,
    RunCancelled,
)
from desktop_agent.engine import budget as budgets
from desktop_agent.engine.commands import boundary
from desktop_agent.engine.endings import finish_cancelled, finish_completed, finish_stopped
from desktop_agent.engine.fencing import FencedJournal
from desktop_agent.engine.loop import restore_state
from desktop_agent.engine.ports import (
    CancelToken,
    Clock,
    JournalStore,
    LeaseGuard,
    ModelPort,
    RunPatch,
    StepIntent,
    StepOutcome,
    SystemClock,
)
from desktop_agent.engine.recording import (
    close_step,
    close_wait,
    commit,
    finish_step,
    needs_attention,
    open_wait,
    record_completed,
    start_step,
    suspend,
)
from desktop_agent.engine.run_state import EngineConfig, Finish, RunState, Suspend
from desktop_agent.engine.waits import resume_wait
from desktop_agent.persistence.sdk_sessions import JournalSessionStore
from desktop_agent.persistence.store import SqlStore

if TYPE_CHECKING:
    from desktop_agent.agents.sdk_session import Replay, Transcript

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'desktop-agent[agents]'"
"""How to get the Claude Agent SDK (an extra of the package)."""

MIRROR_WAIT_S = 10.0
"""How long the result of a replayed call may take to reach the session store."""

NO_KEY = "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY"
"""Why an Agent SDK run cannot start its session (as our own runs say it)."""

OTHER_CREDENTIALS = (
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)
"""Variables that give the Claude Code CLI its credentials without an API key."""

INTERRUPT_GRACE_S = 30.0
"""How long an interrupted session has to end its turn before it is disconnected."""

_DECIDED = RunPatch(status=RunStatus.RUNNING, clear_attention=True, status_message="")
"""The run goes on after the analyst decided about a call in doubt."""

_INTERRUPTING = frozenset({CommandKind.PAUSE, CommandKind.STOP, CommandKind.CANCEL})
"""Commands that stop the session under way (a note too: it becomes its next message)."""


@dataclass(frozen=True)
class SdkConfig:
    """Tunables of the driver.

    Attributes:
        watch_s: how often a working session's budget, cancel and commands are looked at.
        effect_timeout_s: how long the lease must outlast a call the hook allows.
        scratch: where each connection's folder is made (None: the system's temp folder).
    """

    watch_s: float = 0.25
    effect_timeout_s: float = 120.0
    scratch: Path | None = None


def _no_model(model: str) -> ModelPort:
    raise KnownError(f"{model}: an Agent SDK run makes no model call of its own")


class AgentSdkDriver:
    """Moves Agent SDK runs forward (see the module); one object serves every run.

    Args:
        store: the journal.
        settings: the analyst's settings (approval rules, deadlines).
        clock: source of time.
        config: tunables.
        crash_hook: the crash tests' hook (``DESKTOP_AGENT_CRASH_AT``).
        api_key: where the Anthropic API key is read (None: the OS keyring's, through
            :mod:`desktop_agent.secrets`).
    """

    def __init__(
        self,
        store: SqlStore,
        settings: Settings,
        *,
        clock: Clock | None = None,
        config: SdkConfig | None = None,
        crash_hook: Callable[[str], None] | None = None,
        api_key: Callable[[], str | None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock or SystemClock()
        self.config = config or SdkConfig()
        self.engine = EngineConfig(
            settings=settings, crash_hook=crash_hook, effect_timeout_s=self.config.effect_timeout_s
        )
        self.sessions = JournalSessionStore(store.db)
        self.api_key = api_key or _keyring_key

    def execute(self, run: Run, cancel: CancelToken, lease: LeaseGuard | None) -> RunStatus:
        """One activation of ``run``: until the session ends, waits, or is interrupted."""
        journal: JournalStore = (
            self.store if lease is None else FencedJournal(self.store, lease.lease)
        )
        rs = RunState(
            run=run,
            store=journal,
            clock=self.clock,
            cfg=self.engine,
            cancel=cancel,
            tools=SdkTools(),
            model_for=_no_model,
            guard=lease,
        )
        _Activation(self, rs).go()
        return self.store.get_run(run.id).status


def _keyring_key() -> str | None:
    from desktop_agent.secrets import KeyStore

    return KeyStore().get()


@dataclass
class _Plan:
    """How the next connection starts.

    Attributes:
        resume: the session to resume (None: a new one).
        prompt: the message to send (None: the session runs a deferred call again).
        replay: the decision for that call.
    """

    resume: str | None
    prompt: str | None
    replay: Replay | None = None


@dataclass
class _Turn:
    """The assistant message being received: its step and what it holds so far."""

    seq: int
    message_id: str
    model: str
    input: dict[str, JSON]
    blocks: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    stop_reason: str | None = None


class _Activation:
    """One activation of an Agent SDK run (see the module)."""

    def __init__(self, driver: AgentSdkDriver, rs: RunState) -> None:
        self.driver = driver
        self.rs = rs
        self.turn: _Turn | None = None
        self.stopping: str | None = None
        self.failure: BaseException | None = None
        self.replay: Replay | None = None
        self.replay_call: tuple[int, dict[str, Any]] | None = None
        """The ``tool_call`` step (seq, input) the replayed call closes, if it runs."""
        self.deferred_rules: dict[str, str] = {}
        self.override: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ the loop

    def go(self) -> None:
        rs = self.rs
        if rs.run.status.is_terminal:
            cmds = rs.store.pending_commands(rs.run.id)
            if cmds:
                commit(rs, applied=[(c.id, "ignored: the run has ended") for c in cmds])
            return
        try:
            rs.state, rs.open_step = restore_state(rs.store, rs.run)
            if rs.run.status == RunStatus.QUEUED:
                now = rs.clock.now()
                commit(
                    rs, patch=RunPatch(status=RunStatus.RUNNING, started_at=now, clear_wait=True)
                )
            while True:
                boundary(rs, rs.open_step)
                step = rs.open_step
                if step is not None:
                    rs.open_step = (
                        step if step.kind in (StepKind.APPROVAL, StepKind.BUDGET) else None
                    )
                    self.resume_open(step)
                    rs.open_step = None
                    continue
                self.advance()
        except (Suspend, Finish):
            return
        except RunCancelled:
            with contextlib.suppress(Finish):
                finish_cancelled(rs)
        except NondeterminismError as exc:
            with contextlib.suppress(Suspend):
                needs_attention(rs, f"The journal does not match the session: {exc}", None)

    def advance(self) -> None:
        """Take the session one connection further."""
        rs = self.rs
        if rs.run.status != RunStatus.RUNNING:
            commit(rs, patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True))
        if rs.state.scalars.stopped:
            finish_stopped(rs, "Stopped at the analyst's request")
        if importlib.util.find_spec("claude_agent_sdk") is None:
            needs_attention(
                rs,
                "This worker cannot run Claude Agent SDK sessions: the SDK is not installed "
                f"({INSTALL_HINT}). Install it, or start a worker that has it, then resume.",
                None,
            )
        if not self.driver.api_key() and not any(os.environ.get(v) for v in OTHER_CREDENTIALS):
            suspend(
                rs,
                RunPatch(
                    status=RunStatus.WAITING,
                    wait_reason=WaitReason.CREDENTIALS,
                    status_message=f"{NO_KEY}; then resume the run",
                ),
            )
        limit = budgets.exceeded(rs)
        if limit:
            self.open_budget_wait(limit)
            return
        plan = self.plan()
        result = self.connect(plan)
        self.after(result)

    # ------------------------------------------------------------------ open steps

    def resume_open(self, step: Step) -> None:
        """Continue from a step the last activation left open."""
        rs = self.rs
        if step.kind == StepKind.APPROVAL:
            resume_wait(rs, step)
        elif step.kind == StepKind.BUDGET:
            self.resume_budget(step)
        elif step.kind == StepKind.MODEL_CALL:
            # The worker stopped while the model answered: the resumed session answers again.
            why = "the worker stopped while this answer came in; the session goes on"
            close_step(rs, step, StepOutcome(step.seq, StepStatus.FAILED, None, why))
            commit(rs)
        elif step.kind == StepKind.TOOL_CALL:
            self.recover_call(step)
        else:
            raise NondeterminismError(f"step {step.seq} of kind {step.kind} cannot be open")

    def recover_call(self, step: Step) -> None:
        """An approved call was run again when the last worker stopped: did it run?"""
        rs = self.rs
        tool_use_id = str((step.input or {}).get("tool_use_id"))
        done = self.transcript().results.get(tool_use_id)
        if done is not None:  # in the stored session: it ran, and is not run again
            self.close_call(step, done[0], done[1])
            return
        resolution = next(
            (c for c in rs.store.pending_commands(rs.run.id) if c.kind == CommandKind.RESOLVE),
            None,
        )
        if step.effect != EffectClass.UNSAFE and resolution is None:
            rs.store.restart_step(rs.run.id, step.seq, salvaged=None)
            self.replay_call = (step.seq, dict(step.input or {}))
            return
        if resolution is None:
            needs_attention(
                rs,
                f"Step {step.seq} ({step.name}) was running in the Agent SDK session when the "
                "worker stopped, and the session kept no result: it may or may not have "
                "happened, and it cannot be safely repeated. Retry it, skip it, or mark it "
                "done.",
                step.seq,
            )
            return
        payload = resolution.payload if isinstance(resolution.payload, dict) else {}
        action = str(payload.get("action", "skip"))
        if action == Resolution.RETRY:
            rs.store.restart_step(rs.run.id, step.seq, salvaged=None)
            commit(rs, applied=[(resolution.id, "retrying")], patch=_DECIDED)
            self.replay_call = (step.seq, dict(step.input or {}))
            return
        from desktop_agent.agents.sdk_session import deny

        if action == Resolution.MARK_DONE:
            text, error = "The analyst confirmed this call had already run.", False
        elif action == Resolution.SKIP:
            text = (
                "Skipped by the analyst after a crash: the call may or may not have run. "
                "Do not assume it did."
            )
            error = True
        else:
            commit(rs, applied=[(resolution.id, "the session cannot probe a call")])
            needs_attention(
                rs,
                f"Step {step.seq} ({step.name}): an Agent SDK call cannot be probed. "
                "Retry it, skip it, or mark it done.",
                step.seq,
            )
            return
        self.override[tool_use_id] = deny(text)
        self.close_call(step, text, error, applied=[(resolution.id, action)])

    def close_call(
        self, step: Step, text: str, error: bool, applied: list[tuple[int, str]] | None = None
    ) -> None:
        rs = self.rs
        output = {"content": text, "is_error": error}
        close_step(rs, step, StepOutcome(step.seq, StepStatus.COMPLETED, output))
        commit(rs, applied=applied or [], patch=_DECIDED if applied else None)

    # ------------------------------------------------------------------ budgets

    def open_budget_wait(self, limit: str) -> None:
        """Record a ``budget`` step (as ``engine/budget.py`` does) and wait for more."""
        rs = self.rs
        report = budgets.spend_report(rs, limit, 0.0)
        step = open_wait(
            rs,
            StepIntent(seq=rs.next_seq, kind=StepKind.BUDGET, name=limit, input=report),
            patch=RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.BUDGET,
                status_message=budgets.describe(report),
            ),
        )
        boundary(rs, step)
        self.resume_budget(step)

    def resume_budget(self, step: Step) -> None:
        """Go on once the budget was extended; else keep waiting."""
        rs = self.rs
        limit = budgets.exceeded(rs)
        if limit is None:
            close_wait(rs, step, {"action": "extend", "budget": rs.run.budget.to_json()})
            return
        report = budgets.spend_report(rs, limit, 0.0)
        suspend(
            rs,
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.BUDGET,
                status_message=budgets.describe(report),
            ),
        )

    # ------------------------------------------------------------------ plans

    def transcript(self) -> Transcript:
        from claude_agent_sdk import project_key_for_directory

        from desktop_agent.agents.sdk_session import Transcript

        sid = self.rs.run.spec.session_id
        if not sid:
            return Transcript()
        key = {"project_key": project_key_for_directory(self.rs.run.workspace), "session_id": sid}
        return Transcript.of(self.driver.sessions.entries_now(key))

    def plan(self) -> _Plan:
        """How the next connection starts (see :class:`_Plan`)."""
        from desktop_agent.agents.sdk_session import CONTINUE_PROMPT, Replay, allow, deny

        rs = self.rs
        sid = rs.run.spec.session_id
        conv = rs.state.conversation
        if not sid:
            self.settle_pending(None, {})
            return _Plan(None, rs.run.goal)
        transcript = self.transcript()
        waiting = transcript.waiting
        self.settle_pending(waiting, transcript.results)
        if waiting is not None and (waiting in conv.decisions or waiting in self.override):
            decision = conv.decisions.get(waiting, {})
            state = str(decision.get("state", ""))
            answer = self.override.get(waiting)
            if answer is None and state in ("rejected", "expired_rejected"):
                note = decision.get("note") or "no reason given"
                answer = deny(f"The analyst rejected this call. Reason: {note}")
            elif answer is None:
                args = decision.get("arguments")
                edited = state == "edited" and isinstance(args, dict)
                answer = allow(args if edited and isinstance(args, dict) else None)
                if self.replay_call is None:
                    self.replay_call = self.start_call(waiting, args)
            self.replay = Replay(waiting, answer)
            return _Plan(sid, None, self.replay)
        if waiting is not None and any(p["id"] == waiting for p in conv.pending):
            # Deferred, and the worker stopped before it asked: ask now.
            use = next(p for p in conv.pending if p["id"] == waiting)
            self.open_approval(use, "the analyst's rules ask for this call")
        notes = [
            str(b.get("text", ""))
            for b in conv.outbox
            if b.get("type") == "text" and str(b.get("text", "")).startswith("[Note")
        ]
        return _Plan(sid, "\n\n".join(notes) or CONTINUE_PROMPT)

    def start_call(self, tool_use_id: str, args: JSON) -> tuple[int, dict[str, Any]]:
        """Write the intent of an approved call before the session runs it again."""
        rs = self.rs
        use = next(p for p in rs.state.conversation.pending if p["id"] == tool_use_id)
        name = str(use["name"])
        seq = rs.next_seq
        input_: dict[str, Any] = {"tool_use_id": tool_use_id, "arguments": args}
        rs.ensure_lease(rs.cfg.effect_timeout_s)
        start_step(
            rs,
            StepIntent(
                seq=seq, kind=StepKind.TOOL_CALL, name=name, input=input_, effect=effect_of(name)
            ),
        )
        return seq, input_

    def settle_pending(self, waiting: str | None, results: dict[str, tuple[str, bool]]) -> None:
        """Answer the calls the journal has open with what the stored session says.

        A call that ran while the worker that saw it stopped has its result in the
        session; one without a result was interrupted (the session tells its model so).
        The deferred call waiting for its decision stays open.
        """
        rs = self.rs
        for use in list(rs.state.conversation.pending):
            tool_use_id = str(use["id"])
            if tool_use_id == waiting:
                continue
            text, error = results.get(
                tool_use_id, ("The call was interrupted before it returned a result.", True)
            )
            record_completed(
                rs,
                StepKind.TOOL_CALL,
                str(use["name"]),
                {"tool_use_id": tool_use_id, "arguments": use.get("input")},
                {"content": text, "is_error": error},
                effect=effect_of(str(use["name"])),
            )

    # ------------------------------------------------------------------ approvals

    def open_approval(self, use: dict[str, Any], rule: str) -> None:
        """Open an approval for a deferred call, as ``engine/control.py`` does, and wait."""
        rs = self.rs
        seq = rs.next_seq
        now = rs.clock.now()
        deadline_s = rs.cfg.settings.approval_deadline_s
        deadline = now + deadline_s if deadline_s is not None else None
        approval_id = f"{rs.run.id}.{seq}.1"
        record = Approval(
            id=approval_id,
            run_id=rs.run.id,
            seq=seq,
            tool=str(use["name"]),
            arguments=use.get("input"),
            reason=self.stated_reason(),
            rule=rule,
            deadline=deadline,
            default_action=rs.cfg.settings.approval_default,
            created_at=now,
        )
        item = {
            "tool_use_id": use["id"],
            "name": use["name"],
            "arguments": use.get("input"),
            "approval_id": approval_id,
            "rule": rule,
        }
        step = open_wait(
            rs,
            StepIntent(
                seq=seq, kind=StepKind.APPROVAL, name="approval", input={"requests": [item]}
            ),
            approvals=[record],
            patch=RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.APPROVAL,
                wake_at=deadline,
                status_message=f"Waiting for approval: {use['name']}",
            ),
        )
        boundary(rs, step)
        resume_wait(rs, step)
        rs.open_step = None

    def stated_reason(self) -> str:
        """What the model wrote alongside the call: its text, else its progress notes."""
        msgs = self.rs.state.conversation.messages
        if not msgs or msgs[-1]["role"] != "assistant":
            return ""
        content = msgs[-1]["content"]
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        if not any(t.strip() for t in texts):
            texts = [str(b.get("thinking", "")) for b in content if b.get("type") == "thinking"]
        return "\n".join(t for t in texts if t.strip()).strip()

    # ------------------------------------------------------------------ after a connection

    def after(self, result: Any) -> None:
        """What the connection's end means for the run."""
        rs = self.rs
        if self.failure is not None:
            raise self.failure
        deferred = getattr(result, "deferred_tool_use", None) if result is not None else None
        waiting = deferred.id if deferred is not None else None
        if rs.state.conversation.pending:
            transcript = self.transcript()
            self.settle_pending(waiting, transcript.results)
        conv = rs.state.conversation
        if result is not None and not getattr(result, "is_error", False) and conv.finished:
            finish_completed(rs)  # the final answer came before the interrupt did
        if self.stopping == "budget":
            self.open_budget_wait(budgets.exceeded(rs) or "cost")
            return
        if self.stopping in ("commands", "cancel"):
            rs.read_commands = True
            return  # the loop's boundary applies them
        if result is None:
            needs_attention(
                rs, "The Agent SDK session ended without a result; resume to retry", None
            )
            return
        if getattr(result, "stop_reason", None) == "tool_deferred" and deferred is not None:
            use = next((p for p in rs.state.conversation.pending if p["id"] == deferred.id), None)
            if use is None:
                raise NondeterminismError(f"the session deferred {deferred.id}, never asked for")
            rule = (
                self.deferred_rules.get(deferred.id)
                or self.rules(deferred.name, deferred.input).rule
            )
            self.open_approval(use, rule or "the analyst's rules ask for this call")
            return
        if getattr(result, "is_error", False):
            errors = "; ".join(getattr(result, "errors", None) or []) or str(
                getattr(result, "result", "") or getattr(result, "subtype", "error")
            )
            status = getattr(result, "api_error_status", None)
            if status == 401:
                suspend(
                    rs,
                    RunPatch(
                        status=RunStatus.WAITING,
                        wait_reason=WaitReason.CREDENTIALS,
                        status_message=f"The API refused the key: {errors}; set one and resume",
                    ),
                )
            needs_attention(
                rs, f"The Agent SDK session ended with an error: {errors}; resume to retry", None
            )
            return
        if rs.state.conversation.finished:
            finish_completed(rs)
        why = getattr(result, "stop_reason", None) or "no reason given"
        needs_attention(
            rs,
            f"The Agent SDK session stopped ({why}) before its final answer; resume to go on",
            None,
        )

    # ------------------------------------------------------------------ the connection

    def connect(self, plan: _Plan) -> Any:
        """One connection of the session, from ``plan`` to its result (None: none came)."""
        import anyio

        self.stopping = None
        self.failure = None
        base = self.driver.config.scratch
        folder = Path(tempfile.mkdtemp(prefix="desktop-agent-sdk-", dir=base))
        try:
            return anyio.run(self._connection, plan, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def _connection(self, plan: _Plan, folder: Path) -> Any:
        import anyio
        from claude_agent_sdk import ClaudeSDKClient

        from desktop_agent.agents.sdk_session import session_options

        rs = self.rs
        spec = rs.run.spec
        options = session_options(
            workspace=rs.run.workspace,
            model=spec.model,
            effort=spec.effort,
            system_prompt=spec.system_prompt,
            store=self.driver.sessions,
            resume=plan.resume,
            hook=self._pre_tool_use,
            folder=folder,
            api_key=self.driver.api_key(),
            replay=plan.replay,
            stderr=lambda line: log.debug("claude: %s", line),
        )
        result: Any = None
        async with ClaudeSDKClient(options) as client:
            if plan.prompt is not None:
                await client.query(plan.prompt)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, client, tg.cancel_scope)
                result = await self._receive(client)
                tg.cancel_scope.cancel()
        return result

    async def _receive(self, client: Any) -> Any:
        from claude_agent_sdk import ResultMessage

        async for message in client.receive_response():
            if self.replay_call is not None and self.replay is not None:
                await self._mirrored(message, self.replay.tool_use_id)
            try:
                self.on_message(message)
            except Exception as exc:  # a write failed (lease lost, storage): stop the session
                self.failure = exc
            if self.failure is not None:
                self.stopping = self.stopping or "failure"
                with contextlib.suppress(Exception):
                    await client.interrupt()
                return None
            if self.stopping == "budget-now":
                self.stopping = "budget"
                await client.interrupt()
            if isinstance(message, ResultMessage):
                return message
        return None

    async def _mirrored(self, message: object, tool_use_id: str) -> None:
        """Before the replayed call's outcome is written, its result is in the session store.

        The journal then never says "done" for a call the store could lose: a worker that
        stops after this finds the result there (:meth:`recover_call`). The SDK mirrors
        each transcript line in the background; this waits for it at most
        :data:`MIRROR_WAIT_S`.
        """
        import anyio
        import anyio.to_thread
        from claude_agent_sdk import UserMessage

        from desktop_agent.agents.sdk_session import tool_results

        if not isinstance(message, UserMessage):
            return
        if all(b.tool_use_id != tool_use_id for b in tool_results(message.content)):
            return
        with anyio.move_on_after(MIRROR_WAIT_S):
            while True:
                found = await anyio.to_thread.run_sync(self.transcript)
                if tool_use_id in found.results:
                    return
                await anyio.sleep(0.02)
        log.warning(
            "run %s: the session store has no result for %s yet", self.rs.run.id, tool_use_id
        )

    async def _watch(self, client: Any, scope: Any) -> None:
        import anyio

        while self.stopping is None:
            await anyio.sleep(self.driver.config.watch_s)
            try:
                why = self.stop_reason()
                if why is not None and self.stopping is None:
                    self.stopping = why
                    await client.interrupt()
            except Exception as exc:  # reading the commands failed, or the interrupt did
                self.failure = self.failure or exc
                self.stopping = self.stopping or "failure"
        await anyio.sleep(INTERRUPT_GRACE_S)
        scope.cancel()  # the session did not end its turn: disconnect it

    def stop_reason(self) -> str | None:
        """Why the session under way must stop now, if it must."""
        rs = self.rs
        if rs.cancel.cancelled:
            return "cancel"
        if rs.cancel.take_commands_hint():
            rs.read_commands = True
            kinds = {c.kind for c in rs.store.pending_commands(rs.run.id)}
            if kinds & _INTERRUPTING or CommandKind.STEER in kinds:
                return "commands"
        if budgets.exceeded(rs):
            return "budget"
        return None

    # ------------------------------------------------------------------ messages

    def on_message(self, message: object) -> None:
        """Write what one message of the session says (see the module)."""
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, UserMessage

        sid = message.session_id if isinstance(message, ResultMessage) else None
        if isinstance(message, SystemMessage):
            sid = message.data.get("session_id") if message.subtype == "init" else None
            if message.subtype == "mirror_error":
                log.warning(
                    "run %s: the session store missed lines: %s", self.rs.run.id, message.data
                )
        if isinstance(sid, str) and sid and sid != self.rs.run.spec.session_id:
            spec = dataclasses.replace(self.rs.run.spec, session_id=sid)
            commit(self.rs, patch=RunPatch(spec=spec.to_json()))
        if isinstance(message, AssistantMessage):
            # "<synthetic>": the CLI's own words (an error), no model call; its result says it.
            if message.parent_tool_use_id is None and message.model != "<synthetic>":
                self.on_assistant(message)
        elif isinstance(message, UserMessage):
            self.end_turn()
            if message.parent_tool_use_id is None:
                self.on_results(message.content)
        elif isinstance(message, ResultMessage):
            self.end_turn()

    def on_assistant(self, message: Any) -> None:
        from desktop_agent.agents.sdk_session import block_json

        rs = self.rs
        message_id = str(message.message_id or "")
        turn = self.turn
        if turn is None or turn.message_id != message_id or not message_id:
            self.end_turn()
            seq = rs.next_seq
            input_: dict[str, JSON] = {"model": message.model, "agent": "agent-sdk"}
            start_step(
                rs, StepIntent(seq=seq, kind=StepKind.MODEL_CALL, name=message.model, input=input_)
            )
            turn = self.turn = _Turn(seq, message_id, message.model, input_)
        turn.blocks.extend(b for b in map(block_json, message.content) if b is not None)
        if message.usage:
            turn.usage = message.usage
        if message.stop_reason:
            turn.stop_reason = message.stop_reason

    def end_turn(self) -> None:
        """Write the outcome of the assistant message received so far, with its price."""
        from desktop_agent.agents.sdk_session import usage_of
        from desktop_agent.llm.pricing import model_info, server_tool_cost

        rs = self.rs
        turn, self.turn = self.turn, None
        if turn is None:
            return
        usage, hour, servers = usage_of(turn.usage)
        cost = model_info(turn.model).cost(usage, cache_write_1h_tokens=hour)
        cost += server_tool_cost(servers)
        uses = any(b.get("type") == "tool_use" for b in turn.blocks)
        output: dict[str, JSON] = {
            "content": turn.blocks,
            "stop_reason": turn.stop_reason or ("tool_use" if uses else "end_turn"),
            "model": turn.model,
        }
        if turn.message_id:
            output["api"] = {"message_id": turn.message_id}
        finish_step(
            rs,
            turn.seq,
            StepKind.MODEL_CALL,
            turn.model,
            turn.input,
            StepOutcome(turn.seq, StepStatus.COMPLETED, output, usage=usage, cost_usd=cost),
        )
        commit(rs)
        if self.stopping is None and budgets.exceeded(rs):
            self.stopping = "budget-now"

    def on_results(self, content: object) -> None:
        from desktop_agent.agents.sdk_session import result_text, tool_results

        rs = self.rs
        pending = {str(p["id"]): p for p in rs.state.conversation.pending}
        for block in tool_results(content):
            tool_use_id = block.tool_use_id
            text, error = result_text(block.content), bool(block.is_error)
            use = pending.get(tool_use_id)
            if use is None:
                continue  # a call already answered in the journal (a rejection the model reads)
            output = {"content": text, "is_error": error}
            name = str(use["name"])
            replay = self.replay
            if self.replay_call is not None and replay and tool_use_id == replay.tool_use_id:
                (seq, input_), self.replay_call = self.replay_call, None
                outcome = StepOutcome(seq, StepStatus.COMPLETED, output)
                finish_step(rs, seq, StepKind.TOOL_CALL, name, input_, outcome)
                commit(rs)
                continue
            record_completed(
                rs,
                StepKind.TOOL_CALL,
                name,
                {"tool_use_id": tool_use_id, "arguments": use.get("input")},
                output,
                effect=effect_of(name),
            )

    # ------------------------------------------------------------------ the hook

    def rules(self, name: str, arguments: dict[str, Any]) -> Decision:
        """The analyst's rules for one call of the session."""
        rs = self.rs
        overrides = dict(rs.run.spec.approval_overrides)
        return decide(name, arguments, overrides, rs.cfg.settings, rs.workspace)

    async def _pre_tool_use(self, data: Any, tool_use_id: str | None, _context: Any) -> Any:
        """desktop-agent's ``PreToolUse`` hook: the analyst's rules for each call."""
        from desktop_agent.agents.sdk_session import allow, defer, deny, hook_output

        rs = self.rs
        call_id = str(data.get("tool_use_id") or tool_use_id or "")
        name = str(data.get("tool_name", ""))
        if self.replay is not None and call_id == self.replay.tool_use_id:
            return hook_output(self.replay.answer)
        if call_id in self.override:
            return hook_output(self.override[call_id])
        args = data.get("tool_input")
        decision = self.rules(name, args if isinstance(args, dict) else {})
        if decision.verdict == "deny":
            return hook_output(deny(decision.rule))
        if decision.verdict == "ask":
            if data.get("agent_id"):
                return hook_output(
                    deny(
                        f"{name} needs the analyst's approval ({decision.rule}), which a "
                        "sub-agent cannot wait for: make this call from the main agent"
                    )
                )
            self.deferred_rules[call_id] = decision.rule
            return hook_output(defer())
        try:
            if rs.guard is not None:
                rs.guard.confirm(rs.cfg.effect_timeout_s)
        except (LeaseLost, DesktopAgentError) as exc:
            self.failure = exc
            self.stopping = "lease"
            return hook_output(deny("this worker no longer holds the run; nothing was run"))
        return hook_output(allow())


def agent_sdk_driver(store: SqlStore, settings: Settings) -> AgentSdkDriver:
    """The driver a worker registers (see :mod:`desktop_agent.worker.agents`)."""
    from desktop_agent.worker.crash import crash_hook_from_env

    return AgentSdkDriver(store, settings, crash_hook=crash_hook_from_env())
