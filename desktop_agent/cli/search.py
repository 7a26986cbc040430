"""``desktop-agent search QUERY [filters]``: full-text search over every run's record.

One block per hit: ``run <id> #<seq> <kind> <tool> <time>``, the snippet with the match
highlighted (bold and reverse on a terminal, ``[…]`` otherwise) and the run's goal; then a
summary line. ``--json`` prints a list with stable keys. Bad filters are a one-line error
and exit 2, as everywhere else; no match is not an error.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo, json_line, terminal_safe
from desktop_agent.domain import RunStatus, StepKind

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.search import SearchFilters, SearchHit

AddParser = Callable[[str, str], argparse.ArgumentParser]

MAX_HITS = 10_000
"""The most hits ``--limit`` asks for."""

GOAL_CHARS = 120
"""The most characters of a goal shown under a hit."""

_BOLD_REVERSE, _RESET = "\x1b[1;7m", "\x1b[0m"

_KINDS = [str(k) for k in StepKind] + ["goal"]


def _amount(text: str) -> float:
    """An argparse type: dollars, zero or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of dollars") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite amount, zero or more")
    return value


def _hits_limit(text: str) -> int:
    """An argparse type: 1 to :data:`MAX_HITS`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_HITS:
        raise argparse.ArgumentTypeError(f"{value} is not from 1 to {MAX_HITS}")
    return value


def add_parsers(add: AddParser) -> None:
    """Add the ``search`` command to the main parser (``add(name, help)``)."""
    p = add("search", "find steps, goals and approvals by their words (archived runs too)")
    p.add_argument("query", help='words (all must match), "a phrase", or a prefix like report*')
    p.add_argument("--status", action="append", choices=[str(s) for s in RunStatus])
    p.add_argument("--model", action="append", metavar="MODEL", help="e.g. demo")
    p.add_argument("--tool", action="append", metavar="TOOL", help="e.g. web_fetch")
    p.add_argument("--kind", action="append", choices=_KINDS, help="step kind")
    p.add_argument("--since", metavar="DATE", help="today, yesterday, 'last 7 days', 2026-11-01")
    p.add_argument("--until", metavar="DATE", help="up to the end of this date")
    p.add_argument("--date", metavar="DATE[..DATE]", help="one day, or 2026-11-01..2026-11-20")
    p.add_argument("--cost-above", type=_amount, metavar="USD", help="runs that cost more")
    p.add_argument("--cost-below", type=_amount, metavar="USD", help="runs that cost less")
    p.add_argument("--schedule", metavar="ID", help="runs started by this schedule")
    p.add_argument("--batch", metavar="ID", help="runs of this batch")
    p.add_argument(
        "--archived",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only archived runs (--no-archived: only runs still in the database)",
    )
    p.add_argument("--limit", type=_hits_limit, default=50, metavar="N", help="default 50")


def filters_from(args: argparse.Namespace, now: float) -> SearchFilters:
    """The filters the command line asks for.

    Raises:
        InvalidInputError: a date cannot be read, or the range is empty.
    """
    from desktop_agent.client.search import SearchFilters, date_range

    since, until = date_range(now, since=args.since, until=args.until, on=args.date)
    return SearchFilters(
        statuses=tuple(args.status or ()),
        models=tuple(args.model or ()),
        tools=tuple(args.tool or ()),
        kinds=tuple(args.kind or ()),
        since=since,
        until=until,
        cost_above=args.cost_above,
        cost_below=args.cost_below,
        schedule_id=args.schedule,
        batch_id=args.batch,
        archived=args.archived,
    )


def hit_json(hit: SearchHit) -> dict[str, Any]:
    """A hit as plain data (stable keys)."""
    return {
        "run_id": hit.run_id,
        "seq": hit.seq,
        "kind": hit.kind,
        "tool": hit.tool,
        "time": hit.at,
        "snippet": hit.snippet,
        "spans": [list(s) for s in hit.spans],
        "archived": hit.archived,
        "goal": hit.goal,
        "run_status": hit.run_status,
    }


def highlighted(hit: SearchHit, tty: bool) -> str:
    """The snippet, made terminal-safe, with its matches marked."""
    opening, closing = (_BOLD_REVERSE, _RESET) if tty else ("[", "]")
    parts: list[str] = []
    last = 0
    for start, end in hit.spans:
        parts.append(terminal_safe(hit.snippet[last:start]))
        parts.append(opening + terminal_safe(hit.snippet[start:end]) + closing)
        last = end
    parts.append(terminal_safe(hit.snippet[last:]))
    return "".join(parts)


def summary(hits: list[SearchHit]) -> str:
    """``N matches in M runs (K archived)``."""
    run_ids = {h.run_id for h in hits}
    archived = {h.run_id for h in hits if h.archived}
    matches = "match" if len(hits) == 1 else "matches"
    in_runs = "run" if len(run_ids) == 1 else "runs"
    return f"{len(hits)} {matches} in {len(run_ids)} {in_runs} ({len(archived)} archived)"


def cmd_search(args: argparse.Namespace, out: Out) -> int:
    """Search every run's record and print the hits."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.stepkinds import clip

    filters = filters_from(args, time.time())
    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        hits = client.search(args.query, filters, args.limit)
    finally:
        client.close()
    if out.as_json:
        print(json_line([hit_json(h) for h in hits]), file=out.stream)
        return EXIT_OK
    if not hits:
        echo(
            "no matches; try fewer words, a prefix like report*, or fewer filters "
            "(archived runs are searched too)",
            file=out.stream,
        )
        return EXIT_OK
    tty = out.stream.isatty()
    for hit in hits:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.at))
        head = f"run {hit.run_id[:8]} #{hit.seq} {hit.kind}"
        head += f" {hit.tool}" if hit.tool else ""
        head += f" {when}" + (" (archived)" if hit.archived else "")
        echo(head, file=out.stream)
        print("  " + highlighted(hit, tty), file=out.stream)
        echo(f"  goal: {clip(hit.goal, GOAL_CHARS)}", file=out.stream)
        echo(file=out.stream)
    echo(summary(hits), file=out.stream)
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"search": cmd_search}
