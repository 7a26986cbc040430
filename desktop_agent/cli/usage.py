"""``desktop-agent usage [--since DATE] [--json]``: what runs spent.

Per day, per model, per schedule and per batch, from the steps that spent (see
:mod:`desktop_agent.client.usage`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from desktop_agent import config
from desktop_agent.cli.output import EXIT_OK, echo, model_label
from desktop_agent.domain.units import format_usd

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.usage import Total

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


def _line(label: str, t: Total) -> str:
    tokens = f"{t.input_tokens:,} in / {t.output_tokens:,} out"
    return f"  {label:30} {format_usd(t.cost_usd):>10}  {tokens:>28}  {len(t.runs):>5} run(s)"


def cmd_usage(args: argparse.Namespace, out: Out) -> int:
    """Print the totals (or ``--json``)."""
    from desktop_agent.client.api import Client
    from desktop_agent.client.search import date_range
    from desktop_agent.client.usage import usage_since

    since, _ = date_range(time.time(), since=args.since)
    assert since is not None
    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        usage = usage_since(client, since)
    finally:
        client.close()
    if out.as_json:
        out.emit("", usage.to_json())
        return EXIT_OK
    start = time.strftime("%Y-%m-%d", time.localtime(since))
    echo(f"since {start}:", file=out.stream)
    echo(_line("total", usage.total), file=out.stream)
    groups = (
        ("per day", usage.by_day, str),
        ("per model", usage.by_model, model_label),
        ("per schedule", usage.by_schedule, str),
        ("per batch", usage.by_batch, str),
    )
    for title, group, name in groups:
        if group:
            echo(title + ":", file=out.stream)
            for key, total in group.items():
                echo(_line(name(key), total), file=out.stream)
    if not usage.total.calls:
        echo("  nothing was spent in this period", file=out.stream)
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"usage": cmd_usage}
