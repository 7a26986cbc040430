"""Notifications of what the analyst cares about: a run needs them, finished, failed, stalled.

The worker tells the :class:`Notifier` when an activation ends and calls :meth:`tick`
on every poll; the notifier compares each run's status with the one it saw last and, on a
change worth telling, hands a :class:`Notification` to its listeners (in-process hooks)
and to the outgoing webhook (a JSON POST to ``Settings.webhook_url``, e.g. a chat's
incoming webhook: the payload's ``text`` field reads well there).

Posting happens on one background thread with a short timeout and a bounded queue: a slow
or dead webhook never holds up a run, and its failures are logged, never raised. The HTTP
client is the app's webhook client (:func:`desktop_agent.http_client.webhook_client`:
certificates, proxies from the environment, timeouts).

Every post is signed (:mod:`desktop_agent.webhooks`: ``X-Desktop-Agent-Signature``, an
HMAC-SHA256 of a timestamp and the exact body) with the data folder's webhook secret,
made on the first post and kept in the OS keyring (:func:`desktop_agent.secrets.webhook_secret`;
``desktop-agent webhook-secret show`` gives it to the receiver). The secret is read again
for each post, so a rotation takes effect at the next one.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from desktop_agent.domain import JSON, Run, RunStatus, WaitReason
from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.engine.ports import Clock, SystemClock
from desktop_agent.http_client import WEBHOOK_TIMEOUT_S

if TYPE_CHECKING:
    from desktop_agent.secrets import WebhookSecret

log = logging.getLogger(__name__)

NEEDS_YOU = "needs_you"
FINISHED = "finished"
FAILED = "failed"
STALLED = "stalled"


@dataclass(frozen=True)
class Notification:
    """One event worth telling the analyst about.

    Attributes:
        event: ``needs_you``, ``finished``, ``failed`` or ``stalled``.
        run_id: the run.
        title: the run's title.
        status: its status when the event was seen.
        wait_reason: why it waits, if it does.
        message: the run's status message.
        cost_usd: what it has cost so far.
        at: when the event was seen (epoch seconds).
    """

    event: str
    run_id: str
    title: str
    status: str
    wait_reason: str | None
    message: str
    cost_usd: float
    at: float

    @property
    def text(self) -> str:
        """One line for a chat message or a tray balloon."""
        what = {
            NEEDS_YOU: "needs you",
            FINISHED: "finished",
            FAILED: "failed",
            STALLED: "made no progress",
        }.get(self.event, self.event)
        tail = f": {self.message}" if self.message else ""
        return (
            f"desktop-agent: run {self.run_id} ({self.title}) {what}{tail} "
            f"[{format_usd(self.cost_usd)}]"
        )

    def to_json(self) -> dict[str, JSON]:
        """The webhook payload."""
        return {
            "event": self.event,
            "run_id": self.run_id,
            "title": self.title,
            "status": self.status,
            "wait_reason": self.wait_reason,
            "message": self.message,
            "cost_usd": round(self.cost_usd, 6),
            "at": self.at,
            "text": self.text,
        }


def event_for(run: Run) -> str | None:
    """The event a run's current status stands for, if it is one worth telling.

    A stop is none: the analyst did it (a stopped run has not finished, and it needs no
    one until they resume or cancel it), as a cancel is none.
    """
    if run.status == RunStatus.COMPLETED:
        return FINISHED
    if run.status == RunStatus.FAILED:
        return FAILED
    if run.needs_analyst:
        return NEEDS_YOU
    return None


def _notification(run: Run, event: str, now: float, message: str | None = None) -> Notification:
    title = run.title or run.goal
    return Notification(
        event=event,
        run_id=run.id,
        title=title if len(title) <= 80 else title[:79] + "…",
        status=str(run.status),
        wait_reason=str(run.wait_reason) if run.wait_reason else None,
        message=run.status_message if message is None else message,
        cost_usd=run.cost_usd,
        at=now,
    )


State = tuple[RunStatus, WaitReason | None]


class RunWatcher:
    """Turns the run states it is shown into notifications; does no I/O.

    Args:
        stall_after_s: a running run without a new step for this long is reported once
            as stalled (None: never).
    """

    def __init__(self, stall_after_s: float | None = None) -> None:
        self.stall_after_s = stall_after_s
        self._seen: dict[str, State] = {}
        self._progress: dict[str, tuple[int, float]] = {}
        self._stalled: set[str] = set()

    def prime(self, runs: Iterable[Run]) -> None:
        """Remember states without telling (what a previous worker already told)."""
        for run in runs:
            self._seen.setdefault(run.id, (run.status, run.wait_reason))

    def observe(self, run: Run, now: float) -> Notification | None:
        """The notification for ``run``'s state, if it changed to one worth telling."""
        state = (run.status, run.wait_reason)
        before = self._seen.get(run.id)
        if run.status.is_terminal:  # it changes no more (a retry starts it from nothing)
            self._seen.pop(run.id, None)
        else:
            self._seen[run.id] = state
        if state == before:
            return None
        event = event_for(run)
        return _notification(run, event, now) if event else None

    def check_stalls(self, running: Iterable[Run], now: float) -> list[Notification]:
        """Notifications for running runs whose journal has not grown for too long."""
        if self.stall_after_s is None:
            return []
        out = []
        current = set()
        for run in running:
            if run.status != RunStatus.RUNNING:
                continue
            current.add(run.id)
            seq, since = self._progress.get(run.id, (-1, now))
            if run.last_seq != seq:
                self._progress[run.id] = (run.last_seq, now)
                self._stalled.discard(run.id)
                continue
            if now - since >= self.stall_after_s and run.id not in self._stalled:
                self._stalled.add(run.id)
                message = f"no new step for {format_duration(now - since)} (step {seq})"
                out.append(_notification(run, STALLED, now, message))
        for run_id in set(self._progress) - current:
            del self._progress[run_id]
            self._stalled.discard(run_id)
        return out


