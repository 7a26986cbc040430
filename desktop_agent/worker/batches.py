"""The batch pump: sends economy-mode turns in Message Batches and wakes runs with results.

Called from the worker's poll loop (:meth:`BatchPump.tick`), it runs one pass at a time in
a short-lived thread, every few seconds while anything is queued or in a batch:

1. requests of runs that ended before they were sent are withdrawn, and a batch whose
   every unanswered request belongs to ended runs is canceled;
2. a submission whose batch id was never recorded (its worker died while sending) is
   settled from the API's list of batches (``persistence/batches.py``: never sent twice);
3. queued requests are sent once the oldest has waited ``batch_window_s`` (or a batch is
   full), grouped by the beta headers they need;
4. batches whose next look has come are polled, with waits growing from
   ``batch_poll_s`` to ten minutes; an ended batch's results are read and applied once,
   and their runs woken;
5. runs that missed their wake-up (a result came while they were busy) are woken.

Without an API key nothing is sent or read: the queued turns end refused, as a call without
a key is, and their runs wait for a key (resumed when one is set), as streamed runs do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from desktop_agent.domain import JSON
from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.persistence.batches import BatchBook

if TYPE_CHECKING:  # the SDK is imported by the first pass that has something to send
    from desktop_agent.llm.batches import BatchApi

log = logging.getLogger(__name__)

NO_KEY_REFUSAL: JSON = {
    "type": "error",
    "error": {
        "type": "authentication_error",
        "message": "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY",
    },
}
"""The result a queued turn gets when no key is set: as the API refuses a call without one."""

POLL_CAP_S = 600.0
"""The longest wait between two looks at a batch's status."""

LIST_SLACK_S = 120.0
"""Clock difference allowed between this machine and the API when the list is read."""

RESULTS_CHUNK = 500
"""Results written per transaction."""


@dataclass(frozen=True)
class PumpConfig:
    """Tunables of the pump (see the module docstring).

    ``max_requests`` and ``max_bytes`` keep each batch well below the API's own limits
    (100,000 requests, 256 MB: ``llm/batches.py``), so that one refused batch holds
    back few runs.
    """

    window_s: float = 10.0
    first_poll_s: float = 30.0
    doubt_s: float = 600.0
    every_s: float = 2.0
    max_requests: int = 10_000
    max_bytes: int = 128 * 1024 * 1024


@dataclass
class PassReport:
    """What one pass did (tests and logs read it)."""

    sent: list[str] = field(default_factory=list)
    """Batches created."""
    read: list[str] = field(default_factory=list)
    """Batches whose results were read."""
    applied: int = 0
    woken: list[str] = field(default_factory=list)
    requeued: int = 0
    withdrawn: int = 0
    canceled: list[str] = field(default_factory=list)
    problem: str = ""


