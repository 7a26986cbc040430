"""What the GUI and the CLI call: read state and write command rows through the database.

The client is the one door of the app and the command line into the system. They call
methods of :class:`~desktop_agent.client.api.Client` (and of
:class:`~desktop_agent.client.schedules.Scheduling`), the read models of
:mod:`~desktop_agent.client.views` and :mod:`~desktop_agent.client.scheduling_views`, the
checks of :mod:`~desktop_agent.client.checks` and the backups of
:mod:`~desktop_agent.client.backups`. What crosses that door is domain objects
(:mod:`desktop_agent.domain`) and plain, frozen view rows: never a store, a database, a
tool registry or a table row. The client's own state (``_store``, ``_db``, ``_decisions``,
``_tools``) is private to this package; nothing in ``gui`` or the CLI touches it.

What the client may depend on, and why:

- ``domain``: the language of every answer.
- ``persistence``, through its store and query classes (``SqlStore``, ``DecisionQueries``,
  ``ScheduleStore``, archives, backups): the database is the control plane, and the client
  only reads state and writes command rows there. It writes no SQL of its own and imports
  no SQLAlchemy: the run list, timeline and scheduling views read
  through ``persistence.readmodels`` and ``persistence.scheduling_readmodels``.
- ``config``, ``secrets`` and ``procs``: settings beside the database, and starting a
  background worker (:func:`desktop_agent.procs.spawn_worker`, the one place that does).
- The pure parts of the engine and the adapters that answer questions *before* a worker
  acts, so that the analyst hears "refused" at once rather than from a failed run:
  ``engine.edits`` (the very check the worker runs on an edited approval) with the port
  types it needs (``engine.ports``), ``tools.registry`` (tool names, versions, schemas and
  pre-run checks), ``llm.pricing`` (which models exist, what they cost) and
  ``scheduler.timing``/``scheduler.folders`` (is a cron expression valid, which files a
  folder holds now).

What it may not, and why:

- ``gui`` and the CLI modules: they sit on top of the client, never below it.
- ``worker``: the client starts a worker *process* (``procs``); it never runs execution
  code in the app's or the command's process.
- The engine's machinery (``engine.loop``, ``engine.control`` and the rest beyond
  ``edits``, ``ports`` and the plain data of ``builtin_tools``, whose descriptions the
  tool catalog shows), the model adapter (``llm.claude``) and the scheduler service
  (``scheduler.service``): running runs is the worker's job alone.

The import-linter contracts in ``pyproject.toml`` ("Client ...") hold this line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desktop_agent.client.api import Client, WorkerStatus

__all__ = ["Client", "WorkerStatus"]


def __getattr__(name: str) -> Any:
    """``Client`` and ``WorkerStatus``, imported on first use.

    Importing a light module of this package (``stepkinds``, ``messages``, ``logs``) then
    does not load the database, SQLAlchemy and the tools: the command line's help and
    parser need none of them.
    """
    if name in __all__:
        from desktop_agent.client import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
