"""``desktop-agent managed list|follow``: Anthropic's hosted Managed Agents sessions as runs.

``managed list [--limit N]`` prints the organization's sessions the analyst's key can read,
newest first: id, status, model, cost so far, title, and the run that follows it if one
does. ``managed follow SESSION_ID [--max-cost USD] [--max-time DURATION] [--tag T]`` queues
the run that follows the session (a worker then reads its events as steps, routes its tool
confirmations to the inbox and interrupts it at the run's budget); a session is followed
once. Both take ``--json``. The API's address is the SDK's, or ``ANTHROPIC_BASE_URL``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo, open_client, usd
from desktop_agent.cli.workers import queued, worker_for_new_runs
from desktop_agent.domain.units import format_usd, parse_duration

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.managed import SessionRow

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add the ``managed`` command to the main parser (``add(name, help)``)."""
    p = add("managed", "Managed Agents sessions (hosted): list them, follow one as a run")
    actions = p.add_subparsers(dest="action", metavar="{list,follow}", required=True)
    listing = actions.add_parser("list", help="the sessions your API key can read")
    listing.add_argument("--limit", type=int, default=50, metavar="N", help="at most N (50)")
    follow = actions.add_parser("follow", help="follow a session as a run")
    follow.add_argument("session", metavar="SESSION_ID")
    follow.add_argument("--max-cost", type=usd, metavar="USD", help="the run's cost budget")
    follow.add_argument(
        "--max-time", metavar="DURATION", help="the session's running time budget (e.g. 2h)"
    )
    follow.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the run")
    for sub in (listing, follow):
        sub.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
        sub.add_argument("--db", default=argparse.SUPPRESS, help="database file")


def session_json(row: SessionRow) -> dict[str, Any]:
    """A listed session as plain data."""
    s = row.session
    return {
        "id": s.id,
        "title": s.title,
        "status": s.status,
        "agent": s.agent,
        "model": s.model,
        "created_at": s.created_at,
        "usage": s.usage.to_json(),
        "cost_usd": s.cost_usd,
        "budget_usd": s.budget_usd,
        "active_s": s.active_s,
        "run": row.run_id,
        "run_status": str(row.run_status) if row.run_status else None,
    }


def _line(row: SessionRow) -> str:
    s = row.session
    cost = format_usd(s.cost_usd) if s.cost_usd is not None else "-"
    followed = f"  followed by {row.run_id} ({row.run_status})" if row.run_id else ""
    return f"{s.id}  {s.status:<12} {s.model:<20} {cost:>8}  {s.name}{followed}"


def cmd_managed(args: argparse.Namespace, out: Out) -> int:
    """List the sessions, or follow one."""
    from desktop_agent.client.managed import ManagedSessions
    from desktop_agent.client.shapes import run_json

    client = open_client(args)
    sessions = ManagedSessions(client)
    try:
        if args.action == "list":
            rows = sessions.sessions(limit=max(1, args.limit))
            if out.as_json:
                out.emit("", [session_json(r) for r in rows])
            elif not rows:
                echo("no Managed Agents sessions", file=out.stream)
            for row in rows if not out.as_json else []:
                echo(_line(row), file=out.stream)
            return EXIT_OK
        seconds = parse_duration(args.max_time) if args.max_time else None
        run = sessions.follow(
            args.session, max_cost_usd=args.max_cost, max_time_s=seconds, tags=args.tag
        )
        human = f"{run.id}: following {args.session} ({run.title})"
        queued(out, human, run_json(run), worker_for_new_runs(client))
        return EXIT_OK
    finally:
        sessions.close()


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"managed": cmd_managed}
