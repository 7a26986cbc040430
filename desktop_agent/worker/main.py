"""A worker process's life: ``desktop-agent worker`` hands over to :func:`serve`.

This is the one door from the command line into execution: the CLI parses the options and
calls :func:`serve`; everything a worker is made of (store, engine, models, tools,
scheduler, notifier) is wired here and in :mod:`desktop_agent.worker.compose`. Workers are
started in the background by :func:`desktop_agent.procs.spawn_worker`, which runs that
same command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop_agent import config
from desktop_agent.domain.errors import SchemaTooNewError, StorageError
from desktop_agent.persistence.batches import BatchBook
from desktop_agent.persistence.store import SqlStore
from desktop_agent.tools.mcp import CATALOGUE_FILE, start_hub
from desktop_agent.worker.batches import BatchPump, pump_config
from desktop_agent.worker.catalogue import CatalogueKeeper
from desktop_agent.worker.claude_code import ClaudeCodeWatch
from desktop_agent.worker.clock import clock_from_env
from desktop_agent.worker.compose import ModelFactory, build_executor, open_store, tools_from_env
from desktop_agent.worker.crash import crash_hook_from_env
from desktop_agent.worker.notify import build_notifier
from desktop_agent.worker.tracing import start_tracing
from desktop_agent.worker.vanish import CODE as VANISHED
from desktop_agent.worker.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from desktop_agent.llm.batches import BatchApi
    from desktop_agent.scheduler.service import SchedulerService

log = logging.getLogger(__name__)

FIRST_RETRY_S = 0.5
LAST_RETRY_S = 30.0
"""How long a worker waits between two tries to reach its database server at start."""


class IdleExit:
    """When a worker started with an idle time (``worker --idle-exit``) has done its work.

    Given to the worker as what holds it (:attr:`Worker.holds`, asked at each poll that
    found nothing to do): it holds while turns wait in Message Batches, until the worker
    has had nothing to do for ``idle_s``, and then while a run is due to wake (or another
    worker's lease runs out) within ``idle_s`` or a schedule or folder watch is active (a
    worker must fire them). A run waking later than that keeps no worker: the next one
    started (the app, ``desktop-agent worker``, a command that needs one) claims it once due.

    Args:
        idle_s: how long the worker waits with nothing to do before it exits.
        polls: the worker's count of polls (a poll between two asks means it was busy).
        now: the worker's clock.
        batches: whether turns wait in Message Batches.
        due: the next time a run wakes or a lease runs out (None: none).
        standing: whether a schedule or folder watch is active.
    """

    def __init__(
        self,
        idle_s: float,
        polls: Callable[[], int],
        now: Callable[[], float],
        batches: Callable[[], bool],
        due: Callable[[float], float | None],
        standing: Callable[[], bool],
    ) -> None:
        self.idle_s = idle_s
        self._polls, self._now, self._batches = polls, now, batches
        self._due, self._standing = due, standing
        self._since: float | None = None
        self._last_poll = -1

    def __call__(self) -> bool:
        """Whether the worker keeps polling though it found nothing to do this time."""
        now, poll = self._now(), self._polls()
        if self._since is None or poll != self._last_poll + 1 or self._batches():
            self._since = now  # busy since the last ask (or batches wait): idle from now
        self._last_poll = poll
        if now - self._since < self.idle_s:
            return True
        due = self._due(now)
        if (due is not None and due - now <= self.idle_s) or self._standing():
            self._since = now  # something it must do soon: look again after another while
            return True
        log.info(
            "nothing to do for %.0f s%s: the worker exits",
            self.idle_s,
            "" if due is None else f"; the next run wakes in {due - now:.0f} s",
        )
        return False


def standing_work(store: SqlStore) -> Callable[[], bool]:
    """Whether a schedule or a folder watch is active (not paused) in ``store``'s database."""
    from desktop_agent.persistence.schedules import ScheduleStore

    schedules = ScheduleStore(store.db)

    def active() -> bool:
        return any(not s.paused for s in schedules.list_schedules()) or any(
            not w.paused for w in schedules.list_watches()
        )

    return active