class BatchPump:
    """Moves economy-mode turns through Message Batches (see the module docstring).

    Args:
        book: the database's side of the queue.
        api: makes the Message Batches API with the user's key (called once, by the first
            pass with work: the SDK is not loaded before).
        clock: epoch seconds.
        config: tunables.
        on_woken: called after a pass woke runs (the worker polls at once).
        crash_point: test seam called with a named point (``batch_created``: the API
            made the batch, its id not yet recorded; ``results_applied``: a batch's
            results are written, the batch not yet marked read); see ``worker/crash.py``.
    """

    def __init__(
        self,
        book: BatchBook,
        api: Callable[[], BatchApi],
        clock: Callable[[], float],
        config: PumpConfig | None = None,
        on_woken: Callable[[], None] | None = None,
        crash_point: Callable[[str], None] | None = None,
    ) -> None:
        self.book = book
        self.crash_point = crash_point or (lambda _name: None)
        self._make_api = api
        self._api: BatchApi | None = None
        self.clock = clock
        self.config = config or PumpConfig()
        self.on_woken = on_woken
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_at = 0.0
        self._active = False
        self._said_no_key = False
        self.passes = 0
        """Passes finished so far (tests wait on it)."""

    @property
    def api(self) -> BatchApi:
        """The API client, made at first use."""
        if self._api is None:
            self._api = self._make_api()
        return self._api

    # ------------------------------------------------------------------ scheduling

    def tick(self, now: float) -> None:
        """Start a pass in a thread when one is due, none is running and there is work.

        Whether there is work is one indexed read, made here: an idle worker starts no
        thread for it.
        """
        with self._lock:
            running = self._thread is not None and self._thread.is_alive()
            if running or now < self._next_at:
                return
            self._next_at = now + self.config.every_s
        if not self.holding():
            return
        with self._lock:
            thread = threading.Thread(target=self._pass_logged, name="batches", daemon=True)
            self._thread = thread
        thread.start()

    def holding(self) -> bool:
        """Whether turns are queued, in a batch, or back and not yet taken.

        A worker asked to stop when idle keeps going for them.
        """
        try:
            self._active = self.book.active()
        except (DesktopAgentError, SQLAlchemyError) as exc:  # the next poll asks again
            log.info("cannot tell whether batch requests wait: %s", exc)
            return self._active
        return self._active

    def join(self, timeout: float = 10.0) -> None:
        """Wait for a pass in progress (at shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _pass_logged(self) -> None:
        try:
            self.run_pass()
        except DesktopAgentError as exc:
            log.warning("the batch pump's pass failed: %s", exc)
        except Exception:  # the next pass tries again; the worker must not die of it
            log.exception("the batch pump's pass failed")
        finally:
            with self._lock:
                self.passes += 1

    # ------------------------------------------------------------------ one pass

    def run_pass(self) -> PassReport:
        """One pass (see the module docstring); returns what it did."""
        report = PassReport()
        if not self.book.active():
            return report
        report.withdrawn = self.book.withdraw_ended()
        if not self.api.has_key():
            # Nothing can be sent: the queued turns end as the API ends a call without a
            # key, and their runs wait for one, saying so, as streamed runs do.
            if not self._said_no_key:
                log.warning("economy-mode turns cannot be sent: no API key is set")
                self._said_no_key = True
            report.problem = "no API key"
            now = self.clock()
            while (claim := self.book.claim(now, self.config.max_requests, 1 << 62)) is not None:
                report.woken += self.book.refused(claim, NO_KEY_REFUSAL, now)
            report.woken += self.book.wake_missed(now)
            self._told(report)
            return report
        self._said_no_key = False
        self._cancel_abandoned(report)
        self._settle_doubts(report)
        self._send(report)
        self._poll(report)
        report.woken += self.book.wake_missed(self.clock())
        self._told(report)
        return report

    def _told(self, report: PassReport) -> None:
        if report.woken and self.on_woken is not None:
            self.on_woken()

    def _cancel_abandoned(self, report: PassReport) -> None:
        for batch_id in self.book.to_cancel():
            try:
                self.api.cancel(batch_id)
            except DesktopAgentError as exc:
                log.info("batch %s could not be canceled: %s", batch_id, exc)
                continue
            self.book.polled(batch_id, "canceling", self.clock())
            report.canceled.append(batch_id)

    def _settle_doubts(self, report: PassReport) -> None:
        now = self.clock()
        doubts = self.book.in_doubt(now - self.config.doubt_s)
        if not doubts:
            return
        if self.book.unread_suspects():
            return  # settled once the suspected batches end and are read
        since = min(d.claimed_at for d in doubts) - LIST_SLACK_S
        known = self.book.known_ids()
        sizes = {d.requests for d in doubts}
        found = [
            (b.id, b.created_at)
            for b in self.api.created_since(since)
            if b.id not in known and b.requests in sizes
        ]
        if found:
            log.warning(
                "%d submission(s) of batch requests lost their answer; %d batch(es) created "
                "since may hold them: their results are read before anything is sent again",
                len(doubts),
                len(found),
            )
            for doubt in doubts:
                self.book.suspect(doubt, found, now)
            return
        for doubt in doubts:
            report.requeued += self.book.requeue(doubt.submission)

    def _send(self, report: PassReport) -> None:
        from desktop_agent.llm.batches import NotCreatedError

        cfg = self.config
        limit = cfg.max_requests
        while True:
            now = self.clock()
            oldest, count = self.book.oldest_queued()
            if oldest is None or (now - oldest < cfg.window_s and count < limit):
                return
            claim = self.book.claim(now, limit, cfg.max_bytes)
            if claim is None:
                return
            try:
                made = self.api.create(claim.requests, claim.betas)
            except NotCreatedError as exc:
                if exc.lasting:
                    log.error("the API refused a batch of %d: %s", len(claim.requests), exc)
                    report.woken += self.book.refused(claim, exc.refusal, self.clock())
                else:
                    report.requeued += self.book.requeue(claim.submission)
                report.problem = str(exc)
                return
            except DesktopAgentError as exc:
                # It may exist: the submission stays in doubt until the list settles it.
                log.warning("sending a batch of %d failed: %s", len(claim.requests), exc)
                report.problem = str(exc)
                return
            self.crash_point("batch_created")
            self.book.submitted(
                claim, made.id, made.created_at, self.clock(), self.clock() + cfg.first_poll_s
            )
            report.sent.append(made.id)
            log.info("sent batch %s with %d request(s)", made.id, len(claim.requests))

    def _poll(self, report: PassReport) -> None:
        for batch in self.book.due(self.clock()):
            remote = self.api.retrieve(batch.id)
            if remote is None:  # deleted, or results past their 29 days
                self.book.read_done(batch.id, self.clock())
                report.read.append(batch.id)
                continue
            if remote.status != "ended":
                wait = min(POLL_CAP_S, self.config.first_poll_s * (1.5 ** (batch.polls + 1)))
                self.book.polled(batch.id, remote.status, self.clock() + wait)
                continue
            chunk: list[tuple[str, str, JSON]] = []
            for item in self.api.results(batch.id):
                chunk.append(item)
                if len(chunk) >= RESULTS_CHUNK:
                    self._apply(batch.id, chunk, report)
                    chunk = []
            self._apply(batch.id, chunk, report)
            self.crash_point("results_applied")
            self.book.read_done(batch.id, self.clock())
            report.read.append(batch.id)
        for submission in self.book.settled_doubts():
            report.requeued += self.book.requeue(submission)

    def _apply(self, batch_id: str, chunk: list[tuple[str, str, JSON]], report: PassReport) -> None:
        if not chunk:
            return
        applied, woken = self.book.apply_results(batch_id, chunk, self.clock())
        report.applied += applied
        report.woken += woken


def pump_config(
    window_s: float, first_poll_s: float, doubt_s: float, every_s: float | None = None
) -> PumpConfig:
    """The pump's tunables from the settings (``batch_window_s`` and so on)."""
    every = every_s if every_s is not None else max(0.05, min(2.0, window_s / 2, first_poll_s / 2))
    return PumpConfig(
        window_s=max(0.0, window_s),
        first_poll_s=max(0.05, first_poll_s),
        doubt_s=max(1.0, doubt_s),
        every_s=every,
    )
