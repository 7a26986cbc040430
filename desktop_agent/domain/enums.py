"""Enumerations shared by every layer: statuses, step kinds, effect classes."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Lifecycle of a run (DESIGN.md §3)."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"
    NEEDS_ATTENTION = "needs_attention"
    STOPPED = "stopped"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True for statuses a run never leaves."""
        return self in _TERMINAL

    @property
    def is_active(self) -> bool:
        """True while the run is not finished (it may still be waiting, paused or stopped)."""
        return self not in _TERMINAL

    @property
    def is_resumable(self) -> bool:
        """True for statuses that ``resume`` continues whatever the run waits for.

        A stopped run was ended by the analyst with a partial report but is not done:
        resuming it continues its journal where it stopped. A failed run is retried.
        (A waiting run may also be woken early, depending on its wait reason.)
        """
        return self in _RESUMABLE


_TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
_RESUMABLE = frozenset({RunStatus.PAUSED, RunStatus.STOPPED, RunStatus.FAILED})


class WaitReason(StrEnum):
    """Why a waiting run waits."""

    APPROVAL = "approval"
    TIMER = "timer"
    RATE_LIMIT = "rate_limit"
    BUDGET = "budget"
    HUMAN_INPUT = "human_input"
    CREDENTIALS = "credentials"
    BATCH = "batch"
    """An economy-mode model turn is queued in a Message Batch until its result is in."""


class StepKind(StrEnum):
    """What a journal step records."""

    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    APPROVAL = "approval"
    SLEEP = "sleep"
    STEER = "steer"
    COMPACTION = "compaction"
    BUDGET = "budget"
    ERROR = "error"
    QUESTION = "question"
    REPORT = "report"


class StepStatus(StrEnum):
    """State of one journal record: intent written, outcome written, or failed."""

    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"


class EffectClass(StrEnum):
    """How a tool's effect may be repeated after a crash."""

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    UNSAFE = "unsafe"


class ApprovalPolicy(StrEnum):
    """Whether a tool call waits for the analyst."""

    ALWAYS = "always"
    ASK = "ask"
    NEVER = "never"


class ApprovalState(StrEnum):
    """An approval record's lifecycle."""

    PENDING = "pending"
    APPROVED = "approved"
    EDITED = "edited"
    REJECTED = "rejected"
    EXPIRED = "expired"


class CommandKind(StrEnum):
    """What a command row asks the worker to do at the next step boundary."""

    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    STEER = "steer"
    APPROVE = "approve"
    REJECT = "reject"
    EXTEND_BUDGET = "extend_budget"
    STOP = "stop"
    RESOLVE = "resolve"
    ANSWER = "answer"


class Resolution(StrEnum):
    """The analyst's decision about an effect left in doubt by a crash."""

    PROBE = "probe"
    MARK_DONE = "mark_done"
    RETRY = "retry"
    SKIP = "skip"


class RunEventKind(StrEnum):
    """What a run event records (see :class:`~desktop_agent.domain.models.RunEvent`)."""

    LATE_EFFECT = "late_effect"
    """A worker that had lost its lease performed an effect (or paid for a model call)
    anyway; its outcome is not in the journal."""
    ABANDONED_EFFECT = "abandoned_effect"
    """A worker that had lost its lease gave an effect up before its point of no return."""
    FORECAST = "forecast"
    """The cost and duration forecast made when the run was started (kept, never changed;
    not something that happened to the run: the list of its events leaves it out)."""
    IMPORTED = "imported"
    """Where the import of another agent's session stands: the size and time of the files
    it read (one per run, rewritten by each import that found something new; bookkeeping,
    not something that happened to the run: the list of its events leaves it out)."""
