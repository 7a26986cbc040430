"""Model calls: the streamed effect of a model step, its outcome, and its failures.

A call streams: its text and what it spent are saved as they come
(:class:`PartialStreamer`), so that a crash or a lost lease loses neither. A failed call
is recorded with what it streamed and spent, and :func:`model_failed` decides what the run
does next (wait and retry, ask the analyst, or fail).

In economy mode (:func:`economy_for`) the turn is a request of a Message Batch instead
(:func:`batched_model`): the step's intent (``"mode": "economy"`` in its input) is written,
the request is queued under the step's ``custom_id``, and the run hibernates until a
worker has the result; the next activation closes the step from it. The protocol that
sends each request once is ``persistence/batches.py``'s.
"""

from __future__ import annotations

import time
from typing import NoReturn

from desktop_agent.domain import (
    JSON,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import (
    AuthenticationError,
    BadRequestError,
    LeaseLost,
    PermanentError,
    RateLimitedError,
    RunCancelled,
    TransientError,
)
from desktop_agent.engine import budget as budgets
from desktop_agent.engine import fencing, sanitize
from desktop_agent.engine.ports import (
    BatchEntry,
    BatchModel,
    BatchQueue,
    ModelPort,
    ModelRequest,
    ModelResponse,
    RunPatch,
    StepIntent,
    StepOutcome,
    batch_custom_id,
)
from desktop_agent.engine.recording import commit, finish_step, start_step, suspend
from desktop_agent.engine.request import build_request
from desktop_agent.engine.run_state import Finish, RunState


class PartialStreamer:
    """Collects streamed text and persists it a few times a second."""

    def __init__(self, rs: RunState, seq: int) -> None:
        self.rs = rs
        self.seq = seq
        self.parts: list[str] = []
        self.usage = Usage()
        self.cost_usd = 0.0
        self._last = time.monotonic()
        self._dirty = False
        self._usage_saved = False
        rs.saved_spend[seq] = (Usage(), 0.0)  # a new attempt: its row holds nothing yet

    @property
    def text(self) -> str:
        """Everything streamed so far."""
        return "".join(self.parts)

    def on_text(self, delta: str) -> None:
        """Called by the model adapter for each text delta."""
        self.parts.append(sanitize.clean_text(delta))
        self._dirty = True
        if time.monotonic() - self._last >= self.rs.cfg.partial_flush_s:
            self.flush()
            self.rs.crash_point("mid_stream")

    def on_usage(self, usage: Usage, cost_usd: float) -> None:
        """Called by the model adapter with the usage and dollars spent so far."""
        self.usage = usage
        self.cost_usd = cost_usd
        self._dirty = True
        if not self._usage_saved:
            # The prompt is paid for as soon as the call starts: record it at once.
            self._usage_saved = True
            self.flush()

    def flush(self) -> None:
        """Persist the text streamed and the usage reported so far, if they changed."""
        if self._dirty:
            usage, cost_usd = self.usage, self.cost_usd
            self.rs.store.save_partial(self.rs.run.id, self.seq, self.text, usage, cost_usd)
            self.rs.saved_spend[self.seq] = (usage, cost_usd)
            self._dirty = False
            self._last = time.monotonic()


def model_call(
    rs: RunState, open_seq: int | None, attempt: int, *, economy: bool | None = None
) -> None:
    """Intent, effect (streamed, or a batch's request) and outcome of one model turn.

    ``economy``: whether the turn goes through a batch (None: as the run's option says;
    an open step keeps the mode its intent recorded).
    """
    request = build_request(rs)
    model = rs.model_for(rs.run.spec.model)  # fails before the intent if unavailable
    seq = open_seq if open_seq is not None else rs.next_seq
    input_: dict[str, JSON] = {"model": request.model, "messages": len(request.messages)}
    if economy is None:
        queue = economy_for(rs, model)
    else:  # an open step goes on in the mode its intent recorded
        queue = rs.cfg.batch_queue if economy and isinstance(model, BatchModel) else None
    if queue is not None:
        input_["mode"] = "economy"
    if rs.state.scalars.tools is None:
        # The first call fixes the run's tool definitions (see ``request.run_tools``).
        tools: list[dict[str, JSON]] = [dict(t) for t in request.tools]
        input_["tools"] = tools
        rs.state.scalars.tools = tools
    if open_seq is None:
        start_step(
            rs, StepIntent(seq=seq, kind=StepKind.MODEL_CALL, name=request.model, input=input_)
        )
    if queue is not None and isinstance(model, BatchModel):
        response = batched_model(rs, seq, attempt, input_, request, model, queue)
    else:
        response = stream_model(rs, seq, StepKind.MODEL_CALL, input_, request, model)
    output: dict[str, JSON] = {
        "content": response.content,
        "stop_reason": response.stop_reason,
        "model": response.model,
        "thinking": response.thinking,
    }
    if response.details:
        output["api"] = dict(response.details)
    finish_step(
        rs,
        seq,
        StepKind.MODEL_CALL,
        request.model,
        input_,
        StepOutcome(
            seq, StepStatus.COMPLETED, output, usage=response.usage, cost_usd=response.cost_usd
        ),
    )
    budgets.release_on_commit(rs)  # dropped once the next commit writes the cost
    budgets.check_after_model_call(rs)


def economy_for(rs: RunState, model: ModelPort) -> BatchQueue | None:
    """The queue the run's turns go through, when it runs in economy mode and can.

    A run asks for economy mode in its definition; the engine needs a queue (a worker's)
    and a model port that can batch. Without them the run streams, as it would without
    the option.
    """
    queue = rs.cfg.batch_queue
    if not rs.run.spec.economy or queue is None or not isinstance(model, BatchModel):
        return None
    return queue


def is_economy_step(input_: JSON) -> bool:
    """Whether a model step's intent says its turn went through a batch."""
    return isinstance(input_, dict) and input_.get("mode") == "economy"


def batched_model(
    rs: RunState,
    seq: int,
    attempt: int,
    input_: JSON,
    request: ModelRequest,
    model: BatchModel,
    queue: BatchQueue,
) -> ModelResponse:
    """The effect of an economy-mode model step: a request of a Message Batch.

    Queues the request (once: its ``custom_id`` is the step's) and hibernates until a
    worker has its result; once it is in, returns the answer at the batch price. A
    request that expired, was canceled or failed is a failed attempt, retried as a
    streamed call's failure would be (:func:`model_failed`).
    """
    custom_id = batch_custom_id(rs.run.id, seq, attempt)
    entry = queue.entry(custom_id)
    now = rs.clock.now()
    if entry is None or entry.state == "withdrawn":
        params = model.batch_params(request)
        if params is None:  # the model cannot be batched after all: stream it
            return stream_model(
                rs, seq, StepKind.MODEL_CALL, input_, request, rs.model_for(rs.run.spec.model)
            )
        queue.consumed(rs.run.id, now)  # older results of the run wake it no more
        entry = queue.enqueue(
            BatchEntry(custom_id, rs.run.id, seq, attempt, "queued", now), request.model, params
        )
    if entry.pending:
        suspend(
            rs,
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.BATCH,
                status_message=_batch_message(entry),
            ),
        )
    try:
        response = model.batch_response(request, entry.result)
        response = sanitize.check_response(response)
    except (TransientError, PermanentError) as exc:
        queue.consumed(rs.run.id, now)
        model_failed(rs, seq, StepKind.MODEL_CALL, input_, exc, PartialStreamer(rs, seq))
    queue.consumed(rs.run.id, now)
    return response


