"""The engine's ports: what it needs from the world, as protocols.

Adapters (``persistence``, ``llm``, ``tools``) implement these; the engine never imports them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalPolicy,
    Command,
    EffectClass,
    Lease,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import RunCancelled
from desktop_agent.domain.settings import Settings


class Clock(Protocol):
    """Source of time for everything the engine decides."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()


class CancelToken:
    """Set by the worker when the analyst cancels a run that is executing.

    It also carries the worker's hint that commands are waiting for the run, so that a
    step boundary reads the commands table only when there is something to read. A token
    made with ``hinted=False`` (no worker watching) makes every boundary read it.
    """

    def __init__(self, *, hinted: bool = False) -> None:
        self._event = threading.Event()
        self._hinted = hinted
        self._commands = threading.Event()

    def notify_commands(self) -> None:
        """Tell the run that commands are waiting for it."""
        self._commands.set()

    def take_commands_hint(self) -> bool:
        """Whether commands may be waiting (clears the hint)."""
        if not self._hinted:
            return True
        if self._commands.is_set():
            self._commands.clear()
            return True
        return False

    def cancel(self) -> None:
        """Ask the run to stop as soon as it can."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether cancellation was asked for."""
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; return True at once if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`RunCancelled` if cancellation was asked for."""
        if self._event.is_set():
            raise RunCancelled("cancelled by the analyst")


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to the model: the whole prompt, and how the run wants it answered.

    Attributes:
        model: the run's model id.
        system: the system prompt (fixed for the run: it is part of every later turn's prefix).
        messages: the conversation, oldest first; never rewritten once sent (append-only).
        tools: tool definitions (fixed for the run, like ``system``).
        max_tokens: most output tokens.
        thinking_budget: thinking on (above 0) or off.
        effort: ``output_config.effort``, or "" for the model's default.
        cache_ttl: ``5m`` or ``1h``: how long the cache keeps what this call writes (the
            hour when the run may hibernate before its next call).
        compaction: a request to summarize ``messages`` on the server (the port answers
            with a ``compaction`` block, see :meth:`ModelPort.compacts_on_server`).
        previous_message_id: the id of the run's previous answer, for the API's cache
            diagnostics (None on the first call).
        task_budget: (total, remaining) tokens the model is told it has for the whole
            run, so it winds down before the run's token budget stops it; None for none.
        prompt_tokens: the prompt's exact size when it was counted (``count_tokens``), for
            a worst case that decides something; None to let the port estimate.
        workspace: the run's workspace, from which the documents the messages name are
            read (their kept copies are recorded relative to it, so a journal names no
            folder of one machine), and into which files code execution wrote are saved.
        container: the code execution container to go on in (the id an earlier answer
            of the run gave), or None for a new one.
    """

    model: str
    system: str
    messages: Sequence[Mapping[str, JSON]]
    tools: Sequence[Mapping[str, JSON]]
    max_tokens: int
    thinking_budget: int = 0
    effort: str = ""
    cache_ttl: str = "5m"
    compaction: bool = False
    previous_message_id: str | None = None
    task_budget: tuple[int, int] | None = None
    prompt_tokens: int | None = None
    workspace: str = ""
    container: str | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What the model answered, with its usage and price."""

    content: list[dict[str, JSON]]
    stop_reason: str
    usage: Usage
    cost_usd: float
    model: str
    thinking: str = ""
    details: Mapping[str, JSON] = field(default_factory=dict)
    """What the API said about the call beyond its answer: the message id, cache writes by
    TTL, why the cache missed, blocks it dropped (kept with the step)."""


class ModelPort(Protocol):
    """A language model the engine can call."""

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        """Run one model turn, streaming text to ``on_text``.

        ``on_usage`` (if given) receives the usage and dollars spent so far, as soon as the
        API reports them (the prompt at the start, output as it streams), so that a call
        interrupted by a crash or a cancel is still counted.

        ``request`` is read-only: its messages are the engine's working state, shared
        rather than copied, so a port that needs to change them must copy first.

        Raises:
            RunCancelled: ``cancel`` was set while the call was in flight.
            RateLimitedError, ApiConnectionError: try again later.
            AuthenticationError, BadRequestError: will not succeed as is.
        """
        ...

    def worst_case_cost(self, request: ModelRequest) -> float:
        """Upper bound of the call's price in dollars, for budget checks."""
        ...

    def context_window(self, model: str) -> int:
        """Tokens the model accepts in one request."""
        ...

    def compacts_on_server(self, model: str) -> bool:
        """Whether the API writes this model's summaries (a request with ``compaction``).

        When it does, the answer's content is one ``compaction`` block that takes the place
        of the messages summarized; otherwise the engine asks for a summary as text.
        """
        ...

    def count_tokens(self, request: ModelRequest) -> int | None:
        """Exact input tokens of ``request`` (None when they cannot be counted now)."""
        ...


