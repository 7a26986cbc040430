"""The run loop: one activation of a run, from its journal to its next wait or its end.

An activation restores the working state from the newest snapshot plus the journal, applies
the analyst's commands at each step boundary, and takes steps until the run finishes, waits,
pauses or needs attention. It never sleeps through a wait: it records the wake time and
returns, so a waiting run holds no thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalState,
    Command,
    CommandKind,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import (
    AuthenticationError,
    BadRequestError,
    ControlFlowInterrupt,
    LeaseLost,
    NondeterminismError,
    PermanentError,
    RateLimitedError,
    RunCancelled,
    StorageError,
    TransientError,
    UnrecordedOutcomeError,
)
from desktop_agent.engine import budget as budgets
from desktop_agent.engine import compaction, control, fencing, report, restored, sanitize, waits
from desktop_agent.engine.ports import (
    CancelToken,
    Clock,
    JournalStore,
    LeaseGuard,
    ModelPort,
    ModelRequest,
    ModelResponse,
    RunPatch,
    Snapshot,
    StepIntent,
    StepOutcome,
    ToolProvider,
)
from desktop_agent.engine.state import (
    CONTROL_WAIT_KINDS,
    AgentState,
    Conversation,
    Scalars,
    apply_conversation,
    apply_step,
    check_open_step,
)

log = logging.getLogger(__name__)

_NO_USAGE = Usage()

RESUMED_NOTE = (
    "The analyst stopped this run earlier (a partial report was written) and has now "
    "resumed it. Continue the work from where you left off."
)
"""The note a stopped run's conversation gets when it is resumed."""


@dataclass(frozen=True)
class EngineConfig:
    """Tunables of the run loop.

    Attributes:
        snapshot_every: steps between snapshots of the working state.
        partial_flush_s: how often streamed text is persisted while it streams.
        compaction_threshold: fraction of the context window that triggers compaction.
        keep_recent_messages: messages kept verbatim by a compaction.
        backoff_base_s: first wait after a transient API failure.
        backoff_cap_s: longest wait after repeated transient failures.
        crash_hook: test seam called with a named crash point (see ``tests/crash``).
        effect_timeout_s: how long a tool's effect may take when the tool does not say
            (``timeout_s``): the worker's lease must last that long before it starts.
    """

    snapshot_every: int = 25
    partial_flush_s: float = 0.25
    compaction_threshold: float = 0.8
    keep_recent_messages: int = 6
    backoff_base_s: float = 5.0
    backoff_cap_s: float = 600.0
    crash_hook: Callable[[str], None] | None = None
    settings: dict[str, JSON] = field(default_factory=dict)
    effect_timeout_s: float = 30.0


class Suspend(ControlFlowInterrupt):
    """Ends an activation: the run now waits, pauses, or needs the analyst."""


class Finish(ControlFlowInterrupt):
    """Ends an activation: the run reached a terminal status, or stopped."""


class RunExecutor:
    """Executes activations of runs against the engine's ports.

    Args:
        store: the journal.
        model_for: returns the model port for a model id.
        tools: looks tools up by name.
        clock: source of time.
        config: tunables.
    """

    def __init__(
        self,
        store: JournalStore,
        model_for: Callable[[str], ModelPort],
        tools: ToolProvider,
        clock: Clock,
        config: EngineConfig | None = None,
    ) -> None:
        self.store = store
        self.model_for = model_for
        self.tools = tools
        self.clock = clock
        self.config = config or EngineConfig()

    def execute(
        self, run_id: str, cancel: CancelToken | None = None, lease: LeaseGuard | None = None
    ) -> RunStatus:
        """Run one activation of ``run_id`` and return the run's status at its end.

        A worker passes the ``lease`` it claimed the run with: every write of the
        activation is then fenced by it, and :class:`LeaseLost` ends the activation (it
        propagates, with nothing written) once another worker has claimed the run.
        """
        run = self.store.get_run(run_id)
        activation = Activation(self, run, cancel or CancelToken(), lease)
        activation.go()
        return self.store.get_run(run_id).status


