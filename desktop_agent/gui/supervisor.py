"""Worker supervision: start a detached worker when none is alive, and restart it if it dies.

The worker is a separate process (no Qt, no stdio pipes) so that runs go on when the window
closes. The supervisor remembers the processes it started, so that "quit everything" stops
exactly those, by PID, and nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass

import psutil
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from desktop_agent.client.api import Client, WorkerStatus
from desktop_agent.client.checks import RecoveryReport, recovery_report
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.procs import process_alive

log = logging.getLogger(__name__)

WORKER_NICE = 10
"""The CPU priority the app starts its worker at, below its own (``nice`` 10).

On a machine whose cores are all busy, the window is served first: a worker churning
through many runs made the event loop wait for a core (the soak measured stalls of 60-130
ms at 100 runs a minute on 2 cores). The worker loses nothing on an idle machine, and its
leases are renewed every few seconds, far more often than a busy machine delays it."""


@dataclass(frozen=True)
class StartedWorker:
    """A worker process this app started."""

    pid: int
    create_time: float


class WorkerSupervisor(QObject):
    """Watches the worker heartbeat; starts and restarts a worker when allowed to.

    Args:
        client: the client (its ``worker_status`` and ``spawn_worker``).
        tasks: where the checks run.
        spawn: whether this app may start workers (tests run one in a thread instead).
        check_ms: how often the heartbeat is checked.
        grace_s: how long a freshly started worker gets to report in before another start.
        parent: owner.

    Signals:
        status_changed: the worker status was read (a :class:`WorkerStatus`).
        worker_started: a worker process was started (its pid).
        restart_failing: workers keep stopping right after start (a message).
        worker_lost: the worker that was alive at the previous check is gone; carries the
            :class:`RecoveryReport` read before any new worker could take its runs.
    """

    status_changed = Signal(object)
    worker_started = Signal(int)
    restart_failing = Signal(str)
    worker_lost = Signal(object)

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        *,
        spawn: bool = True,
        check_ms: int = 2000,
        grace_s: float = 20.0,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.client = client
        self.tasks = tasks
        self.spawn = spawn
        self.grace_s = grace_s
        self.started: list[StartedWorker] = []
        self.status: WorkerStatus | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(check_ms)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._checking = False
        self._last_spawn = 0.0
        self._quick_deaths = 0

    def start(self) -> None:
        """Check now and then periodically."""
        self._timer.start()
        self.check()

    def stop(self) -> None:
        """Stop checking (the worker keeps running)."""
        self._timer.stop()

    @Slot()
    def _on_timer_timeout(self) -> None:
        self.check()

    @Slot()
    def check(self) -> None:
        """Read the worker status now."""
        if self._checking:
            return
        self._checking = True
        started = list(self.started)
        was_alive = self.status is not None and self.status.alive
        self.tasks.submit(
            lambda: _check(self.client, started, was_alive),
            self._on_checked,
            self._on_check_failed,
        )

    def _on_check_failed(self, exc: Exception) -> None:
        self._checking = False
        log.warning("worker check failed: %s", exc)

    def _on_checked(self, checked: tuple[WorkerStatus, RecoveryReport | None]) -> None:
        self._checking = False
        status, lost = checked
        self.status = status
        self.status_changed.emit(status)
        if lost is not None:
            self.worker_lost.emit(lost)
        if status.alive or not self.spawn:
            if status.alive:
                self._quick_deaths = 0
            return
        wait = self.grace_s * (2 ** min(self._quick_deaths, 4))
        if time.monotonic() - self._last_spawn < wait:
            return
        if self._last_spawn:
            self._quick_deaths += 1
            if self._quick_deaths >= 3:
                self.restart_failing.emit(
                    "the worker keeps stopping; see worker.log in the logs folder "
                    "beside the database"
                )
        self._last_spawn = time.monotonic()
        self.tasks.submit(self._spawn, self._on_spawned, self._on_spawn_failed)

    def _spawn(self) -> StartedWorker:
        pid = self.client.spawn_worker(nice=WORKER_NICE)
        try:
            created = psutil.Process(pid).create_time()
        except psutil.Error:
            created = 0.0
        return StartedWorker(pid, created)

    def _on_spawned(self, worker: StartedWorker) -> None:
        self.started.append(worker)
        log.info("started worker pid %d", worker.pid)
        self.worker_started.emit(worker.pid)
        QTimer.singleShot(1500, self.check)

    def _on_spawn_failed(self, exc: Exception) -> None:
        log.error("could not start a worker: %s", exc)
        self.restart_failing.emit(f"could not start a worker: {exc}")

    def stop_started_workers(self) -> list[int]:
        """Ask every worker this app started (and still alive) to stop; returns their pids."""
        stopped = []
        for worker in self.started:
            if _same_process(worker):
                with contextlib.suppress(OSError):
                    os.kill(worker.pid, signal.SIGTERM)
                    stopped.append(worker.pid)
        return stopped


def _same_process(worker: StartedWorker) -> bool:
    """Whether ``worker.pid`` is still the process we started (PIDs get reused)."""
    return process_alive(worker.pid, worker.create_time, tolerance_s=1.0)


def _check(
    client: Client, started: list[StartedWorker], was_alive: bool
) -> tuple[WorkerStatus, RecoveryReport | None]:
    """The worker status, and what a worker that just died left behind.

    The report is read here, before ``_on_checked`` can start a new worker: once one runs,
    it takes the dead worker's leases and the interrupted runs no longer show as such.
    """
    for worker in started:  # reap our exited children so they do not linger as zombies
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(worker.pid, os.WNOHANG)
    status = client.worker_status()
    lost = recovery_report(client) if was_alive and not status.alive else None
    return status, lost