def _batch_message(entry: BatchEntry) -> str:
    if entry.state == "queued":
        return "In economy mode: queued for the next batch"
    return "In economy mode: in a batch, waiting for its result"


def stream_model(
    rs: RunState, seq: int, kind: StepKind, input_: JSON, request: ModelRequest, model: ModelPort
) -> ModelResponse:
    """The effect of a model step: stream the call, persisting text and spend as it goes.

    A cancel or a failure records the step's outcome (with what the call streamed and
    spent) and unwinds: cancellation raises, failures end the activation as
    :func:`model_failed` decides. A lost lease (found by a fenced save of the partial
    text) drops the call and reports what it spent as an event on the run.
    """
    # Not on a lease about to expire. The call changes nothing outside: its answer is
    # fenced at every save of the streamed text, so it needs no more time than that.
    rs.ensure_lease(0.0)
    if rs.cfg.spend_cap is not None and rs.reservation is None:
        budgets.reserve(rs, model.worst_case_cost(request))  # not checked before: still held
    streamer = PartialStreamer(rs, seq)
    try:
        response = model.complete(
            request,
            idempotency_key=f"{rs.run.id}:{seq}",
            on_text=streamer.on_text,
            cancel=rs.cancel,
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
        finish_step(rs, seq, kind, request.model, input_, outcome)
        raise
    except (TransientError, PermanentError) as exc:
        model_failed(rs, seq, kind, input_, exc, streamer)
    except LeaseLost:
        # Found by a fenced save while it streamed: the call is dropped, its cost told.
        fencing.report_model_spend(rs, seq, kind, request.model, streamer.usage, streamer.cost_usd)
        raise
    try:
        streamer.flush()
    except LeaseLost:
        fencing.report_model_spend(rs, seq, kind, request.model, streamer.usage, streamer.cost_usd)
        raise
    return response


def model_failed(
    rs: RunState,
    seq: int,
    kind: StepKind,
    input_: JSON,
    exc: TransientError | PermanentError,
    streamer: PartialStreamer,
) -> NoReturn:
    """Record a failed model call (and what it spent) and decide what the run does next.

    A call that keeps failing the same way (answers cut off, streams that do not parse,
    an API that cannot be reached) is retried with growing waits, but only
    :func:`model_attempts` times in a row: then the run asks the analyst instead of
    retrying, and spending, until its budget ends. Rate limits are not failures of the
    call (the API said when to come back) and do not count.
    """
    output: dict[str, JSON] = {
        "partial": streamer.text,
        "error_code": getattr(exc, "code", ""),
    }
    in_a_row = 0
    if isinstance(exc, TransientError) and not isinstance(exc, RateLimitedError):
        in_a_row = _failed_in_a_row(rs, seq)
        if in_a_row >= model_attempts(rs):
            output["attempts_exhausted"] = True  # the next failure counts from one
    outcome = StepOutcome(
        seq,
        StepStatus.FAILED,
        output,
        str(exc),
        usage=streamer.usage,
        cost_usd=streamer.cost_usd,
    )
    finish_step(rs, seq, kind, rs.run.spec.model, input_, outcome)
    now = rs.clock.now()
    if isinstance(exc, AuthenticationError):
        suspend(
            rs,
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.CREDENTIALS,
                # The port's message says what was refused and where to set a key.
                status_message=str(exc),
            ),
        )
    if output.get("attempts_exhausted"):
        suspend(
            rs,
            RunPatch(
                status=RunStatus.NEEDS_ATTENTION,
                status_message=(
                    f"The model call failed {in_a_row} times in a row (last: {exc}); "
                    "it is not retried again by itself. Check the network and the model "
                    "API, then resume the run to try again (`desktop-agent resume "
                    f"{rs.run.id}`, or Retry in the app), or cancel it."
                ),
                clear_wait=True,
            ),
        )
    if isinstance(exc, TransientError):
        failures = rs.state.scalars.consecutive_failures
        backoff = min(rs.cfg.backoff_cap_s, rs.cfg.backoff_base_s * (2 ** max(0, failures - 1)))
        asked = exc.retry_after
        if isinstance(exc, RateLimitedError) and asked is not None:
            delay = asked
        else:
            delay = max(asked or 0.0, backoff)
        what = "Rate limited" if isinstance(exc, RateLimitedError) else "Model API unavailable"
        suspend(
            rs,
            RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.RATE_LIMIT,
                wake_at=now + float(delay),
                status_message=f"{what}: {exc}; retrying in {delay:.0f}s",
            ),
        )
    if isinstance(exc, BadRequestError):
        # The request itself was refused: the run waits for the analyst, who can fix
        # the cause (model, options, a note) and resume to try again. The port's message
        # says what was refused and what to change, then the API's own words.
        suspend(
            rs,
            RunPatch(
                status=RunStatus.NEEDS_ATTENTION,
                status_message=str(exc),
                clear_wait=True,
            ),
        )
    commit(
        rs,
        patch=RunPatch(
            status=RunStatus.FAILED,
            finished_at=now,
            status_message=f"Model call failed: {exc}",
        ),
    )
    raise Finish(RunStatus.FAILED)


def model_attempts(rs: RunState) -> int:
    """How many failed attempts in a row of a model call are retried by themselves."""
    return rs.cfg.settings.model_attempts


def _failed_in_a_row(rs: RunState, seq: int) -> int:
    """Failed model attempts in a row, the one at ``seq`` included.

    Counted back through the journal from ``seq``: a completed model call, any other
    step, or a failure after which the analyst was asked ends the row; rate-limited
    attempts are skipped.
    """
    count = 1
    first = max(1, seq - 4 * model_attempts(rs))
    for step in reversed(rs.store.load_steps(rs.run.id, first)):
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
