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

import logging
import threading
import time
from collections.abc import Callable
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
from desktop_agent.engine.flusher import FLUSHER
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
from desktop_agent.engine.request import build_request, container_intent
from desktop_agent.engine.run_state import Finish, RunState

log = logging.getLogger(__name__)


class PartialStreamer:
    """Collects streamed text and persists it a few times a second.

    Saves are throttled: one at most per ``partial_flush_s``, counted from the end of the
    last save. What arrives inside that interval is saved when it ends even if nothing
    more streams (the API stalls, the worker freezes): a trailing flush, scheduled with
    the process's one flusher thread (:data:`~desktop_agent.engine.flusher.FLUSHER`), which
    serves the trailing flushes of every streamer, starts when one is scheduled and ends
    when none is pending. A streamer has one scheduled at most, and none when nothing is
    unsaved. The flusher makes due saves one after the other, so a slow save of another
    call (a database lock) can delay this one's, never drop it. Saves of a streamer never
    overlap, and each holds everything streamed before it began.

    Each save made while the call streams that holds some text is followed by the crash
    point ``mid_stream``, on the thread that made it. A trailing save that fails (a lost
    lease), or its crash point when that raises, is raised on the streaming thread by its
    next callback or by :meth:`flush`. :meth:`close` cancels a pending trailing flush and
    waits for one of this streamer under way (never for another's): after it nothing saves
    for the streamer on another thread, so the call's owner closes the streamer before it
    records the call's outcome (:func:`stream_model`).

    Args:
        rs: the activation's state (its journal, and ``cfg.partial_flush_s``).
        seq: the model step whose partial answer is saved.
        monotonic: the clock of the throttle. The flusher waits in real time, at most an
            interval at a time, and asks this clock again whether the save is due.
    """

    def __init__(
        self, rs: RunState, seq: int, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.rs = rs
        self.seq = seq
        self.parts: list[str] = []
        self.usage = Usage()
        self.cost_usd = 0.0
        self._monotonic = monotonic
        self._last = monotonic()
        self._dirty = False
        self._usage_saved = False
        self._lock = threading.Lock()  # what streamed, and the trailing flush's state
        self._saving = threading.Lock()  # held by the save under way: saves never overlap
        self._scheduled = False  # a trailing flush is pending with the flusher, or running
        self._closed = False
        self._failed: BaseException | None = None  # what a trailing save raised
        rs.saved_spend[seq] = (Usage(), 0.0)  # a new attempt: its row holds nothing yet

    @property
    def text(self) -> str:
        """Everything streamed so far."""
        with self._lock:
            return "".join(self.parts)

    def on_text(self, delta: str) -> None:
        """Called by the model adapter for each text delta."""
        piece = sanitize.clean_text(delta)
        with self._lock:
            self.parts.append(piece)
            self._dirty = True
        if self._save(when_due=True):
            self.rs.crash_point("mid_stream")  # text streamed so far is on disk

    def on_usage(self, usage: Usage, cost_usd: float) -> None:
        """Called by the model adapter with the usage and dollars spent so far."""
        with self._lock:
            self.usage = usage
            self.cost_usd = cost_usd
            self._dirty = True
            first = not self._usage_saved
            self._usage_saved = True
        # The prompt is paid for as soon as the call starts: it is recorded at once.
        if self._save(when_due=not first):
            self.rs.crash_point("mid_stream")

    def flush(self) -> None:
        """Persist the text streamed and the usage reported so far, if they changed.

        Raises:
            LeaseLost: this save, or a trailing one since the last callback, found the
                run taken (as any error of a trailing save, raised here).
        """
        self._save(when_due=False)

    def close(self) -> None:
        """Cancel a pending trailing flush and wait for this streamer's one under way.

        Never raises (what a trailing save raised is kept for :meth:`flush`), and never
        waits for another streamer's save. After it the flusher saves nothing more for
        this streamer (and its thread is gone if nothing else is pending); :meth:`flush`
        still saves, on the caller's thread.
        """
        with self._lock:
            self._closed = True  # no trailing flush is scheduled from now on
        FLUSHER.cancel(self)

    def _save(self, *, when_due: bool, trailing: bool = False) -> str | None:
        """Save what is unsaved; the text saved (None: no save was made).

        ``when_due``: only if the throttle's interval has passed since the last save (if
        not, the trailing flush will). ``trailing``: the flusher's save, never made once
        the streamer is closed.
        """
        with self._saving:
            with self._lock:
                if self._failed is not None:
                    raise self._failed
                if not self._dirty or (trailing and self._closed):
                    return None
                if when_due and self._left() > 0:
                    self._arrange_trailing_flush()
                    return None
                text, usage, cost_usd = "".join(self.parts), self.usage, self.cost_usd
                self._dirty = False
            try:
                self.rs.store.save_partial(self.rs.run.id, self.seq, text, usage, cost_usd)
            except BaseException:
                with self._lock:
                    self._dirty = True
                raise
            self.rs.saved_spend[self.seq] = (usage, cost_usd)
            with self._lock:
                self._last = self._monotonic()
            return text

    def _left(self) -> float:
        """Seconds until the throttle allows the next save (holding ``_lock``)."""
        return self._last + self.rs.cfg.partial_flush_s - self._monotonic()

    def _arrange_trailing_flush(self) -> None:
        """Schedule the trailing flush, unless one is or the streamer is closed (holding _lock)."""
        if self._scheduled or self._closed:
            return
        delay = min(max(self._left(), 0.0), self.rs.cfg.partial_flush_s)
        self._scheduled = FLUSHER.schedule(self, delay, self._trail)
        if not self._scheduled:  # no thread to be had: the next save takes it along
            log.warning("run %s: no trailing save of step %s", self.rs.run.id, self.seq)

    def _trail(self) -> None:
        """The trailing flush (on the flusher's thread): save if due, then schedule the next.

        The next is scheduled while something is left unsaved (what streamed during this
        save, or all of it when the throttle's clock says the save is not due yet).
        """
        try:
            if self._save(when_due=True, trailing=True):
                self.rs.crash_point("mid_stream")
        except BaseException as exc:  # kept: raised on the streaming thread
            with self._lock:
                self._failed = exc
                self._scheduled = False
            return
        with self._lock:
            self._scheduled = False
            if self._dirty and self._failed is None:
                self._arrange_trailing_flush()


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
    if (box := container_intent(rs, request)) is not None:
        input_["container"] = box
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
    details = dict(response.details)
    documents = details.pop("documents", None)
    files = details.pop("files", None)
    if files:
        output["files"] = files  # what code execution wrote, saved in the workspace
    if details:
        output["api"] = details
    if documents is not None:
        # The request's documents in document_index order, for citations to name.
        output["documents"] = documents
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
        try:
            response = model.complete(
                request,
                idempotency_key=f"{rs.run.id}:{seq}",
                on_text=streamer.on_text,
                cancel=rs.cancel,
                on_usage=streamer.on_usage,
            )
        finally:
            # Before any outcome is recorded: no trailing save may land after it.
            streamer.close()
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