def exit_when_idle(
    worker: Worker, idle_s: float | None, now: Callable[[], float], batches: Callable[[], bool]
) -> None:
    """Make ``worker`` exit after ``idle_s`` with nothing to do (see :class:`IdleExit`).

    None, or a worker already stopping when idle: nothing changes.
    """
    if idle_s is None or worker.config.until_idle:
        return
    worker.config = dataclasses.replace(worker.config, until_idle=True)
    worker.holds = IdleExit(
        idle_s,
        lambda: worker.polls,
        now,
        batches,
        worker.store.next_due,
        standing_work(worker.store),
    )


POOLS_ENV = "DESKTOP_AGENT_POOLS"
"""Comma-separated pools a worker serves (with ``desktop-agent worker --pool``)."""


def api_key() -> str | None:
    """The Anthropic API key now (``secrets.KeyStore``), for the catalogue's readings.

    Called in the catalogue keeper's thread: the keyring is imported there, not at start.
    """
    from desktop_agent.secrets import KeyStore

    return KeyStore().get()


def batch_api() -> BatchApi:
    """The Message Batches API for the batch pump, made by its first pass with work."""
    from desktop_agent.llm.batches import BatchApi

    return BatchApi(api_key)


def pools_from_env() -> tuple[str, ...]:
    """The pools named by ``DESKTOP_AGENT_POOLS``."""
    return tuple(p.strip() for p in os.environ.get(POOLS_ENV, "").split(",") if p.strip())


def open_store_waiting(
    db_path: Path,
    settings: config.Settings,
    stopping: threading.Event,
    announce: Callable[[str], None] | None = None,
) -> SqlStore | None:
    """Open the store; on a database server that cannot be reached, wait for it.

    A worker started while its PostgreSQL server restarts (or before the network is up)
    tries again, every 0.5 s at first and at most every 30 s, saying so each time, until
    the server answers or ``stopping`` is set (then None). A password fixed in the keyring
    meanwhile is read at the next try. What waiting cannot change is raised at once: a
    SQLite file that cannot be opened, a schema newer than this release, a missing driver.
    """
    delay = FIRST_RETRY_S
    while True:
        try:
            return open_store(db_path, settings)
        except StorageError as exc:
            lasting = isinstance(exc, SchemaTooNewError) or exc.code == "driver_missing"
            if lasting or config.database_url(db_path) is None:
                raise  # waiting would change nothing: this needs the user
            message = f"{exc}; trying again in {delay:g} s"
            if announce is not None:
                announce(message)
            else:
                log.warning("%s", message)
        if stopping.wait(delay):
            return None
        delay = min(LAST_RETRY_S, delay * 2)


@contextlib.contextmanager
def scheduler_soon(
    worker: Worker, settings: config.Settings, *, until_idle: bool
) -> Iterator[None]:
    """Attach and start the worker's scheduler service; stopped when the block ends.

    A worker that stops when idle starts it now: its start pumps batch items and queued
    firings into runs, which the worker's first poll must see (it would otherwise stop
    before they exist). Any other worker starts it between its first poll and its second
    (0.2 s later at most): a worker started to take over runs claims them without waiting
    for APScheduler's import and the scheduler's reading of the database. Wake-ups already
    due are claimed by the poll itself, and the scheduler's start reads every job from the
    database. Run the worker inside the block.
    """
    services: list[SchedulerService] = []

    def start() -> None:
        from desktop_agent.worker.scheduling import attach_scheduler  # and APScheduler

        service = attach_scheduler(worker, settings)
        services.append(service)
        service.start()

    if until_idle:
        start()
    else:
        worker.after_first_poll = start
    try:
        yield
    finally:
        for service in services:
            service.stop()


