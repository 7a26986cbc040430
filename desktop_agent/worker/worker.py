"""The worker: claims runnable runs with a lease, executes them in a bounded pool.

A run is executed by one pool thread per activation (until it waits, pauses or ends);
waiting and paused runs hold no thread. Leases are renewed by a heartbeat; a worker found
dead (same host: its process is gone; elsewhere: its lease expired) loses its runs to the
next worker, which recovers them from their journals.

Each claim carries a fencing token (the run's lease epoch, see :mod:`~desktop_agent.worker.lease`):
a worker that was frozen past its lease and finds the run claimed by another worker stops
that activation (:class:`~desktop_agent.domain.errors.LeaseLost`) without writing to it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import psutil
from sqlalchemy.exc import OperationalError

from desktop_agent import memory
from desktop_agent.domain import JSON, CommandKind, Run, RunStatus, WorkerInfo
from desktop_agent.domain.errors import (
    DesktopAgentError,
    LeaseLost,
    StorageError,
    UnrecordedOutcomeError,
    plain_error,
)
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.engine.ports import CancelToken, Clock, RunPatch, SystemClock
from desktop_agent.persistence import backup
from desktop_agent.persistence.identity import FileWatch
from desktop_agent.persistence.sqlbase import storage_error
from desktop_agent.persistence.store import SqlStore
from desktop_agent.procs import process_alive
from desktop_agent.worker.lease import RunLease
from desktop_agent.worker.notify import Notifier
from desktop_agent.worker.quiet import ChangeProbe, ClaimGate
from desktop_agent.worker.vanish import save_what_is_left

log = logging.getLogger(__name__)

HOST_ENV = "DESKTOP_AGENT_HOST"
"""Overrides the host name a worker registers under (see :attr:`Worker.host`)."""

VANISH_WAIT_S = 30.0
"""How long a worker whose database file vanished waits for its activations to stop (at
their next model call or effect) before it copies what is left of the journal."""


@dataclass(frozen=True)
class WorkerConfig:
    """Tunables of the worker.

    Attributes:
        max_runs: activations executed at once.
        lease_s: how long a claimed run stays ours without a heartbeat.
        poll_s: how often the database is polled for runnable runs and commands.
        until_idle: exit once no run is runnable.
        storage_retry_s: how soon a run paused by a storage problem (disk full, database
            locked) is first tried again; the wait doubles while the problem lasts.
        backup_every_s: how often the database is backed up (0: never; SQLite only).
        pools: named pools this worker serves besides its machine (runs placed
            ``pool:NAME``; see :mod:`desktop_agent.domain.placement`).
    """

    max_runs: int = 8
    lease_s: float = 30.0
    poll_s: float = 0.2
    until_idle: bool = False
    storage_retry_s: float = 10.0
    backup_every_s: float = backup.EVERY_S
    pools: tuple[str, ...] = ()


class Worker:
    """Executes runs from the database until stopped (or idle, with ``until_idle``).

    Args:
        store: the database.
        executor: the engine.
        config: tunables.
        clock: time source for leases and wake-ups.
        on_activation_end: called with a run id after each activation (tests, logs).
        notifier: told of each activation's end and of every poll (notifications).
        housekeeping: called with the time at every poll, after the claim (e.g. the model
            catalogue's reading when due; not at a first poll that claimed runs, so as not
            to slow their first steps); it must return at once, starting a thread for long
            work.
        holds: whether work outside runs is pending (economy-mode turns in batches): a
            worker asked to stop when idle keeps polling while it is.
    """

    def __init__(
        self,
        store: SqlStore,
        executor: RunExecutor,
        config: WorkerConfig | None = None,
        clock: Clock | None = None,
        on_activation_end: Callable[[str], None] | None = None,
        notifier: Notifier | None = None,
        housekeeping: Callable[[float], None] | None = None,
        holds: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.housekeeping = housekeeping
        self.holds = holds
        self.executor = executor
        self.config = config or WorkerConfig()
        self.clock = clock or SystemClock()
        # DESKTOP_AGENT_HOST names the machine when its host name does not (a container
        # image shared by several machines; the tests' "other machine").
        self.host = os.environ.get(HOST_ENV) or socket.gethostname()
        self.id = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stop_event = threading.Event()
        self._wakeup = threading.Event()
        self.on_activation_end = on_activation_end
        self.notifier = notifier
        self._in_flight: dict[str, tuple[Future[None], CancelToken, RunLease]] = {}
        self._pool = ThreadPoolExecutor(self.config.max_runs, thread_name_prefix="run")
        self._last_heartbeat = 0.0
        self._dead: list[str] = []
        self._last_dead_check = 0.0
        self.activations = 0
        self.polls = 0
        """Rounds of the poll loop finished so far (successful or not); read-only.

        Waiting for this to move on by a few shows that the worker looked again since,
        e.g. that it still takes no step for a paused run.
        """
        self._cooldown: dict[str, float] = {}
        self._last_trim = self.clock.now()
        self._storage_problem = ""
        self._storage_backoff: dict[str, float] = {}
        self._unrecorded: dict[str, dict[str, JSON]] = {}
        """Runs parked because an effect's outcome could not be written: its step and what
        stopped the write, carried by the storage resume to the recovery's message."""
        self._unreleased: set[str] = set()
        self._last_storage_retry = 0.0
        self._last_backup_check = 0.0
        self._backup_thread: threading.Thread | None = None
        self._watch: FileWatch | None = None
        self.gate = ClaimGate(None)
        """Skips the claim's query while nothing could have changed (see
        :mod:`desktop_agent.worker.quiet`); its probe is opened by :meth:`run`."""
        self.after_first_poll: Callable[[], None] | None = None
        """Called once, between the first poll and the second (on the poll loop's thread):
        what the worker needs soon but claiming does not (the scheduler's start, see
        :func:`desktop_agent.worker.main.scheduler_soon`), kept off the way from spawn to the
        first claim. Not called when the worker stops after its first poll."""
        self.vanished_message: str | None = None
        """Set when the database file was deleted or replaced under the worker (SQLite):
        what it told the user. The worker then stops; see :meth:`_on_vanished`."""

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Work until :meth:`stop` is called (or idle, with ``until_idle``)."""
        me = psutil.Process()
        # SQLite: the file must stay the one opened (checked at every poll); PostgreSQL
        # has no file.
        self._watch = FileWatch.open(self.store.db)
        if self._watch is not None:  # SQLite: commits by anyone are told by the file
            self.gate = ClaimGate(ChangeProbe.open(self._watch.path))
        while True:
            now = self.clock.now()
            try:
                self.store.register_worker(
                    WorkerInfo(self.id, self.host, os.getpid(), now, now), me.create_time()
                )
                break
            except StorageError as exc:  # the server went away since the store opened
                self._storage_failed(exc)
                if self.stop_event.is_set():
                    return
        self._storage_ok()
        log.info("worker %s started", self.id)
        try:
            while not self.stop_event.is_set():
                if self.polls and self.after_first_poll is not None:
                    started, self.after_first_poll = self.after_first_poll, None
                    started()
                try:
                    busy = self.tick()
                    self._storage_ok()
                except StorageError as exc:
                    # Locked by another process, disk full...: say so and keep trying.
                    self._storage_failed(exc)
                    busy = True
                self.polls += 1
                if self.vanished_message is not None:
                    break
                if self.config.until_idle and not busy and not (self.holds and self.holds()):
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
        if self._backup_thread is not None:
            self._backup_thread.join()
        self._reap()
        if self.notifier is not None:
            self.notifier.close()
        if self.vanished_message is None:  # else nothing more is written anywhere
            with contextlib.suppress(DesktopAgentError):
                self.store.stop_worker(self.id, self.clock.now())
        self.gate.close()
        if self._watch is not None:
            self._watch.close()
        if self.vanished_message is not None:
            # Let go of the old file now (its space is freed once nothing holds it); the
            # engines open nothing at the path again (the watch's guard stays).
            self.store.db.dispose()
        log.info("worker %s stopped after %d activations", self.id, self.activations)

    # ------------------------------------------------------------------ one poll

    def tick(self) -> bool:
        """One round of bookkeeping and dispatch; returns whether anything is going on."""
        if self._watch is not None and self._watch.check() is not None:
            self._on_vanished()
            return False
        now = self.clock.now()
        if now - self._last_heartbeat >= self.config.lease_s / 3:
            self._heartbeat(now)
        if now - self._last_dead_check >= 2.0 or not self._last_dead_check:
            self._dead = self._find_dead_workers(now)
            self._last_dead_check = now
        if self.notifier is not None:
            self.notifier.tick(now)
        self._reap()
        for run_id in sorted(self._unreleased):
            self.store.release_run(run_id, self.id)
            self._unreleased.discard(run_id)
        self._watch_commands()
        self._retry_storage_pauses(now)
        self._backup_if_due(now)
        claimed = self._claim(now)
        if now - self._last_trim >= memory.TRIM_EVERY_S:
            self._last_trim = now
            memory.release_free_memory()  # a worker lives for weeks: see desktop_agent.memory
        # Housekeeping follows the claim; at start, when the first poll claimed runs, it
        # waits for the next poll, so that its thread (the model catalogue's reading, which
        # loads the OS keyring: 0.1-0.3 s of CPU) does not slow their first steps.
        if self.housekeeping is not None and not (claimed and self.polls == 0):
            self.housekeeping(now)
        return bool(self._in_flight) or self.config.max_runs <= 0

    def _claim(self, now: float) -> int:
        """Claim what there is room for and start its activations; how many were claimed."""
        free = self.config.max_runs - len(self._in_flight)
        if free <= 0:
            return 0
        self._cooldown = {r: until for r, until in self._cooldown.items() if until > now}
        resting = list(self._cooldown)
        skip = [*self._in_flight, *resting]
        if not self.gate.must_query((tuple(self._dead), frozenset(skip)), now):
            return 0
        claims = self.store.claim_runnable(
            self.id,
            now,
            self.config.lease_s,
            self._dead,
            limit=free,
            skip=skip,
            host=self.host,
            pools=self.config.pools,
        )
        if claims:
            self.gate.claimed()
        else:
            self.gate.found_nothing(lambda: self.store.next_due(now))
        for run_id, claim in claims:
            lease = RunLease(
                self.store,
                run_id,
                claim,
                now + self.config.lease_s,
                self.config.lease_s,
                self.clock,
            )
            token = CancelToken(hinted=True)
            fut = self._pool.submit(self._activate, run_id, token, lease)
            fut.add_done_callback(lambda _f: self.nudge())
            self._in_flight[run_id] = (fut, token, lease)
        return len(claims)

    def _on_vanished(self) -> None:
        """The database file was deleted or replaced: stop, save what is left, say so.

        Nothing more is claimed; the runs held stop before their next model call or
        effect (their leases are marked lost), and no connection is opened to the path
        again (what is there now is not the file the worker opened). A model call already
        under way may still save its step to the old file, which the copy then holds.
        Once they stopped (or after :data:`VANISH_WAIT_S`), the journal is copied out of
        the old file and the message is left in the data folder
        (:mod:`desktop_agent.worker.vanish`); the worker stops.
        """
        if self.vanished_message is not None or self._watch is None:
            return
        found = self._watch.vanished
        assert found is not None
        held = dict(self._in_flight)
        log.error(
            "the database file %s was %s while this worker was running: stopping",
            self._watch.path,
            found,
        )
        for _fut, _token, lease in held.values():
            lease.mark_lost()
        self._watch.drop_old_sidecars()
        wait([fut for fut, _token, _lease in held.values()], timeout=VANISH_WAIT_S)

        def read_run(run_id: str) -> Run | None:
            try:  # through a connection still open on the old file, if one is free
                return self.store.get_run(run_id)
            except DesktopAgentError:
                return None

        message = save_what_is_left(self._watch, found, sorted(held), read_run)
        for fut, token, _lease in held.values():
            if not fut.done():
                token.cancel()  # an effect still going after the wait: interrupt it
        log.error("%s", message)
        self.vanished_message = message
        self.stop_event.set()

    def _heartbeat(self, now: float) -> None:
        """Say we are alive and extend the leases of the runs we execute (at their epochs).

        A run found claimed by another worker meanwhile (this process was frozen past its
        lease, say) is marked lost: its activation stops at its next write or effect.
        """
        leases = {run_id: lease for run_id, (_f, _t, lease) in self._in_flight.items()}
        held = {run_id: lease.lease.epoch for run_id, lease in leases.items()}
        lost = self.store.heartbeat(self.id, now, self.config.lease_s, held)
        self._last_heartbeat = now
        for run_id, lease in leases.items():
            if run_id in lost:
                if not lease.lost:
                    log.warning(
                        "run %s: another worker took it over (lease epoch %d lost); "
                        "its activation here stops without writing",
                        run_id,
                        lease.lease.epoch,
                    )
                lease.mark_lost()
            else:
                lease.extended(now + self.config.lease_s)

    def _activate(self, run_id: str, token: CancelToken, lease: RunLease) -> None:
        before = self._progress_mark(run_id)
        try:
            self._execute(run_id, token, lease)
        finally:
            stopping = self._watch is not None and self._watch.vanished is not None
            if not stopping and before is not None and self._progress_mark(run_id) == before:
                # Nothing moved: don't spin on a run whose commands cannot apply yet.
                log.warning("run %s made no progress; retrying it in 5 s", run_id)
                again = self.clock.now() + 5.0
                self._cooldown[run_id] = max(self._cooldown.get(run_id, 0.0), again)

    def _progress_mark(self, run_id: str) -> tuple[object, ...] | None:
        try:
            run = self.store.get_run(run_id)
            cmds = tuple(c.id for c in self.store.pending_commands(run_id))
        except DesktopAgentError:
            return None
        return (run.last_seq, run.status, run.updated_at, cmds)

    def _execute(self, run_id: str, token: CancelToken, lease: RunLease) -> None:
        try:
            self.executor.execute(run_id, token, lease)
            self._storage_backoff.pop(run_id, None)
            self._unrecorded.pop(run_id, None)
        except LeaseLost as exc:
            if self._watch is not None and self._watch.vanished is not None:
                log.warning("run %s: stopped: the database file is gone", run_id)
                return
            # The run belongs to another worker now: its journal and status stand.
            log.warning("run %s: activation dropped: %s", run_id, exc)
        except StorageError as exc:
            if self._watch is not None and self._watch.vanished is not None:
                log.warning("run %s: stopped: the database file is gone (%s)", run_id, exc)
                return
            log.error("run %s: storage problem: %s", run_id, exc)
            self._park_storage(run_id, exc, lease)
        except DesktopAgentError as exc:
            log.error("run %s: %s", run_id, exc)
            self._park(run_id, lease, RunStatus.NEEDS_ATTENTION, f"Error: {exc}")
        except OperationalError as exc:
            # A database failure some path did not turn into a StorageError (a server
            # restarting refuses connections): a storage pause, retried, not an error of
            # the run.
            problem = storage_error(exc, self.store.db.busy_ms)
            log.error("run %s: storage problem: %s", run_id, problem)
            self._park_storage(run_id, problem, lease)
        except Exception as exc:
            if backup.is_corruption(str(exc)) and self.store.db.settings.sqlite_path:
                message = backup.damaged_message(self.store.db.settings.sqlite_path, str(exc))
                log.error("run %s: %s", run_id, message)
                self._park(run_id, lease, RunStatus.NEEDS_ATTENTION, message)
                return
            log.exception("run %s: internal error", run_id)  # class and traceback: the log's
            why = plain_error(
                exc, empty="something failed without saying why (the worker's log has the details)"
            )
            self._park(
                run_id, lease, RunStatus.NEEDS_ATTENTION, f"Internal error: {why}; resume to retry"
            )

    def _park(self, run_id: str, lease: RunLease, status: RunStatus, message: str) -> None:
        """Set the run's status after an error, if the run is still ours (fenced)."""
        with contextlib.suppress(DesktopAgentError, LeaseLost):
            self.store.commit(
                run_id, patch=RunPatch(status=status, status_message=message), lease=lease.lease
            )

    # ------------------------------------------------------------------ storage faults

    def _park_storage(self, run_id: str, exc: StorageError, lease: RunLease) -> None:
        """Pause a run that storage stopped; :meth:`_retry_storage_pauses` resumes it.

        Nothing committed is lost: the failed commit rolled back, and the next activation
        recovers from the journal. If even this write fails, the run stays ``running``
        without a lease and is tried again after the usual cooldown.
        """
        # Each retry may repeat the step that was in flight (a model call costs money):
        # the wait doubles while the problem lasts, up to five minutes.
        previous = self._storage_backoff.get(run_id)
        delay = min(300.0, previous * 2) if previous else self.config.storage_retry_s
        self._storage_backoff[run_id] = delay
        retry_at = self.clock.now() + delay
        when = time.strftime("%H:%M:%S", time.localtime(retry_at))
        kept = "" if "nothing committed was lost" in str(exc) else " Nothing committed was lost."
        if isinstance(exc, UnrecordedOutcomeError):
            self._unrecorded[run_id] = {"seq": exc.seq, "problem": exc.code}
        lost = self._unrecorded.get(run_id)
        if lost is not None:
            kept += (
                f" The outcome of step {lost['seq']} could not be recorded: unless its effect "
                "can be safely repeated, the run will ask you whether it happened."
            )
        message = (
            f"Paused: {exc}.{kept} The run resumes by itself once the database can be "
            f"written again (next try at {when})."
        )
        try:
            self.store.park_for_storage(run_id, message, retry_at, lease.lease)
        except DesktopAgentError as again:
            # Not even that can be written (a really full disk): the run stays "running"
            # without a lease; it is tried again at retry_at, and readers see the disk
            # full (Client.storage_warning).
            log.error("run %s: cannot record the pause either: %s", run_id, again)
            self._cooldown[run_id] = retry_at

    def _retry_storage_pauses(self, now: float) -> None:
        """Queue a resume for runs paused by storage whose retry time came.

        The command row is itself the probe: it is written only if storage works again.
        """
        if now - self._last_storage_retry < 1.0:
            return
        self._last_storage_retry = now
        for run_id in self.store.storage_paused_due(now):
            payload: dict[str, JSON] = {"why": "storage works again"}
            if run_id in self._unrecorded:
                payload["storage"] = self._unrecorded[run_id]  # for the recovery's message
            self.store.add_command(run_id, CommandKind.RESUME, payload)
            log.info("run %s: retrying after the storage problem", run_id)

    def _storage_failed(self, exc: StorageError) -> None:
        if str(exc) != self._storage_problem:
            log.error("worker %s: storage problem, retrying: %s", self.id, exc)
            self._storage_problem = str(exc)
        self.stop_event.wait(min(1.0, self.config.storage_retry_s))

    def _storage_ok(self) -> None:
        if self._storage_problem:
            log.warning("worker %s: storage works again", self.id)
            self._storage_problem = ""

    def _backup_if_due(self, now: float) -> None:
        """Start a scheduled backup in a thread when one is due (checked once a minute)."""
        path = self.store.db.settings.sqlite_path
        every = self.config.backup_every_s
        if path is None or every <= 0 or now - self._last_backup_check < 60.0:
            return
        self._last_backup_check = now
        if self._backup_thread is not None and self._backup_thread.is_alive():
            return

        def work() -> None:
            try:
                made = backup.backup_if_due(path, every_s=every)
            except DesktopAgentError as exc:
                log.error("scheduled backup failed: %s", exc)
            else:
                if made is not None:
                    log.info("backup made: %s", made.path)

        self._backup_thread = threading.Thread(target=work, name="backup", daemon=True)
        self._backup_thread.start()

    def _reap(self) -> None:
        for run_id, (fut, _token, _lease) in list(self._in_flight.items()):
            if not fut.done():
                continue
            del self._in_flight[run_id]
            self.activations += 1
            try:
                if self.vanished_message is None:  # else nothing more is written
                    self.store.release_run(run_id, self.id)
            except DesktopAgentError:
                # Kept until the release is written: else our own heartbeat would renew a
                # lease nobody works on, and the run would never be claimed again.
                self._unreleased.add(run_id)
            if self.on_activation_end is not None:
                self.on_activation_end(run_id)
            if self.notifier is not None:
                self.notifier.on_activation_end(run_id)

    def _watch_commands(self) -> None:
        if not self._in_flight:
            return
        pending = self.store.pending_command_kinds()
        for run_id, (_fut, token, _lease) in self._in_flight.items():
            kinds = pending.get(run_id)
            if not kinds:
                continue
            token.notify_commands()
            if "cancel" in kinds and not token.cancelled:
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