MONTHLY_CAP = "monthly"
"""The name of a ``budget`` step opened by the monthly spend cap (not a run's own budget)."""


BATCH_PENDING = frozenset({"queued", "submitting", "submitted"})
"""States of a batch request whose result is not in yet (see :class:`BatchEntry`)."""


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """A model turn of an economy-mode run, as a request of a Message Batch.

    Attributes:
        custom_id: the request's name in its batch (:func:`batch_custom_id`).
        run_id: the run.
        seq: the model step.
        attempt: the step's attempt.
        state: ``queued``, ``submitting``, ``submitted`` (see :data:`BATCH_PENDING`), then
            the result's type (``succeeded``, ``errored``, ``expired``, ``canceled``) or
            ``withdrawn`` (never sent: its run ended first).
        queued_at: when the run queued it.
        submitted_at: when a worker handed it to the API.
        batch_id: the batch that carries it, once known.
        result: the API's result object once read (``{"type": "succeeded", "message":
            ...}`` and so on).
    """

    custom_id: str
    run_id: str
    seq: int
    attempt: int
    state: str
    queued_at: float
    submitted_at: float | None = None
    batch_id: str | None = None
    result: JSON = None

    @property
    def pending(self) -> bool:
        """Whether the result is still to come."""
        return self.state in BATCH_PENDING


def batch_custom_id(run_id: str, seq: int, attempt: int) -> str:
    """The ``custom_id`` of a run's model turn in a batch: ``RUNID-SEQ-ATTEMPT``.

    The API takes 1 to 64 characters of ``[a-zA-Z0-9_-]``: run ids are ten hex digits, so
    this always fits; an id of other characters is kept to those (the row's key stays
    unique through the run id's own uniqueness in practice, and the run, step and attempt
    are stored beside it).
    """
    safe = re.sub(r"[^A-Za-z0-9_]", "_", run_id)[:40]
    return f"{safe}-{seq}-{attempt}"


class BatchQueue(Protocol):
    """Where economy-mode turns wait for a worker to put them in a Message Batch."""

    def enqueue(self, entry: BatchEntry, model: str, params: Mapping[str, JSON]) -> BatchEntry:
        """Queue ``entry`` with the request's ``params`` unless it is queued already.

        Returns the entry as stored (an entry queued before, with whatever state it
        reached, is returned unchanged; a ``withdrawn`` one is queued again).
        """
        ...

    def entry(self, custom_id: str) -> BatchEntry | None:
        """The stored entry, or None if it was never queued."""
        ...

    def consumed(self, run_id: str, now: float) -> None:
        """The run's step took every result of the run read so far (they wake it no more)."""
        ...


@runtime_checkable
class BatchModel(Protocol):
    """A model port that can send a turn as a request of a Message Batch."""

    def batch_params(self, request: ModelRequest) -> dict[str, JSON] | None:
        """The request's ``params`` for a batch (None: this model cannot be batched)."""
        ...

    def batch_response(self, request: ModelRequest, result: JSON) -> ModelResponse:
        """The answer in a batch's result, priced at the batch rate.

        Raises:
            TransientError: the request expired, was canceled or failed on the API's side
                (worth another attempt).
            BadRequestError, PermanentError: the API refused the request itself.
        """
        ...


class SpendCap(Protocol):
    """The global monthly spend cap, checked before every model call of every run.

    Adapters keep the month's total cheap to read (a model call must not scan the
    journal) and re-read the cap when the analyst changes it.
    """

    def cap_usd(self) -> float | None:
        """The cap in dollars for a calendar month (None: no cap)."""
        ...

    def month_spent_usd(self, now: float) -> float:
        """Dollars every run spent in the local calendar month that contains ``now``."""
        ...

    def reserve(
        self,
        run_id: str,
        amount_usd: float,
        now: float,
        *,
        hold: bool = True,
        force: bool = False,
    ) -> CapCheck:
        """Whether the cap leaves room for ``amount_usd`` more; held for ``run_id`` if so.

        Atomic across runs and workers: what other runs' calls in flight hold counts, and
        the check and the hold are one step. ``hold=False`` only checks; ``force`` holds
        whatever is left (a call already under way).
        """
        ...

    def release(self, run_id: str, token: str) -> None:
        """Drop the reservation ``token`` of ``run_id`` (its call's cost is recorded)."""
        ...