def serve(
    db_path: Path,
    *,
    until_idle: bool = False,
    max_runs: int | None = None,
    nice: int = 0,
    announce: Callable[[str], None] | None = None,
    pools: tuple[str, ...] = (),
    idle_exit_s: float | None = None,
) -> int:
    """Execute runs of ``db_path`` in this process until stopped; returns the activations.

    SIGTERM and SIGINT stop the worker cleanly (its runs are released for the next one).

    Args:
        db_path: the database to serve.
        until_idle: return when no run has work left.
        max_runs: runs executed at once (default: the settings' ``workers``).
        nice: lower this process's CPU priority by this much first (0-19).
        announce: told one line once the worker has its id (e.g. printed to stderr).
        pools: pools this worker serves, with those of ``DESKTOP_AGENT_POOLS`` (comma-
            separated): it claims runs placed on its machine, in these pools, or anywhere.
        idle_exit_s: return once there was nothing to do for this long (see
            :class:`IdleExit`; None: never, unless ``until_idle``).
    """
    if nice and hasattr(os, "nice"):  # not on Windows, where the worker runs at normal priority
        os.nice(nice)  # before any thread starts: every thread inherits it
    settings = config.Settings.load(db_path)
    stopping = threading.Event()
    worker: Worker | None = None

    def _stop(_sig: int, _frame: Any) -> None:
        stopping.set()
        if worker is not None:
            worker.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    store = open_store_waiting(db_path, settings, stopping, announce)
    if store is None:
        return 0  # stopped before the database answered
    clock = clock_from_env()  # real time unless a test moves it (DESKTOP_AGENT_CLOCK_OFFSET)
    store.now = clock.now
    tools = tools_from_env()
    hub = start_hub(settings.mcp_servers, db_path.parent / CATALOGUE_FILE)
    for tool in hub.tools() if hub is not None else []:
        tools.add(tool)
    keeper = CatalogueKeeper(store.db, api_key)
    keeper.load_stored()
    pump = BatchPump(
        BatchBook(store.db),
        batch_api,
        clock.now,
        pump_config(settings.batch_window_s, settings.batch_poll_s, settings.batch_doubt_s),
        crash_point=crash_hook_from_env(),
    )

    watch = ClaudeCodeWatch(store.db, settings, None if config.database_url(db_path) else db_path)

    def housekeeping(now: float) -> None:
        keeper.tick(now)
        pump.tick(now)
        watch.tick(now)

    worker = Worker(
        store,
        build_executor(
            store,
            settings,
            clock=clock,
            tools=tools,
            model_for=ModelFactory(settings, on_unknown_model=keeper.unknown_model),
        ),
        WorkerConfig(
            max_runs=max_runs or settings.workers,
            until_idle=until_idle,
            pools=(*pools, *pools_from_env()),
        ),
        clock=clock,
        notifier=build_notifier(
            store,
            webhook_url=settings.webhook_url,
            stall_minutes=settings.notify_stall_minutes,
            clock=clock,
        ),
        housekeeping=housekeeping,
        holds=pump.holding,
    )
    pump.on_woken = worker.nudge
    exit_when_idle(worker, idle_exit_s, clock.now, pump.holding)
    if stopping.is_set():
        worker.stop()
    if announce is not None:
        announce(f"worker {worker.id} on {db_path}")
    tracer = start_tracing(
        store, settings.otel_endpoint, settings.otel_include_content, db_path.parent
    )
    try:
        with scheduler_soon(worker, settings, until_idle=until_idle):
            worker.run()
    finally:
        if hub is not None:
            hub.close()  # stdio servers end with their sessions
        if tracer is not None:
            tracer.close()  # what is left is sent
        keeper.join()
        pump.join()
        watch.join()
    if worker.vanished_message is not None:
        # The worker said what happened and what to do (its log, the data folder's note):
        # exit with an error rather than as a worker that finished its work.
        raise StorageError(
            "the worker stopped because its database file was deleted or replaced "
            "(see the message above)",
            code=VANISHED,
        )
    return worker.activations