SecretSource = Callable[[], "WebhookSecret"]
"""Gives the signing secret (read for each post; may raise)."""


def folder_secret(folder: Path) -> SecretSource:
    """The webhook secret of the data folder ``folder`` (the OS keyring imported lazily)."""

    def read() -> WebhookSecret:
        from desktop_agent.secrets import webhook_secret

        return webhook_secret(folder)

    return read


def data_folder(runs: object) -> Path | None:
    """The data folder of a store (None: not a store, or one without a folder)."""
    from desktop_agent.persistence.store import SqlStore

    return runs.db.settings.folder if isinstance(runs, SqlStore) else None


class WebhookSender:
    """Posts notifications as signed JSON from one background thread.

    Args:
        url: the webhook's URL (never logged: chat webhooks carry their secret in it).
        timeout_s: per-operation timeout (the client and its certificates and proxies come
            from :func:`desktop_agent.http_client.webhook_client`).
        max_pending: notifications queued at most; more are dropped with a warning.
        secret: the signing secret, read for each post (None: posts go unsigned). One
            that cannot be read leaves that post unsigned, with a warning (the secret is
            never logged); where it is kept, when not in the OS keyring, is said once.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        max_pending: int = 100,
        secret: SecretSource | None = None,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.secret = secret
        self._said = ""
        self._queue: queue.Queue[Notification | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.sent = 0
        self.failed = 0

    @property
    def _where(self) -> str:
        import httpx2

        try:
            return httpx2.URL(self.url).host or "?"
        except (httpx2.InvalidURL, TypeError, ValueError):
            return "?"

    def send(self, notification: Notification) -> None:
        """Queue ``notification``; returns at once."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="notify-webhook", daemon=True
                )
                self._thread.start()
        try:
            self._queue.put_nowait(notification)
        except queue.Full:
            log.warning(
                "webhook queue full: dropped %s of run %s", notification.event, notification.run_id
            )

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is queued (waiting at most ``timeout_s``), then stop."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            return
        thread.join(timeout_s)

    def _signature(self, body: bytes) -> str | None:
        """The signature header's value for ``body``; None when it cannot be signed."""
        if self.secret is None:
            return None
        from desktop_agent.webhooks import sign

        try:
            found = self.secret()
        except Exception as exc:  # a post unsigned is better than none (receivers decide)
            log.warning(
                "webhook at %s: the signing secret cannot be read (%s): this post goes unsigned",
                self._where,
                type(exc).__name__,
            )
            return None
        if found.note and found.note != self._said:
            self._said = found.note
            log.warning("webhook signing secret: %s", found.note)
        return sign(found.value, body)

    def _loop(self) -> None:
        import httpx2  # here, not at the worker's start: most workers post no webhook

        from desktop_agent.http_client import webhook_client
        from desktop_agent.webhooks import HEADER

        with webhook_client(self.timeout_s) as client:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                try:
                    body = json.dumps(
                        item.to_json(), ensure_ascii=False, separators=(",", ":")
                    ).encode("utf-8")
                    headers = {"Content-Type": "application/json"}
                    signature = self._signature(body)
                    if signature is not None:
                        headers[HEADER] = signature
                    resp = client.post(self.url, content=body, headers=headers)
                    resp.raise_for_status()
                    self.sent += 1
                except httpx2.HTTPStatusError as exc:
                    self.failed += 1
                    log.warning(
                        "webhook at %s answered %s to %s of run %s",
                        self._where,
                        exc.response.status_code,
                        item.event,
                        item.run_id,
                    )
                except Exception as exc:  # a notification must never take the worker down
                    self.failed += 1
                    log.warning(
                        "webhook at %s failed for %s of run %s: %s",
                        self._where,
                        item.event,
                        item.run_id,
                        type(exc).__name__,
                    )


