"""The worker: claims runnable runs with a lease, executes them in a bounded pool.

A run is executed by one pool thread per activation (until it waits, pauses or ends);
waiting and paused runs hold no thread. Leases are renewed by a heartbeat; a worker found
dead (same host: its process is gone; elsewhere: its lease expired) loses its runs to the
next worker, which recovers them from their journals.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import psutil

from desktop_agent.domain import RunStatus, WorkerInfo
from desktop_agent.domain.errors import DesktopAgentError, StorageError
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.engine.ports import CancelToken, Clock, RunPatch, SystemClock
from desktop_agent.persistence.store import SqlStore
from desktop_agent.worker.notify import Notifier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    """Tunables of the worker.

    Attributes:
        max_runs: activations executed at once.
        lease_s: how long a claimed run stays ours without a heartbeat.
        poll_s: how often the database is polled for runnable runs and commands.
        until_idle: exit once no run is runnable.
    """

    max_runs: int = 8
    lease_s: float = 30.0
    poll_s: float = 0.2
    until_idle: bool = False


def process_alive(pid: int, started_at: float) -> bool:
    """Whether process ``pid`` is alive and is the one started at ``started_at``."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - started_at) < 2.0 or started_at == 0.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class Worker:
    """Executes runs from the database until stopped (or idle, with ``until_idle``).

    Args:
        store: the database.
        executor: the engine.
        config: tunables.
        clock: time source for leases and wake-ups.
        on_activation_end: called with a run id after each activation (tests, logs).
        notifier: told of each activation's end and of every poll (notifications).
    """

    def __init__(
        self,
        store: SqlStore,
        executor: RunExecutor,
        config: WorkerConfig | None = None,
        clock: Clock | None = None,
        on_activation_end: Callable[[str], None] | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.config = config or WorkerConfig()
        self.clock = clock or SystemClock()
        self.host = socket.gethostname()
        self.id = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stop_event = threading.Event()
        self._wakeup = threading.Event()
        self.on_activation_end = on_activation_end
        self.notifier = notifier
        self._in_flight: dict[str, tuple[Future[None], CancelToken]] = {}
        self._pool = ThreadPoolExecutor(self.config.max_runs, thread_name_prefix="run")
        self._last_heartbeat = 0.0
        self._dead: list[str] = []
        self._last_dead_check = 0.0
        self.activations = 0
        self._cooldown: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Work until :meth:`stop` is called (or idle, with ``until_idle``)."""
        now = self.clock.now()
        me = psutil.Process()
        self.store.register_worker(
            WorkerInfo(self.id, self.host, os.getpid(), now, now), me.create_time()
        )
        log.info("worker %s started", self.id)
        try:
            while not self.stop_event.is_set():
                busy = self.tick()
                if self.config.until_idle and not busy:
                    break
                self._wakeup.wait(self.config.poll_s)
                self._wakeup.clear()
        finally:
            self._shutdown()

    def stop(self) -> None:
        """Ask the worker to stop after its current poll."""
        self.stop_event.set()
        self._wakeup.set()

    def nudge(self) -> None:
        """Poll now rather than after ``poll_s`` (a wake-up fell due, an activation ended)."""
        self._wakeup.set()

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
        self._reap()
        if self.notifier is not None:
            self.notifier.close()
        with contextlib.suppress(DesktopAgentError):
            self.store.stop_worker(self.id, self.clock.now())
        log.info("worker %s stopped after %d activations", self.id, self.activations)

    # ------------------------------------------------------------------ one poll

    def tick(self) -> bool:
        """One round of bookkeeping and dispatch; returns whether anything is going on."""
        now = self.clock.now()
        if now - self._last_heartbeat >= self.config.lease_s / 3:
            self.store.heartbeat(self.id, now, self.config.lease_s)
            self._last_heartbeat = now
        if now - self._last_dead_check >= 2.0 or not self._last_dead_check:
            self._dead = self._find_dead_workers(now)
            self._last_dead_check = now
        if self.notifier is not None:
            self.notifier.tick(now)
        self._reap()
        self._watch_cancels()
        free = self.config.max_runs - len(self._in_flight)
        runnable = self.store.runnable_runs(now, self._dead, limit=free + len(self._in_flight) + 1)
        candidates = [
            r for r in runnable if r not in self._in_flight and self._cooldown.get(r, 0.0) <= now
        ]
        for run_id in candidates[: max(0, free)]:
            if self.store.claim_run(run_id, self.id, now, self.config.lease_s, self._dead):
                token = CancelToken()
                fut = self._pool.submit(self._activate, run_id, token)
                fut.add_done_callback(lambda _f: self.nudge())
                self._in_flight[run_id] = (fut, token)
        return bool(self._in_flight) or bool(candidates)

    def _activate(self, run_id: str, token: CancelToken) -> None:
        before = self._progress_mark(run_id)
        try:
            self._execute(run_id, token)
        finally:
            if before is not None and self._progress_mark(run_id) == before:
                # Nothing moved: don't spin on a run whose commands cannot apply yet.
                log.warning("run %s made no progress; retrying it in 5 s", run_id)
                self._cooldown[run_id] = self.clock.now() + 5.0

    def _progress_mark(self, run_id: str) -> tuple[object, ...] | None:
        try:
            run = self.store.get_run(run_id)
            cmds = tuple(c.id for c in self.store.pending_commands(run_id))
        except DesktopAgentError:
            return None
        return (run.last_seq, run.status, run.updated_at, cmds)

    def _execute(self, run_id: str, token: CancelToken) -> None:
        try:
            self.executor.execute(run_id, token)
        except StorageError as exc:
            log.error("run %s: storage problem: %s", run_id, exc)
            self._park(run_id, RunStatus.PAUSED, f"Paused: {exc}")
        except DesktopAgentError as exc:
            log.error("run %s: %s", run_id, exc)
            self._park(run_id, RunStatus.NEEDS_ATTENTION, f"Error: {exc}")
        except Exception as exc:
            log.exception("run %s: internal error", run_id)
            self._park(
                run_id,
                RunStatus.NEEDS_ATTENTION,
                f"Internal error ({type(exc).__name__}: {exc}); resume to retry",
            )

    def _park(self, run_id: str, status: RunStatus, message: str) -> None:
        with contextlib.suppress(DesktopAgentError):
            self.store.commit(run_id, patch=RunPatch(status=status, status_message=message))

    def _reap(self) -> None:
        for run_id, (fut, _token) in list(self._in_flight.items()):
            if not fut.done():
                continue
            del self._in_flight[run_id]
            self.activations += 1
            with contextlib.suppress(DesktopAgentError):
                self.store.release_run(run_id, self.id)
            if self.on_activation_end is not None:
                self.on_activation_end(run_id)
            if self.notifier is not None:
                self.notifier.on_activation_end(run_id)

    def _watch_cancels(self) -> None:
        if not self._in_flight:
            return
        cancels = self.store.pending_cancels()
        for run_id, (_fut, token) in self._in_flight.items():
            if run_id in cancels and not token.cancelled:
                token.cancel()

    def _find_dead_workers(self, now: float) -> list[str]:
        dead = []
        for info, proc_started in self.store.list_workers():
            if info.id == self.id:
                continue
            if info.host == self.host:
                gone = not process_alive(info.pid, proc_started)
            else:
                gone = now - info.heartbeat_at > 3 * self.config.lease_s
            if gone:
                dead.append(info.id)
                self.store.mark_worker_dead(info.id, now)
        # Workers already marked dead may still hold leases that have not expired.
        stale = self.store.lease_owners() - {self.id}
        live = {info.id for info, _ in self.store.list_workers()}
        dead += [owner for owner in stale if owner not in live and owner not in dead]
        return dead
