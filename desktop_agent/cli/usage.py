"""``desktop-agent usage [--since DATE] [--by GROUP] [--json]``: what runs spent.

Per day (local time), per model, per schedule and per batch, from the steps that spent
(see :mod:`desktop_agent.client.usage`), and this month so far against the monthly spend
cap when one is set.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from desktop_agent.cli.output import EXIT_OK, echo, model_label
from desktop_agent.domain.units import format_usd

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.usage import Total, Usage

AddParser = Callable[[str, str], argparse.ArgumentParser]

DEFAULT_SINCE = "last 30 days"


def add_parsers(add: AddParser) -> None:
    """Add the ``usage`` command to the main parser (``add(name, help)``)."""
    p = add("usage", "spend and tokens of all runs per day, model, schedule and batch")
    p.add_argument(
        "--since",
        metavar="DATE",
        default=DEFAULT_SINCE,
        help=f"today, yesterday, 'last 7 days', 2026-11-01 (default: {DEFAULT_SINCE})",
    )
    p.add_argument(
        "--by",
        choices=("day", "model", "schedule", "batch"),
        help="show only these totals (default: all of them)",
    )


def _line(label: str, t: Total) -> str:
    tokens = f"{t.input_tokens:,} in / {t.output_tokens:,} out"
    return f"  {label:30} {format_usd(t.cost_usd):>10}  {tokens:>28}  {len(t.runs):>5} run(s)"


def cmd_usage(args: argparse.Namespace, out: Out) -> int:
    """Print the totals (or ``--json``)."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.search import date_range

    since, _ = date_range(time.time(), since=args.since)
    assert since is not None
    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        usage = client.usage(since)
    finally:
        client.close()
    by = getattr(args, "by", None)
    if out.as_json:
        data = usage.to_json()
        if by:
            for other in ("day", "model", "schedule", "batch"):
                if other != by:
                    del data[f"by_{other}"]
        out.emit("", data)
        return EXIT_OK
    start = time.strftime("%Y-%m-%d", time.localtime(since))
    echo(f"since {start} (days in local time, {time.strftime('%Z')}):", file=out.stream)
    echo(_line("total", usage.total), file=out.stream)
    if usage.simulated.calls or usage.simulated.runs:
        echo(_line("simulated (demo, not counted)", usage.simulated), file=out.stream)
    groups = (
        ("day", "per day", usage.by_day, str),
        ("model", "per model", usage.by_model, model_label),
        ("schedule", "per schedule", usage.by_schedule, str),
        ("batch", "per batch", usage.by_batch, str),
    )
    for key, title, group, name in groups:
        if by and key != by:
            continue
        if group:
            echo(title + ":", file=out.stream)
            for key, total in group.items():
                echo(_line(name(key), total), file=out.stream)
    if not usage.total.calls and not usage.total.runs:
        echo("  nothing was spent in this period", file=out.stream)
    echo(_month_line(usage), file=out.stream)
    return EXIT_OK


def _month_line(usage: Usage) -> str:
    """This month so far, against the cap if one is set."""
    month = time.strftime("%B %Y", time.localtime(usage.month_start))
    spent = format_usd(usage.month)
    if usage.cap_usd is None:
        return f"{month} so far: {spent} (no monthly spend cap set)"
    share = usage.month / usage.cap_usd * 100 if usage.cap_usd > 0 else 100.0
    return f"{month} so far: {spent} of the {format_usd(usage.cap_usd)} monthly cap ({share:.0f}%)"


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"usage": cmd_usage}
