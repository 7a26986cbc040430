"""What one activation of a run shares between its parts: the run state.

The run loop (:mod:`desktop_agent.engine.loop`) composes helpers: recording steps
(:mod:`~desktop_agent.engine.recording`), the analyst's commands
(:mod:`~desktop_agent.engine.commands`), waits, budgets, tool calls, model calls,
compaction, endings. They all work on one :class:`RunState`, passed to them as their
first argument, and on nothing else of the loop: what a helper needs is a public field
here or a parameter, never another module's private attribute. That keeps the engine's
imports a tree (checked by ``tests/unit/test_engine_structure.py``): this module sits
below every helper and imports only the ports, the working state's fold and the domain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from desktop_agent.domain import JSON, Run, Step, StepKind, Usage
from desktop_agent.domain.errors import ControlFlowInterrupt
from desktop_agent.domain.settings import Settings
from desktop_agent.engine.ports import (
    BatchQueue,
    CancelToken,
    Clock,
    JournalStore,
    LeaseGuard,
    ModelPort,
    SpendCap,
    StepOutcome,
    ToolProvider,
)
from desktop_agent.engine.state import AgentState


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
        spend_cap: the global monthly spend cap (None: none is checked).
        batch_queue: where economy-mode turns are queued for a Message Batch (None:
            economy-mode runs stream their calls, as without the option).
    """

    snapshot_every: int = 25
    partial_flush_s: float = 0.25
    compaction_threshold: float = 0.8
    keep_recent_messages: int = 6
    backoff_base_s: float = 5.0
    backoff_cap_s: float = 600.0
    crash_hook: Callable[[str], None] | None = None
    settings: Settings = field(default_factory=Settings)
    effect_timeout_s: float = 30.0
    spend_cap: SpendCap | None = None
    batch_queue: BatchQueue | None = None


class Suspend(ControlFlowInterrupt):
    """Ends an activation: the run now waits, pauses, or needs the analyst."""


class Finish(ControlFlowInterrupt):
    """Ends an activation: the run reached a terminal status, or stopped."""


@dataclass(eq=False)
class RunState:
    """The state of one activation of a run, shared by the loop and its helpers.

    Attributes:
        run: the run as last read (re-read after a commit that changes its status,
            budget or definition).
        store: the journal; fenced by ``guard``'s lease when there is one.
        clock: source of time.
        cfg: tunables.
        cancel: set by the worker when the analyst cancels the run.
        tools: looks tools up by name.
        model_for: returns the model port for a model id.
        guard: the worker's lease on the run (None: unfenced, e.g. tests driving the
            engine).
        state: the working state, folded from the journal (scalars and conversation).
        mark: when the time worked was last counted (see ``recording.commit``).
        active_seconds: time worked so far (the run's total plus what this activation
            added).
        workspace: the run's working folder.
        open_step: the step the activation holds open (a wait, or one being recovered).
        outcome: an outcome buffered for the next commit (an effect's, or the one closing
            the open step).
        effect: kind and name of the effect whose outcome is in ``outcome`` (None when
            the outcome closes a wait or a decision).
        since_snapshot: outcomes written since the last snapshot.
        salvage: what the interrupted attempts of model steps had spent (usage, dollars),
            counted in the run's totals when the step closes.
        saved_spend: what the current attempt of each model step had saved with its last
            ``save_partial`` (usage, dollars): on the step's row, counted in the run's
            totals from there.
        storage_resume: set by a resume after a storage pause whose failed commit held an
            effect's outcome (``seq``, ``problem``: the storage error's code): recovery
            says so.
        read_commands: whether the next step boundary reads the commands whatever the
            worker hints (the first one always does).
        reservation: the token of what the monthly cap holds for the model call in
            flight (see :func:`desktop_agent.engine.budget.reserve`), None when nothing.
        spent_reservation: the token of a finished call's reservation, dropped by the
            commit that writes the call's buffered cost (see
            :func:`desktop_agent.engine.budget.release_on_commit`).
    """

    run: Run
    store: JournalStore
    clock: Clock
    cfg: EngineConfig
    cancel: CancelToken
    tools: ToolProvider
    model_for: Callable[[str], ModelPort]
    guard: LeaseGuard | None = None
    state: AgentState = field(init=False)
    mark: float = field(init=False)
    active_seconds: float = field(init=False)
    workspace: Path = field(init=False)
    open_step: Step | None = None
    outcome: StepOutcome | None = None
    effect: tuple[StepKind, str] | None = None
    since_snapshot: int = 0
    salvage: dict[int, tuple[Usage, float]] = field(default_factory=dict)
    saved_spend: dict[int, tuple[Usage, float]] = field(default_factory=dict)
    storage_resume: dict[str, JSON] | None = None
    read_commands: bool = True
    reservation: str | None = None
    spent_reservation: str | None = None

    def __post_init__(self) -> None:
        self.state = AgentState.initial(self.run.goal)
        self.mark = self.clock.now()
        self.active_seconds = self.run.active_seconds
        self.workspace = Path(self.run.workspace)

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