def restore_state(store: JournalStore, run: Run) -> tuple[AgentState, Step | None]:
    """Fold the journal of ``run`` into its working state.

    Returns:
        The state after every finished step, and the trailing step if it is still open.
    """
    snap = store.load_snapshot(run.id)
    scalars = Scalars.from_json(snap.state) if snap else Scalars()
    snap_seq = snap.seq if snap else 0
    conv = Conversation(goal=run.goal, summary=scalars.summary)
    state = AgentState(scalars, conv)
    open_step: Step | None = None
    for step in store.load_steps(run.id, from_seq=min(scalars.window_start_seq, snap_seq + 1)):
        if open_step is not None:
            raise NondeterminismError(
                f"step {open_step.seq} is still open but step {step.seq} follows it"
            )
        if step.status == StepStatus.STARTED:
            open_step = step
            state.scalars.last_seq = max(state.scalars.last_seq, step.seq)
            continue
        if step.seq <= snap_seq:
            apply_conversation(conv, step)
        else:
            apply_step(state, step)
    return state, open_step


class Activation:
    """One pass of a run through the loop; see the module docstring."""

    def __init__(
        self,
        executor: RunExecutor,
        run: Run,
        cancel: CancelToken,
        guard: LeaseGuard | None = None,
    ) -> None:
        self.x = executor
        self.guard = guard
        """The worker's lease on the run (None: unfenced, e.g. tests driving the engine)."""
        self.store: JournalStore = (
            executor.store if guard is None else fencing.FencedJournal(executor.store, guard.lease)
        )
        self.clock = executor.clock
        self.cfg = executor.config
        self.run = run
        self.cancel = cancel
        self.state = AgentState.initial(run.goal)
        self._outcome: StepOutcome | None = None
        self._effect: tuple[StepKind, str] | None = None
        """Kind and name of the effect whose outcome is buffered in ``_outcome``."""
        self._mark = self.clock.now()
        self.active_seconds = run.active_seconds
        """Time worked so far (the run's total plus what this activation added)."""
        self.workspace = Path(run.workspace)
        self._since_snapshot = 0
        self.open_step: Step | None = None
        self._read_commands = True  # the first boundary always reads the commands
        self._salvage: dict[int, tuple[Usage, float]] = {}
        self.storage_resume: dict[str, JSON] | None = None
        """Set by a resume after a storage pause whose failed commit held an effect's
        outcome (``seq``, ``problem``: the storage error's code): recovery says so."""
        self.saved_spend: dict[int, tuple[Usage, float]] = {}
        """What the current attempt of each model step had saved with its last save_partial
        (usage, dollars): on the step's row, counted in the run's totals from there."""

    # ------------------------------------------------------------------ plumbing

    @property
    def next_seq(self) -> int:
        """Sequence number of the next step."""
        return self.state.scalars.last_seq + 1

    def crash_point(self, name: str) -> None:
        """Give the crash tests a chance to kill the process here.

        Points: ``before_intent``, ``after_intent``, ``after_effect`` (outcome not yet
        written), ``after_outcome`` (just after the commit that wrote an outcome),
        ``before_snapshot``, ``after_snapshot`` and ``mid_stream``.
        """
        if self.cfg.crash_hook is not None:
            self.cfg.crash_hook(name)

    def commit(
        self,
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
        """
        now = self.clock.now()
        active = now - self._mark if self.run.status == RunStatus.RUNNING else 0.0
        self._mark = now
        active = max(0.0, active)
        outcome, self._outcome = self._outcome, None
        effect, self._effect = self._effect, None
        # The store adds the outcome's cost and tokens to the run's totals itself.
        if patch is None:
            patch = RunPatch(add_active_seconds=active)
        else:
            patch = dataclasses.replace(patch, add_active_seconds=patch.add_active_seconds + active)
        self.active_seconds += patch.add_active_seconds
        snapshot = None
        if outcome is not None:
            self._since_snapshot += 1
            if self._since_snapshot >= self.cfg.snapshot_every:
                snapshot = Snapshot(seq=outcome.seq, state=self._scalars_at(outcome.seq))
                self._since_snapshot = 0
        if snapshot is not None:
            self.crash_point("before_snapshot")
        try:
            self.store.commit(
                self.run.id,
                outcome=outcome,
                intents=intents,
                patch=patch,
                snapshot=snapshot,
                applied_commands=applied,
                approvals=approvals,
            )
        except LeaseLost:
            if outcome is not None and effect is not None:
                fencing.report_late_outcome(self, outcome, *effect)
            raise
        except StorageError as exc:
            if outcome is not None and effect is not None and effect[0] == StepKind.TOOL_CALL:
                # The tool acted; the journal will show its step started, not how it ended.
                raise UnrecordedOutcomeError(exc, outcome.seq) from exc
            raise
        if snapshot is not None:
            self.crash_point("after_snapshot")
        if outcome is not None:
            self.crash_point("after_outcome")
        if patch.status is not None or patch.budget is not None or patch.spec is not None:
            self.run = self.store.get_run(self.run.id)
        for intent in intents:
            if intent.status == StepStatus.STARTED:
                self.state.scalars.last_seq = max(self.state.scalars.last_seq, intent.seq)
            else:
                self._fold_local(intent.seq, intent.kind, intent.name, intent.input, intent)

    def _scalars_at(self, seq: int) -> dict[str, JSON]:
        data = self.state.scalars.to_json()
        data["last_seq"] = seq
        return data

    def _fold_local(
        self,
        seq: int,
        kind: StepKind,
        name: str,
        input_: JSON,
        intent: StepIntent | None = None,
        outcome: StepOutcome | None = None,
    ) -> None:
        """Fold a step we just wrote (or are about to) into the in-memory state."""
        now = self.clock.now()
        error: str | None = None
        usage, cost, spent, spent_usd = _NO_USAGE, 0.0, _NO_USAGE, 0.0
        if outcome is not None:
            status, output, error = outcome.status, outcome.output, outcome.error
            usage, cost = outcome.usage or _NO_USAGE, outcome.cost_usd
            spent, spent_usd = self._salvage.get(seq, (_NO_USAGE, 0.0))
        elif intent is not None:
            status, output = intent.status, intent.output
        else:
            status, output = StepStatus.STARTED, None
        step = Step(
            run_id=self.run.id,
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
        apply_step(self.state, step)

    def open_wait(
        self,
        intent: StepIntent,
        *,
        patch: RunPatch | None = None,
        approvals: Sequence[Approval] = (),
    ) -> Step:
        """Record a wait step (approval, sleep, question, budget) and hold it as the open step."""
        self.commit(intents=[intent], patch=patch, approvals=approvals)
        self.open_step = self.store.load_steps(self.run.id, from_seq=intent.seq)[0]
        return self.open_step

    def finish_step(
        self, seq: int, kind: StepKind, name: str, input_: JSON, outcome: StepOutcome
    ) -> None:
        """Buffer the outcome of an effect; it is written with the next commit."""
        self.crash_point("after_effect")
        self._outcome = outcome
        self._effect = (kind, name)
        self._fold_local(seq, kind, name, input_, outcome=outcome)

    def ensure_lease(self, seconds: float) -> None:
        """Before an effect that may take ``seconds``: the lease must last that long.

        Raises:
            LeaseLost: another worker has claimed the run.
        """
        if self.guard is not None:
            self.guard.ensure(seconds)

    def lease_check(self, seconds: float) -> Callable[[], None]:
        """The check an effect makes at its point of no return (see ``ToolContext``)."""
        guard = self.guard
        if guard is None:
            return lambda: None
        return lambda: guard.confirm(seconds)

    @property
    def fencing_token(self) -> int | None:
        """The epoch of the worker's claim of the run (None: unfenced)."""
        return self.guard.lease.epoch if self.guard is not None else None

    def suspend(self, patch: RunPatch, **kw: Any) -> None:
        """Commit ``patch`` and end the activation."""
        self.commit(patch=patch, **kw)
        raise Suspend(patch.status)

    # ------------------------------------------------------------------ main loop

    def go(self) -> None:
        """Run until the next wait, pause or end."""
        if self.run.status.is_terminal and not self._has_retry():
            self._ignore_commands("the run has ended")
            return
        try:
            self.state, self.open_step = restore_state(self.store, self.run)
            self._start()
            while True:
                self.boundary(self.open_step)
                if self.open_step is not None:
                    step, self.open_step = self.open_step, None
                    self.open_step = step if step.kind in CONTROL_WAIT_KINDS else None
                    self.resume_open(step)
                    self.open_step = None
                    continue
                self.advance()
        except (Suspend, Finish):
            return
        except RunCancelled:
            with contextlib.suppress(Finish):
                self.finish_cancelled()
        except NondeterminismError as exc:
            with contextlib.suppress(Suspend):
                self._needs_attention(f"The journal does not match the agent: {exc}", None)

    def _has_retry(self) -> bool:
        return self.run.status == RunStatus.FAILED and any(
            c.kind == CommandKind.RESUME for c in self.store.pending_commands(self.run.id)
        )

    def _ignore_commands(self, why: str) -> None:
        cmds = self.store.pending_commands(self.run.id)
        if cmds:
            self.commit(applied=[(c.id, f"ignored: {why}") for c in cmds])

    def _start(self) -> None:
        now = self.clock.now()
        if self.run.status == RunStatus.QUEUED:
            self.commit(patch=RunPatch(status=RunStatus.RUNNING, started_at=now, clear_wait=True))
        elif self.run.status == RunStatus.RUNNING:
            self._mark = now
        problem = control.definition_problem(self.run, self.x.tools)
        if problem and not self._definition_accepted():
            resolves = [
                (c.id, "ignored: accept the new agent definition, or cancel")
                for c in self.store.pending_commands(self.run.id)
                if c.kind == CommandKind.RESOLVE
            ]
            self.commit(applied=resolves)
            self._needs_attention(problem, None)

    def _definition_accepted(self) -> bool:
        for cmd in self.store.pending_commands(self.run.id):
            if cmd.kind == CommandKind.RESOLVE and (cmd.payload or {}).get("action") == "accept":
                spec = control.current_definition(self.run, self.x.tools)
                self.commit(
                    applied=[(cmd.id, "accepted the changed agent definition")],
                    patch=RunPatch(
                        status=RunStatus.RUNNING,
                        spec=spec.to_json(),
                        clear_attention=True,
                        status_message="",
                    ),
                )
                return True
        return False

    def _needs_attention(self, message: str, seq: int | None) -> None:
        self.suspend(
            RunPatch(
                status=RunStatus.NEEDS_ATTENTION,
                status_message=message,
                attention_seq=seq,
                clear_wait=True,
            )
        )

    # ------------------------------------------------------------------ boundary

    def boundary(self, open_step: Step | None) -> None:
        """Apply the analyst's commands; may pause, cancel or stop the run."""
        if self.cancel.cancelled:
            raise RunCancelled("cancelled")
        first, self._read_commands = self._read_commands, False
        hinted = self.cancel.take_commands_hint()
        cmds = self.store.pending_commands(self.run.id) if first or hinted else []
        for cmd in cmds:
            self.apply_command(cmd, open_step=open_step)
        if self.run.status in (RunStatus.PAUSED, RunStatus.STOPPED):
            # A stopped run woken by a command that does not resume it (a budget
            # extension) stays stopped, as a paused one stays paused.
            raise Suspend(self.run.status)
        if open_step is None and self.run.status == RunStatus.NEEDS_ATTENTION:
            raise Suspend(self.run.status)
        if open_step is None and self.run.status == RunStatus.WAITING:
            # Woken early (e.g. to apply a note): keep waiting until the wake time.
            if self.run.wait_reason == WaitReason.CREDENTIALS:
                raise Suspend(self.run.status)
            if self.run.wake_at is not None and self.clock.now() < self.run.wake_at:
                raise Suspend(self.run.status)

    def apply_command(self, cmd: Command, *, open_step: Step | None) -> None:
        """Apply one command row (or leave it for the open step it must wait for)."""
        kind = cmd.kind
        status = self.run.status
        if kind == CommandKind.CANCEL:
            self.commit(applied=[(cmd.id, "cancelled")])
            raise RunCancelled("cancelled by the analyst")
        if kind == CommandKind.PAUSE:
            if status.is_terminal or status in (RunStatus.PAUSED, RunStatus.STOPPED):
                self.commit(applied=[(cmd.id, f"ignored: run is {status}")])
            else:
                self.commit(
                    applied=[(cmd.id, "paused")],
                    patch=RunPatch(status=RunStatus.PAUSED, status_message="Paused by the analyst"),
                )
        elif kind == CommandKind.RESUME:
            if status == RunStatus.STOPPED:
                self._resume_stopped(cmd)
            elif status in (RunStatus.PAUSED, RunStatus.FAILED, RunStatus.WAITING):
                self.commit(
                    applied=[(cmd.id, "resumed")],
                    patch=RunPatch(status=RunStatus.RUNNING, status_message="", clear_wait=True),
                )
                payload = cmd.payload if isinstance(cmd.payload, dict) else {}
                lost = payload.get("storage")  # the worker's resume after a storage pause
                if isinstance(lost, dict):
                    self.storage_resume = lost
            elif status == RunStatus.NEEDS_ATTENTION and self.run.attention_seq is None:
                # Parked after an internal or storage error: try again.
                self.commit(
                    applied=[(cmd.id, "retrying")],
                    patch=RunPatch(status=RunStatus.RUNNING, status_message="", clear_wait=True),
                )
            elif status == RunStatus.NEEDS_ATTENTION:
                self.commit(
                    applied=[(cmd.id, "ignored: decide about the step in doubt with resolve")]
                )
            else:
                self.commit(applied=[(cmd.id, f"ignored: run is {status}")])
        elif kind == CommandKind.STEER:
            if open_step is not None:
                # A note never follows an open step: it is delivered once the step is
                # closed (a wait ends, an effect in doubt is decided about, an interrupted
                # call is made again). Meanwhile it wakes nothing (WorkerQueries).
                self._read_commands = True
                return
            text = str((cmd.payload or {}).get("text", ""))
            self._deliver_note(cmd, {"text": text}, "delivered as step {seq}")
        elif kind == CommandKind.EXTEND_BUDGET:
            new = budgets.extend(self.run.budget, cmd.payload or {})
            self.commit(applied=[(cmd.id, "budget extended")], patch=RunPatch(budget=new.to_json()))
        elif kind in (CommandKind.APPROVE, CommandKind.REJECT):
            control.apply_decision(self, cmd)
        elif kind == CommandKind.STOP:
            if status == RunStatus.STOPPED:
                self.commit(applied=[(cmd.id, "ignored: run is already stopped")])
                return
            self.commit(applied=[(cmd.id, "stopping")])
            self.finish_stopped("Stopped by the analyst")
        elif kind == CommandKind.RESOLVE and not self._resolves_open_step():
            self.commit(applied=[(cmd.id, "ignored: no step of this run is in doubt")])
        elif kind == CommandKind.ANSWER and not (
            self.open_step is not None and self.open_step.kind == StepKind.QUESTION
        ):
            self.commit(applied=[(cmd.id, "ignored: the run asked no question")])
        # Otherwise RESOLVE and ANSWER are read by the recovery or wait they belong to.

    def _resume_stopped(self, cmd: Command) -> None:
        """Continue a stopped run from its journal, telling the model it was resumed.

        The partial report stays in the journal; the conversation is the one the run had
        when it stopped (a wait it was in was closed, so a tool call that waited for an
        approval is asked again). The note goes the way of the analyst's notes.
        """
        self._deliver_note(
            cmd,
            {"text": RESUMED_NOTE, "resumed": True},
            "resumed after a stop; note at step {seq}",
            RunPatch(status=RunStatus.RUNNING, status_message="", clear_wait=True),
        )

    def _deliver_note(
        self, cmd: Command, note: JSON, applied: str, patch: RunPatch | None = None
    ) -> None:
        """Record ``note`` as a delivered steer step, applying ``cmd`` in the same commit.

        ``applied`` is the command's outcome text; ``{seq}`` in it names the note's step.
        """
        seq = self.next_seq
        self.commit(
            intents=[
                StepIntent(
                    seq=seq,
                    kind=StepKind.STEER,
                    name="note",
                    input=note,
                    status=StepStatus.COMPLETED,
                    output={"delivered": True},
                )
            ],
            applied=[(cmd.id, applied.format(seq=seq))],
            patch=patch,
        )

    def _resolves_open_step(self) -> bool:
        step = self.open_step
        if restored.is_restore_step(step):
            return True  # effects a restore left in doubt (engine/restored.py)
        return step is not None and step.kind == StepKind.TOOL_CALL and step.effect is not None

    # ------------------------------------------------------------------ steps

    def resume_open(self, step: Step) -> None:
        """Continue from a step that was open when the last activation ended."""
        check_open_step(self.state.conversation, step)
        if step.kind in CONTROL_WAIT_KINDS:
            waits.resume_wait(self, step)
        elif step.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION):
            # What the interrupted attempt spent (saved while it streamed) stays counted.
            self._salvage[step.seq] = (
                step.salvaged_usage + step.usage,
                step.salvaged_cost_usd + step.cost_usd,
            )
            attempt = self.store.restart_step(self.run.id, step.seq, salvaged=step.partial_text)
            self._mark_running()
            if step.kind == StepKind.MODEL_CALL:
                self.model_call(step.seq, attempt)
            else:
                compaction.compaction(self, step.seq, attempt)
        elif step.kind == StepKind.TOOL_CALL:
            control.recover_tool_call(self, step)
        elif restored.is_restore_step(step):
            restored.recover_restore(self, step)
        else:
            raise NondeterminismError(f"step {step.seq} of kind {step.kind} cannot be open")

    def _mark_running(self) -> None:
        if self.run.status != RunStatus.RUNNING:
            self.commit(patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True))

    def advance(self) -> None:
        """Take the next step the state calls for."""
        conv = self.state.conversation
        self._mark_running()
        if self.state.scalars.stopped:
            self.finish_stopped("Stopped at the analyst's request")
        if conv.pending:
            control.next_tool_use(self)
            return
        if conv.finished:
            self.finish_completed()
        if compaction.needs_compaction(self):
            compaction.compaction(self, None, 1)
            return
        budgets.check_before_model_call(self)
        self.model_call(None, 1)

    def build_request(self) -> ModelRequest:
        """The model request for the current conversation."""
        spec = self.run.spec
        return ModelRequest(
            model=spec.model,
            system=spec.system_prompt,
            messages=self.state.conversation.request_messages(),
            tools=control.tool_schemas(self),
            max_tokens=spec.max_tokens,
            thinking_budget=spec.thinking_budget,
        )

    def model_call(self, open_seq: int | None, attempt: int) -> None:
        """Intent, streamed effect and outcome of one model turn."""
        request = self.build_request()
        model = self.x.model_for(self.run.spec.model)  # fails before the intent if unavailable
        seq = open_seq if open_seq is not None else self.next_seq
        input_ = {"model": request.model, "messages": len(request.messages)}
        if open_seq is None:
            self.crash_point("before_intent")
            self.commit(
                intents=[
                    StepIntent(seq=seq, kind=StepKind.MODEL_CALL, name=request.model, input=input_)
                ]
            )
            self.crash_point("after_intent")
        response = self.stream_model(seq, StepKind.MODEL_CALL, input_, request, model)
        output = {
            "content": response.content,
            "stop_reason": response.stop_reason,
            "model": response.model,
            "thinking": response.thinking,
        }
        self.finish_step(
            seq,
            StepKind.MODEL_CALL,
            request.model,
            input_,
            StepOutcome(
                seq, StepStatus.COMPLETED, output, usage=response.usage, cost_usd=response.cost_usd
            ),
        )
        budgets.check_after_model_call(self)

    def stream_model(
        self, seq: int, kind: StepKind, input_: JSON, request: ModelRequest, model: ModelPort
    ) -> ModelResponse:
        """The effect of a model step: stream the call, persisting text and spend as it goes.

        A cancel or a failure records the step's outcome (with what the call streamed and
        spent) and unwinds: cancellation raises, failures end the activation as
        :meth:`model_failed` decides. A lost lease (found by a fenced save of the partial
        text) drops the call and reports what it spent as an event on the run.
        """
        # Not on a lease about to expire. The call changes nothing outside: its answer is
        # fenced at every save of the streamed text, so it needs no more time than that.
        self.ensure_lease(0.0)
        streamer = compaction.PartialStreamer(self, seq)
        try:
            response = model.complete(
                request,
                idempotency_key=f"{self.run.id}:{seq}",
                on_text=streamer.on_text,
                cancel=self.cancel,
                on_usage=streamer.on_usage,
            )
            response = sanitize.check_response(response)
        except RunCancelled:
            outcome = StepOutcome(
                seq,
                StepStatus.FAILED,
                {"partial": streamer.text},
                "cancelled",
                usage=streamer.usage,
                cost_usd=streamer.cost_usd,
            )
            self.finish_step(seq, kind, request.model, input_, outcome)
            raise
        except (TransientError, PermanentError) as exc:
            self.model_failed(seq, kind, input_, exc, streamer)
        except LeaseLost:
            # Found by a fenced save while it streamed: the call is dropped, its cost told.
            fencing.report_model_spend(self, seq, kind, request.model, streamer)
            raise
        try:
            streamer.flush()
        except LeaseLost:
            fencing.report_model_spend(self, seq, kind, request.model, streamer)
            raise
        return response

    def model_failed(
        self,
        seq: int,
        kind: StepKind,
        input_: JSON,
        exc: TransientError | PermanentError,
        streamer: compaction.PartialStreamer,
    ) -> NoReturn:
        """Record a failed model call (and what it spent) and decide what the run does next.

        A call that keeps failing the same way (answers cut off, streams that do not parse,
        an API that cannot be reached) is retried with growing waits, but only
        :meth:`model_attempts` times in a row: then the run asks the analyst instead of
        retrying, and spending, until its budget ends. Rate limits are not failures of the
        call (the API said when to come back) and do not count.
        """
        output: dict[str, JSON] = {
            "partial": streamer.text,
            "error_code": getattr(exc, "code", ""),
        }
        in_a_row = 0
        if isinstance(exc, TransientError) and not isinstance(exc, RateLimitedError):
            in_a_row = self._failed_in_a_row(seq)
            if in_a_row >= self.model_attempts():
                output["attempts_exhausted"] = True  # the next failure counts from one
        outcome = StepOutcome(
            seq,
            StepStatus.FAILED,
            output,
            str(exc),
            usage=streamer.usage,
            cost_usd=streamer.cost_usd,
        )
        self.finish_step(seq, kind, self.run.spec.model, input_, outcome)
        now = self.clock.now()
        if isinstance(exc, AuthenticationError):
            self.suspend(
                RunPatch(
                    status=RunStatus.WAITING,
                    wait_reason=WaitReason.CREDENTIALS,
                    status_message=(
                        str(exc)
                        if str(exc).startswith("no API key")
                        else f"API key rejected: set a valid key ({exc})"
                    ),
                )
            )
        if output.get("attempts_exhausted"):
            self.suspend(
                RunPatch(
                    status=RunStatus.NEEDS_ATTENTION,
                    status_message=(
                        f"The model call failed {in_a_row} times in a row (last: {exc}); "
                        "it is not retried again by itself. Check the network and the model "
                        "API, then resume the run to try again (`desktop-agent resume "
                        f"{self.run.id}`, or Retry in the app), or cancel it."
                    ),
                    clear_wait=True,
                )
            )
        if isinstance(exc, TransientError):
            failures = self.state.scalars.consecutive_failures
            backoff = min(
                self.cfg.backoff_cap_s, self.cfg.backoff_base_s * (2 ** max(0, failures - 1))
            )
            asked = exc.retry_after
            if isinstance(exc, RateLimitedError) and asked is not None:
                delay = asked
            else:
                delay = max(asked or 0.0, backoff)
            what = "Rate limited" if isinstance(exc, RateLimitedError) else "Model API unavailable"
            self.suspend(
                RunPatch(
                    status=RunStatus.WAITING,
                    wait_reason=WaitReason.RATE_LIMIT,
                    wake_at=now + float(delay),
                    status_message=f"{what}: {exc}; retrying in {delay:.0f}s",
                )
            )
        if isinstance(exc, BadRequestError):
            # The request itself was refused: the run waits for the analyst, who can fix
            # the cause (model, options, a note) and resume to try again.
            self.suspend(
                RunPatch(
                    status=RunStatus.NEEDS_ATTENTION,
                    status_message=f"The API refused the request: {exc}. Fix it, then resume.",
                    clear_wait=True,
                )
            )
        self.commit(
            patch=RunPatch(
                status=RunStatus.FAILED,
                finished_at=now,
                status_message=f"Model call failed: {exc}",
            )
        )
        raise Finish(RunStatus.FAILED)

    MODEL_ATTEMPTS = 5
    """Failed attempts in a row of a model call before the analyst is asked (setting
    ``model_attempts``)."""

    def model_attempts(self) -> int:
        """How many failed attempts in a row of a model call are retried by themselves."""
        value = self.cfg.settings.get("model_attempts", self.MODEL_ATTEMPTS)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return self.MODEL_ATTEMPTS
        return value

    def _failed_in_a_row(self, seq: int) -> int:
        """Failed model attempts in a row, the one at ``seq`` included.

        Counted back through the journal from ``seq``: a completed model call, any other
        step, or a failure after which the analyst was asked ends the row; rate-limited
        attempts are skipped.
        """
        count = 1
        first = max(1, seq - 4 * self.model_attempts())
        for step in reversed(self.store.load_steps(self.run.id, first)):
            out = step.output if isinstance(step.output, dict) else {}
            if step.seq >= seq:
                continue
            if step.kind not in (StepKind.MODEL_CALL, StepKind.COMPACTION):
                break
            if step.status != StepStatus.FAILED or out.get("attempts_exhausted"):
                break
            if out.get("error_code") != RateLimitedError.code:
                count += 1
        return count

    # ------------------------------------------------------------------ endings

    def finish_completed(self) -> None:
        """The model gave its final answer."""
        text = self.state.conversation.final_text
        first = text.strip().splitlines()[0] if text.strip() else "Finished"
        self.commit(
            patch=RunPatch(
                status=RunStatus.COMPLETED,
                finished_at=self.clock.now(),
                status_message=first[:200],
                clear_wait=True,
            )
        )
        raise Finish(RunStatus.COMPLETED)

    def finish_stopped(self, why: str) -> None:
        """Stop gracefully at the analyst's request, leaving a partial report.

        The run is not done: ``resume`` continues it from its journal, ``cancel`` ends it.
        Commands queued behind the stop stay queued for the next activation (a resume
        sent right after a stop is carried out, not dropped).
        """
        path = report.write_partial_report(self, why)
        self._end_with_report(RunStatus.STOPPED, f"{why}; partial report: {path}", why, path)

    def finish_cancelled(self) -> None:
        """End after a cancel, leaving a partial report."""
        path = report.write_partial_report(self, "Cancelled by the analyst")
        self._end_with_report(
            RunStatus.CANCELLED, f"Cancelled; partial report: {path}", "cancelled", path
        )

    def _end_with_report(self, status: RunStatus, message: str, why: str, path: str) -> None:
        stale = [
            dataclasses.replace(
                a,
                state=ApprovalState.EXPIRED,
                decision_note=f"the run ended ({why})",
                decided_at=self.clock.now(),
            )
            for a in self.store.list_run_approvals(self.run.id)
            if a.state == ApprovalState.PENDING
        ]
        if stale:
            self.commit(approvals=stale)
        if self._outcome is None and self.open_step is not None:
            # Close the step left open (a wait, or an effect never resumed) so that the
            # journal stays a sequence of closed records followed by the report. What it
            # had spent (a model call saves its spend as it streams) stays spent.
            left = self.open_step
            self._outcome = StepOutcome(
                left.seq, StepStatus.FAILED, None, why, usage=left.usage, cost_usd=left.cost_usd
            )
            self.open_step = None
        seq = self.next_seq
        self.commit(
            intents=[
                StepIntent(
                    seq=seq,
                    kind=StepKind.REPORT,
                    name="partial_report",
                    input={"reason": why},
                    status=StepStatus.COMPLETED,
                    output={"path": path, "report": report.partial_report_text(self, why)},
                )
            ],
            patch=RunPatch(
                status=status,
                finished_at=self.clock.now() if status.is_terminal else None,
                status_message=message,
                clear_wait=True,
            ),
            applied=[
                (c.id, "ignored: the run ended") for c in self.store.pending_commands(self.run.id)
            ]
            if status.is_terminal
            else [],
        )
        raise Finish(status)
