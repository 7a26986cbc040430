"""Commands that queue work for a worker: starting one when none is alive, and saying so.

Commands only write rows; a worker carries them out. When none is alive a command starts one
detached (unless :data:`AUTOSTART_ENV` says not to) and its output says which happened.
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


@dataclass(frozen=True)
class WorkerNote:
    """Whether a command started a worker to carry it out, and what to say about it."""

    pid: int | None = None
    text: str = ""

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
    how = "start one with `desktop-agent worker` or the app"
    if os.environ.get(AUTOSTART_ENV, "").strip().lower() in ("0", "no", "false", "off"):
        return WorkerNote(None, f"no worker is running to carry it out: {how}")
    try:
        pid = int(client.spawn_worker())
    except OSError as exc:
        return WorkerNote(
            None, f"no worker is running and none could be started ({exc.strerror or exc}): {how}"
        )
    return WorkerNote(pid, f"started a background worker (pid {pid})")


def queued(out: Out, human: str, data: dict[str, Any], note: WorkerNote) -> None:
    """Say that a command was queued, and how it will be carried out."""
    out.emit(human + note.suffix(), {**data, "worker_started": note.pid, "worker": note.text})
