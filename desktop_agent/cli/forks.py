"""``desktop-agent fork RUN --at N [--note TEXT | --args JSON]``: a run from another's step N.

The fork shares the parent's steps 1..N (read, not copied) and goes on from there as a new
queued run (see :mod:`desktop_agent.client.forks`). ``rerun`` (in ``commands``) starts a
run again from nothing; both are listed by ``show`` of the original.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from desktop_agent.cli.output import EXIT_OK
from desktop_agent.cli.workers import worker_for_new_runs
from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add the ``fork`` command to the main parser (``add(name, help)``)."""
    p = add("fork", "a new run that shares a run's first N steps and goes on from there")
    p.add_argument("run")
    p.add_argument("--at", type=int, required=True, metavar="N", help="the last step shared")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--note", metavar="TEXT", help="a note to the agent, sent first")
    what.add_argument(
        "--args", metavar="JSON", help="edited arguments for the tool call at step N+1"
    )


def cmd_fork(args: argparse.Namespace, out: Out) -> int:
    """Make the fork; prints its id (a worker picks it up)."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.forks import fork
    from desktop_agent.client.shapes import run_json

    edited = None
    if args.args is not None:
        try:
            edited = json.loads(args.args)
        except ValueError:
            raise InvalidInputError(
                "--args must be a JSON object of the tool's arguments"
            ) from None
        if not isinstance(edited, dict):
            raise InvalidInputError("--args must be a JSON object of the tool's arguments")
    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        run = fork(client, args.run, args.at, note=args.note, edited_arguments=edited)
        note = worker_for_new_runs(client)
    finally:
        client.close()
    out.emit(
        f"{run.id}: forked from {run.forked_from} at step {run.forked_at_seq}{note.suffix()}",
        {**run_json(run), "worker_started": note.pid, "worker": note.text},
    )
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"fork": cmd_fork}
