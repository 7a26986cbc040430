"""Commands that queue work for a worker: starting one when none is alive, and saying so.

Commands only write rows; a worker carries them out. When none is alive a command starts one
detached (unless :data:`AUTOSTART_ENV` says not to) and its output says which happened. A
worker started so exits once it had nothing to do for :data:`DEFAULT_IDLE_EXIT_S` (or
:data:`IDLE_EXIT_ENV`), which the output says too: runs waiting for a timer further away
keep no process alive; the next worker started claims them once due.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.api import Client

AUTOSTART_ENV = "DESKTOP_AGENT_AUTOSTART_WORKER"
"""Set to 0 to keep commands from starting a background worker (a script, or a test, that
runs its own worker)."""


IDLE_EXIT_ENV = "DESKTOP_AGENT_WORKER_IDLE_EXIT"
"""How long a background worker a command started waits with nothing to do before it exits
(a duration: ``10m``, ``1h``, ``90s``)."""

DEFAULT_IDLE_EXIT_S = 600.0
"""Ten minutes: long enough to carry out a decision made soon after, short enough that a
worker nobody needs does not stay for days."""


def idle_exit_s() -> float:
    """The idle time of a background worker: :data:`IDLE_EXIT_ENV`, else the default.

    Raises:
        InvalidInputError: the variable is set to something that is not a duration.
    """
    from desktop_agent.domain.errors import InvalidInputError
    from desktop_agent.domain.units import parse_duration

    raw = os.environ.get(IDLE_EXIT_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_EXIT_S
    try:
        return parse_duration(raw)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{IDLE_EXIT_ENV}: {exc}") from None


@dataclass(frozen=True)
class WorkerNote:
    """Whether a command started a worker to carry it out, and what to say about it."""

    pid: int | None = None
    text: str = ""
    idle_exit_s: float | None = None
    """How long the worker started waits with nothing to do before it exits."""

    def suffix(self) -> str:
        """``; started a background worker (pid 123)``, or nothing."""
        return f"; {self.text}" if self.text else ""


def carry_out(client: Client, run_ids: Sequence[str]) -> WorkerNote:
    """Start a background worker when the runs have work for one and none is alive.

    Commands only write rows: without a worker nothing applies them. A live worker picks
    them up at its next poll (nothing to say); otherwise one is started detached, as
    ``run --detach`` does, and the output says so.
    """
    if not client.needs_worker(run_ids):
        return WorkerNote()
    return start_worker(client)


def worker_for_new_runs(client: Client) -> WorkerNote:
    """A worker for runs just queued: none to start when one is alive, else one started.

    As for decisions, :data:`AUTOSTART_ENV` set to 0 starts none, and the output says that
    no worker will carry the runs out until one is started.
    """
    if client.worker_status().alive:
        return WorkerNote()
    return start_worker(client)


def start_worker(client: Client) -> WorkerNote:
    """Start a detached worker (unless :data:`AUTOSTART_ENV` says not to)."""
    from desktop_agent.domain.units import format_duration

    how = "start one with `desktop-agent worker` or the app"
    if os.environ.get(AUTOSTART_ENV, "").strip().lower() in ("0", "no", "false", "off"):
        return WorkerNote(None, f"no worker is running to carry it out: {how}")
    idle = idle_exit_s()
    try:
        pid = int(client.spawn_worker(idle_exit_s=idle))
    except OSError as exc:
        return WorkerNote(
            None, f"no worker is running and none could be started ({exc.strerror or exc}): {how}"
        )
    return WorkerNote(
        pid,
        f"started a background worker (pid {pid}); it exits after {format_duration(idle)} "
        "with nothing to do",
        idle,
    )


def queued(out: Out, human: str, data: dict[str, Any], note: WorkerNote) -> None:
    """Say that a command was queued, and how it will be carried out."""
    out.emit(
        human + note.suffix(),
        {
            **data,
            "worker_started": note.pid,
            "worker": note.text,
            "worker_idle_exit_s": note.idle_exit_s,
        },
    )