class CapCheck(Protocol):
    """The answer of :meth:`SpendCap.reserve`."""

    @property
    def granted(self) -> bool:
        """Whether the cap leaves room (and the amount is held, when asked to be)."""
        ...

    @property
    def spent_usd(self) -> float:
        """What every run spent this month."""
        ...

    @property
    def held_usd(self) -> float:
        """What other runs' calls in flight hold."""
        ...

    @property
    def cap_usd(self) -> float | None:
        """The cap checked."""
        ...

    @property
    def token(self) -> str | None:
        """The reservation made (None: none)."""
        ...


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the model."""

    content: str
    is_error: bool = False
    data: JSON = None


def _no_lease_check() -> None:
    """The lease check of a context without a lease (tests, the analyst's side)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the step that calls it."""

    run_id: str
    seq: int
    idempotency_key: str
    workspace: Path
    clock: Clock
    cancel: CancelToken
    settings: Settings = field(default_factory=Settings)
    attempt: int = 1
    """2 or more when this step's effect was started before (the process died meanwhile)."""
    check_lease: Callable[[], None] = _no_lease_check
    """Call at the effect's point of no return, as late as the protocol allows (before an
    e-mail is handed over, before a request is sent). It raises
    :class:`~desktop_agent.domain.errors.LeaseLost` when another worker took the run
    meanwhile (this worker was frozen, say): the tool then must not act, and need not
    catch it. Otherwise it renews the lease for the rest of the effect."""
    fencing_token: int | None = None
    """The lease epoch of the worker executing the step: it grows with every claim of the
    run. A target that remembers the largest token it saw for a key can refuse a late
    request from a worker that lost the run. None without a lease."""


class ToolInputError(ValueError):
    """Arguments from the model that do not fit the tool's schema."""


class Tool(Protocol):
    """A capability offered to the model.

    Attributes:
        name: what the model calls it.
        version: bumped when behaviour changes; part of the run's definition hash.
        description: what the model reads about it.
        input_schema: JSON schema of the arguments.
        effect: how the effect may be repeated after a crash.
        approval: default approval policy.

    A tool may also define ``effect_of(args, ctx) -> EffectClass`` to give one call a
    different class than its own (e.g. a POST to an endpoint that honours idempotency
    keys is idempotent); the journal records that class for the step. And it may define
    ``timeout_s(args, ctx) -> float | None``: how long its effect may take at most. The
    worker's lease is made to last that long (plus a margin) before the effect starts.
    """

    @property
    def name(self) -> str:
        """What the model calls the tool."""
        ...

    @property
    def version(self) -> str:
        """Bumped when behaviour changes."""
        ...

    @property
    def description(self) -> str:
        """What the model reads about the tool."""
        ...

    @property
    def input_schema(self) -> Mapping[str, JSON]:
        """JSON schema of the arguments."""
        ...

    @property
    def effect(self) -> EffectClass:
        """How the effect may be repeated after a crash."""
        ...

    @property
    def approval(self) -> ApprovalPolicy:
        """Default approval policy."""
        ...

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Perform the effect. Raise :class:`ToolInputError` for bad arguments."""
        ...

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """A rule-based reason to ask the analyst (e.g. an overwrite), or None."""
        ...

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Re-check right before an approved effect; a string says what changed."""
        ...

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """Ask the target whether the keyed effect already happened (None: unknown)."""
        ...


class ToolProvider(Protocol):
    """Looks tools up by name."""

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        ...


# --------------------------------------------------------------------------- lease


class LeaseGuard(Protocol):
    """The worker's hold on the run an activation executes: its fencing token and expiry.

    Every journal write of the activation carries :attr:`lease` and fails with
    :class:`~desktop_agent.domain.errors.LeaseLost` once another worker has claimed the
    run. Effects check it before they start and again at their point of no return.
    """

    @property
    def lease(self) -> Lease:
        """The claim: owner and epoch (the fencing token)."""
        ...

    def ensure(self, seconds: float) -> None:
        """Before an effect: make sure the lease has comfortably more than ``seconds`` left.

        Renews it when it has not (no database access otherwise). Raises
        :class:`~desktop_agent.domain.errors.LeaseLost` when the run is no longer ours.
        """
        ...

    def confirm(self, seconds: float) -> None:
        """At an effect's point of no return: check with the database that the run is ours.

        Renews the lease for ``seconds`` more (plus a margin) in the same statement.
        Raises :class:`~desktop_agent.domain.errors.LeaseLost` when it is not.
        """
        ...


# --------------------------------------------------------------------------- store


@dataclass(frozen=True, slots=True)
class StepIntent:
    """A step about to be taken: written before its effect."""

    seq: int
    kind: StepKind
    name: str
    input: JSON
    effect: EffectClass | None = None
    attempt: int = 1
    status: StepStatus = StepStatus.STARTED
    output: JSON = None


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """The end of a step: written after its effect."""

    seq: int
    status: StepStatus
    output: JSON = None
    error: str | None = None
    usage: Usage | None = None
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class RunPatch:
    """Fields of the run row to change in the same commit as a journal record."""

    status: RunStatus | None = None
    wait_reason: WaitReason | None = None
    clear_wait: bool = False
    wake_at: float | None = None
    status_message: str | None = None
    attention_seq: int | None = None
    clear_attention: bool = False
    add_active_seconds: float = 0.0
    budget: JSON = None
    started_at: float | None = None
    finished_at: float | None = None
    spec: JSON = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The fold of a run's journal up to ``seq`` (small: no message bodies)."""

    seq: int
    state: JSON


class JournalStore(Protocol):
    """Durable storage of runs, journals, approvals and commands."""

    def get_run(self, run_id: str) -> Run:
        """The run; raises NotFoundError."""
        ...

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        """The newest snapshot of the run, if any."""
        ...

    def load_steps(self, run_id: str, from_seq: int = 1) -> list[Step]:
        """Steps with ``seq >= from_seq`` in order."""
        ...

    def commit(
        self,
        run_id: str,
        *,
        outcome: StepOutcome | None = None,
        intents: Sequence[StepIntent] = (),
        patch: RunPatch | None = None,
        snapshot: Snapshot | None = None,
        applied_commands: Sequence[tuple[int, str]] = (),
        approvals: Sequence[Approval] = (),
        lease: Lease | None = None,
    ) -> None:
        """Write all of it in one transaction (one fsync).

        With ``lease``, only while it still holds the run (checked in the same
        transaction); else nothing is written and ``LeaseLost`` is raised.
        """
        ...

    def restart_step(
        self, run_id: str, seq: int, *, salvaged: str | None, lease: Lease | None = None
    ) -> int:
        """Count another attempt of an in-flight step; keep its partial text. Returns attempt.

        Fenced by ``lease`` as :meth:`commit` is.
        """
        ...

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: Lease | None = None,
    ) -> None:
        """Persist what an in-flight model call streamed and spent so far (fenced by ``lease``)."""
        ...

    def record_event(
        self,
        run_id: str,
        kind: RunEventKind,
        message: str,
        *,
        seq: int | None = None,
        data: JSON = None,
        add_usage: Usage | None = None,
        add_cost_usd: float = 0.0,
    ) -> None:
        """Add an event to the run for the analyst (never fenced: it changes no journal).

        ``add_usage`` and ``add_cost_usd`` (what a worker that lost the run spent on it and
        could not save) go to the run's totals in the same transaction.
        """
        ...

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first."""
        ...

    def pending_commands(self, run_id: str) -> list[Command]:
        """Commands not yet applied, oldest first."""
        ...

    def get_approvals(self, run_id: str, seq: int) -> list[Approval]:
        """Approval records created by step ``seq``."""
        ...

    def list_run_approvals(self, run_id: str) -> list[Approval]:
        """Every approval record of the run."""
        ...


class ForeignAgent(Protocol):
    """Moves forward a run that another Claude agent drives (``AgentSpec.agent`` set).

    The worker claims such a run like any other (lease, fencing, hibernation); the
    activation is this object's instead of the engine loop's. It writes through the same
    ``JournalStore.commit`` with ``lease`` and returns the run's status when the run waits,
    pauses or ends, holding no thread while it waits.
    """

    def execute(self, run: Run, cancel: CancelToken, lease: LeaseGuard | None) -> RunStatus:
        """One activation of ``run``; the run's status at its end."""
        ...
