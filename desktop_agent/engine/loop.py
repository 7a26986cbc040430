"""The run loop: one activation of a run, from its journal to its next wait or its end.

An activation restores the working state from the newest snapshot plus the journal, applies
the analyst's commands at each step boundary, and takes steps until the run finishes, waits,
pauses or needs attention. It never sleeps through a wait: it records the wake time and
returns, so a waiting run holds no thread.

The loop composes the engine's parts; they share the activation's
:class:`~desktop_agent.engine.run_state.RunState` and never import this module:

* :mod:`~desktop_agent.engine.recording`: commits, buffered outcomes, recorded steps;
* :mod:`~desktop_agent.engine.commands`: the analyst's commands at each boundary;
* :mod:`~desktop_agent.engine.control`: tool uses, approvals, recovery of tool steps;
* :mod:`~desktop_agent.engine.model_calls` and :mod:`~desktop_agent.engine.compaction`;
* :mod:`~desktop_agent.engine.waits` and :mod:`~desktop_agent.engine.budget`;
* :mod:`~desktop_agent.engine.endings`: completed, stopped, cancelled;
* :mod:`~desktop_agent.engine.restored`: runs put back from an older backup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from desktop_agent.domain import CommandKind, Run, RunStatus, Step, StepKind, StepStatus
from desktop_agent.domain.agents import agent_kind
from desktop_agent.domain.errors import DesktopAgentError, NondeterminismError, RunCancelled
from desktop_agent.engine import budget as budgets
from desktop_agent.engine import compaction, control, fencing, model_calls, restored, waits
from desktop_agent.engine.commands import RESUMED_NOTE as RESUMED_NOTE
from desktop_agent.engine.commands import boundary
from desktop_agent.engine.endings import finish_cancelled, finish_completed, finish_stopped
from desktop_agent.engine.ports import (
    CancelToken,
    Clock,
    ForeignAgent,
    JournalStore,
    LeaseGuard,
    ModelPort,
    RunPatch,
    ToolProvider,
)
from desktop_agent.engine.recording import commit, mark_running, needs_attention
from desktop_agent.engine.run_state import EngineConfig as EngineConfig
from desktop_agent.engine.run_state import Finish, RunState, Suspend
from desktop_agent.engine.state import (
    CONTROL_WAIT_KINDS,
    AgentState,
    Conversation,
    Scalars,
    apply_conversation,
    apply_step,
    check_open_step,
)


class RunExecutor:
    """Executes activations of runs against the engine's ports.

    Args:
        store: the journal.
        model_for: returns the model port for a model id.
        tools: looks tools up by name.
        clock: source of time.
        config: tunables.
        foreign: the drivers of runs another Claude agent drives, by ``AgentSpec.agent``.
    """

    def __init__(
        self,
        store: JournalStore,
        model_for: Callable[[str], ModelPort],
        tools: ToolProvider,
        clock: Clock,
        config: EngineConfig | None = None,
        foreign: Mapping[str, ForeignAgent] | None = None,
    ) -> None:
        self.store = store
        self.model_for = model_for
        self.tools = tools
        self.clock = clock
        self.config = config or EngineConfig()
        self.foreign: dict[str, ForeignAgent] = dict(foreign or {})

    def execute(
        self, run_id: str, cancel: CancelToken | None = None, lease: LeaseGuard | None = None
    ) -> RunStatus:
        """Run one activation of ``run_id`` and return the run's status at its end.

        A worker passes the ``lease`` it claimed the run with: every write of the
        activation is then fenced by it, and :class:`LeaseLost` ends the activation (it
        propagates, with nothing written) once another worker has claimed the run.
        """
        run = self.store.get_run(run_id)
        if run.spec.agent:
            driver = self.foreign.get(run.spec.agent)
            if driver is None:
                kind = agent_kind(run.spec.agent)
                raise DesktopAgentError(
                    f"this worker cannot drive {kind.label} runs (nothing set up for them); "
                    "start a worker that can, then resume the run"
                )
            return driver.execute(run, cancel or CancelToken(), lease)
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
    """One pass of a run through the loop; see the module docstring.

    Args:
        executor: the engine's ports and tunables.
        run: the run, as read before the activation.
        cancel: set by the worker when the analyst cancels the run.
        guard: the worker's lease on the run (None: unfenced, e.g. tests driving the
            engine); every write of the activation is then fenced by it.
    """

    def __init__(
        self,
        executor: RunExecutor,
        run: Run,
        cancel: CancelToken,
        guard: LeaseGuard | None = None,
    ) -> None:
        store: JournalStore = (
            executor.store if guard is None else fencing.FencedJournal(executor.store, guard.lease)
        )
        self.rs = RunState(
            run=run,
            store=store,
            clock=executor.clock,
            cfg=executor.config,
            cancel=cancel,
            tools=executor.tools,
            model_for=executor.model_for,
            guard=guard,
        )
        """The state the loop shares with the engine's parts."""

    def go(self) -> None:
        """Run until the next wait, pause or end."""
        rs = self.rs
        if rs.run.status.is_terminal and not self._has_retry():
            self._ignore_commands("the run has ended")
            return
        try:
            rs.state, rs.open_step = restore_state(rs.store, rs.run)
            self._start()
            while True:
                boundary(rs, rs.open_step)
                step = rs.open_step
                if step is not None:
                    rs.open_step = step if step.kind in CONTROL_WAIT_KINDS else None
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
                needs_attention(rs, f"The journal does not match the agent: {exc}", None)
        finally:
            self._release_reservation()

    def _release_reservation(self) -> None:
        """Whatever ended the activation, what the monthly cap held for it goes.

        A failure here (the database gone away) leaves the reservation to expire: it counts
        only while the run is running, and for a few hours at most.
        """
        try:
            budgets.release(self.rs)
        except Exception:  # the activation's own outcome is what matters
            self.rs.reservation = None

    def _has_retry(self) -> bool:
        rs = self.rs
        return rs.run.status == RunStatus.FAILED and any(
            c.kind == CommandKind.RESUME for c in rs.store.pending_commands(rs.run.id)
        )

    def _ignore_commands(self, why: str) -> None:
        rs = self.rs
        cmds = rs.store.pending_commands(rs.run.id)
        if cmds:
            commit(rs, applied=[(c.id, f"ignored: {why}") for c in cmds])

    def _start(self) -> None:
        rs = self.rs
        now = rs.clock.now()
        if rs.run.status == RunStatus.QUEUED:
            commit(rs, patch=RunPatch(status=RunStatus.RUNNING, started_at=now, clear_wait=True))
        elif rs.run.status == RunStatus.RUNNING:
            rs.mark = now
        problem = control.definition_problem(rs.run, rs.tools)
        if problem and not self._definition_accepted():
            resolves = [
                (c.id, "ignored: accept the new agent definition, or cancel")
                for c in rs.store.pending_commands(rs.run.id)
                if c.kind == CommandKind.RESOLVE
            ]
            commit(rs, applied=resolves)
            needs_attention(rs, problem, None)

    def _definition_accepted(self) -> bool:
        rs = self.rs
        for cmd in rs.store.pending_commands(rs.run.id):
            if cmd.kind == CommandKind.RESOLVE and (cmd.payload or {}).get("action") == "accept":
                spec = control.current_definition(rs.run, rs.tools)
                commit(
                    rs,
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

    def resume_open(self, step: Step) -> None:
        """Continue from a step that was open when the last activation ended."""
        rs = self.rs
        check_open_step(rs.state.conversation, step)
        if step.kind in CONTROL_WAIT_KINDS:
            waits.resume_wait(rs, step)
        elif step.kind == StepKind.MODEL_CALL and model_calls.is_economy_step(step.input):
            # A request of a batch: its result is in, or the run hibernates again.
            mark_running(rs)
            model_calls.model_call(rs, step.seq, step.attempt, economy=True)
        elif step.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION):
            # What the interrupted attempt spent (saved while it streamed) stays counted.
            rs.salvage[step.seq] = (
                step.salvaged_usage + step.usage,
                step.salvaged_cost_usd + step.cost_usd,
            )
            attempt = rs.store.restart_step(rs.run.id, step.seq, salvaged=step.partial_text)
            mark_running(rs)
            if step.kind == StepKind.MODEL_CALL:
                model_calls.model_call(rs, step.seq, attempt)
            else:
                compaction.compaction(rs, step.seq, attempt)
        elif step.kind == StepKind.TOOL_CALL:
            control.recover_tool_call(rs, step)
        elif restored.is_restore_step(step):
            restored.recover_restore(rs, step)
        else:
            raise NondeterminismError(f"step {step.seq} of kind {step.kind} cannot be open")

    def advance(self) -> None:
        """Take the next step the state calls for."""
        rs = self.rs
        conv = rs.state.conversation
        mark_running(rs)
        if rs.state.scalars.stopped:
            finish_stopped(rs, "Stopped at the analyst's request")
        if conv.pending:
            control.next_tool_use(rs)
            return
        if conv.finished:
            finish_completed(rs)
        if compaction.needs_compaction(rs):
            compaction.compaction(rs, None, 1)
            return
        budgets.check_before_model_call(rs)
        model_calls.model_call(rs, None, 1)