class RunSource(Protocol):
    """What the notifier reads: runs from the database."""

    def get_run(self, run_id: str) -> Run:
        """The run; raises NotFoundError."""
        ...

    def list_runs(
        self,
        statuses: Iterable[RunStatus] | None = None,
        limit: int = 500,
        search: str | None = None,
    ) -> list[Run]:
        """Runs, newest first."""
        ...


Listener = Callable[[Notification], None]


class Notifier:
    """Watches runs for the worker and tells listeners and the webhook.

    Args:
        runs: where runs are read.
        webhook_url: where to POST notifications (empty: no webhook).
        stall_after_s: report running runs without progress for this long (None: never).
        clock: time source.
        check_every_s: how often :meth:`tick` looks for stalled runs.
        timeout_s: webhook request timeout.
        webhook_secret: what signs the posts (default: the secret of the data folder of
            ``runs`` when it is a store; without one, posts go unsigned).
    """

    def __init__(
        self,
        runs: RunSource,
        *,
        webhook_url: str = "",
        stall_after_s: float | None = 1800.0,
        clock: Clock | None = None,
        check_every_s: float = 30.0,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        webhook_secret: SecretSource | None = None,
    ) -> None:
        self.runs = runs
        self.clock = clock or SystemClock()
        self.watcher = RunWatcher(stall_after_s)
        self.check_every_s = check_every_s
        self.webhook = None
        if webhook_url.strip():
            if webhook_secret is None:
                folder = data_folder(runs)
                webhook_secret = folder_secret(folder) if folder is not None else None
            if webhook_secret is None:
                log.warning("webhook posts go unsigned: no data folder keeps a secret")
            self.webhook = WebhookSender(webhook_url, timeout_s, secret=webhook_secret)
        self._listeners: list[Listener] = []
        self._primed = False
        self._last_check: float | None = None

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every notification (on the worker's thread: be quick)."""
        self._listeners.append(listener)

    def on_activation_end(self, run_id: str) -> None:
        """Look at a run after an activation; never raises."""
        try:
            found = self.watcher.observe(self.runs.get_run(run_id), self.clock.now())
        except DesktopAgentError as exc:
            log.warning("notifier could not read run %s: %s", run_id, exc)
            return
        if found is not None:
            self._emit(found)

    def tick(self, now: float) -> None:
        """Look for stalled runs every ``check_every_s``; never raises.

        The first call remembers the states runs start from. The worker calls this before
        it dispatches anything, so that states a previous worker already told about are
        not told again.
        """
        try:
            self._prime()
        except DesktopAgentError as exc:
            log.warning("notifier could not list runs: %s", exc)
            return
        if self.watcher.stall_after_s is None:
            return
        if self._last_check is not None and now - self._last_check < self.check_every_s:
            return
        self._last_check = now
        try:
            running = self.runs.list_runs([RunStatus.RUNNING], limit=1000)
        except DesktopAgentError as exc:
            log.warning("notifier could not list runs: %s", exc)
            return
        for found in self.watcher.check_stalls(running, now):
            self._emit(found)

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver queued webhook posts (waiting at most ``timeout_s``)."""
        if self.webhook is not None:
            self.webhook.close(timeout_s)

    def _prime(self) -> None:
        if not self._primed:
            self._primed = True
            self.watcher.prime(self.runs.list_runs(limit=5000))

    def _emit(self, notification: Notification) -> None:
        log.info("notify: %s", notification.text)
        for listener in self._listeners:
            try:
                listener(notification)
            except Exception:
                log.warning("notification listener failed", exc_info=True)
        if self.webhook is not None:
            self.webhook.send(notification)


def build_notifier(
    runs: RunSource,
    *,
    webhook_url: str,
    stall_minutes: float | None,
    clock: Clock | None = None,
) -> Notifier:
    """The notifier configured by the user's settings."""
    stall = stall_minutes * 60.0 if stall_minutes and stall_minutes > 0 else None
    return Notifier(runs, webhook_url=webhook_url, stall_after_s=stall, clock=clock)
