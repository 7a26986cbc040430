"""``desktop-agent usage [--since DATE] [--by GROUP] [--json]``: what runs spent.

Per day (local time), per model, per schedule, per batch and per mode (streamed, economy,
archived runs apart), from the steps that spent (see :mod:`desktop_agent.client.usage`),
what the prompt cache saved, net, and this month so far against the monthly spend cap
when one is set.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from desktop_agent.cli.output import EXIT_OK, echo, model_label
from desktop_agent.domain.units import format_usd

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.usage import Total, Usage

GROUP_KEYS = ("day", "model", "agent", "schedule", "batch", "mode")
"""What ``--by`` takes (the client's ``GROUPS``, repeated so the parser imports no client)."""

AddParser = Callable[[str, str], argparse.ArgumentParser]

DEFAULT_SINCE = "last 30 days"


def add_parsers(add: AddParser) -> None:
    """Add the ``usage`` command to the main parser (``add(name, help)``)."""
    p = add("usage", "spend and tokens of all runs per day, model, schedule, batch and mode")
    p.add_argument(
        "--since",
        metavar="DATE",
        default=DEFAULT_SINCE,
        help=f"today, yesterday, 'last 7 days', 2026-11-01 (default: {DEFAULT_SINCE})",
    )
    p.add_argument(
        "--by",
        choices=GROUP_KEYS,
        help="show only these totals (default: all of them)",
    )
    p.add_argument(
        "--cap",
        metavar="USD|off",
        help="set the monthly spend cap (dollars, e.g. 50), or turn it off; workers apply it "
        "at their next check",
    )
    p.add_argument(
        "--resume-held",
        action="store_true",
        help="resume the runs the monthly cap holds (after raising it)",
    )


def _line(label: str, t: Total) -> str:
    tokens = f"{t.input_tokens:,} in / {t.output_tokens:,} out"
    return f"  {label:30} {format_usd(t.cost_usd):>10}  {tokens:>28}  {len(t.runs):>5} run(s)"


def _mode_line(mode: str, t: Total) -> str:
    """One mode's spend, its calls and what the cache saved on them (archived: runs only)."""
    from desktop_agent.client.usage import ARCHIVED, MODE_LABELS

    line = _line(MODE_LABELS[mode], t)
    if mode == ARCHIVED:
        return f"{line}  (calls and cache not kept)"
    return f"{line}  {t.calls:>5} call(s)  cache saved {_signed_usd(t.cache_saving_usd)}"


def _signed_usd(amount: float) -> str:
    return f"-{format_usd(-amount)}" if amount < 0 else format_usd(amount)


def cmd_usage(args: argparse.Namespace, out: Out) -> int:
    """Print the totals (or ``--json``)."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.search import date_range

    if getattr(args, "cap", None) is not None or getattr(args, "resume_held", False):
        return _cmd_cap(args, out)
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
            for other in GROUP_KEYS:
                if other != by:
                    del data[f"by_{other}"]
        out.emit("", data)
        return EXIT_OK
    _print_table(usage, since, by, out.stream)
    return EXIT_OK


def _foreign_only(group: dict[str, Total], by: str | None) -> dict[str, Total]:
    """The per-agent group, shown unasked only when another agent than ours spent."""
    if by == "agent" or any(name != "desktop-agent" for name in group):
        return group
    return {}


def _print_table(usage: Usage, since: float, by: str | None, stream: TextIO) -> None:
    """The totals as text: the headline lines, then each group (only ``by`` if given)."""
    start = time.strftime("%Y-%m-%d", time.localtime(since))
    echo(f"since {start} (days in local time, {time.strftime('%Z')}):", file=stream)
    echo(_line("total", usage.total), file=stream)
    if usage.simulated.calls or usage.simulated.runs:
        echo(_line("simulated (demo, not counted)", usage.simulated), file=stream)
    if usage.total.calls:
        echo(_saving_line(usage.total), file=stream)
    if not by or by == "mode":
        modes = [(m, t) for m, t in usage.by_mode.items() if t.calls or t.runs]
        if modes:
            echo("per mode:", file=stream)
            for mode, total in modes:
                echo(_mode_line(mode, total), file=stream)
    groups = (
        ("day", "per day", usage.by_day, str),
        ("model", "per model", usage.by_model, model_label),
        ("agent", "per agent", _foreign_only(usage.by_agent, by), str),
        ("schedule", "per schedule", usage.by_schedule, str),
        ("batch", "per batch", usage.by_batch, str),
    )
    for key, title, group, name in groups:
        if by and key != by:
            continue
        if group:
            echo(title + ":", file=stream)
            for label, total in group.items():
                echo(_line(name(label), total), file=stream)
    if not usage.total.calls and not usage.total.runs:
        echo("  nothing was spent in this period", file=stream)
    echo(_month_line(usage), file=stream)


def _saving_line(t: Total) -> str:
    """The period's net cache saving (negative: the writes' premium outweighed the reads)."""
    return (
        f"  {'cache saving (net)':30} {_signed_usd(t.cache_saving_usd):>10}  "
        "the cache reads' discount on input, less the cache writes' premium"
    )


def _cmd_cap(args: argparse.Namespace, out: Out) -> int:
    """``--cap`` and ``--resume-held``: set the cap, resume what it held, say where it stands."""
    from desktop_agent import config
    from desktop_agent.client import cap as caps
    from desktop_agent.client.api import Client

    cap = caps.parse_cap(args.cap) if args.cap is not None else None  # a bad value: no change
    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        if args.cap is not None:
            caps.set_cap(client, cap)
        resumed = caps.resume_held(client) if args.resume_held else []
        report = caps.report(client)
    finally:
        client.close()
    held = [r for r in report.held if r.id not in {x.id for x in resumed}]
    if out.as_json:
        out.emit(
            "",
            {
                "cap_usd": report.cap_usd,
                "month_spent_usd": round(report.spent_usd, 6),
                "resumed": [r.id for r in resumed],
                "held": [r.id for r in held],
            },
        )
        return EXIT_OK
    if args.cap is not None:
        said = f"set to {format_usd(report.cap_usd)}" if report.cap_usd else "turned off"
        echo(f"Monthly spend cap {said}.", file=out.stream)
    echo(_cap_line(report.spent_usd, report.cap_usd), file=out.stream)
    if args.resume_held:
        if resumed:
            echo(
                f"Resumed {len(resumed)} run(s) the cap held: each goes on if the cap leaves "
                "room for its next call, else waits again.",
                file=out.stream,
            )
            for run in resumed:
                echo(f"  {run.id[:8]}  {run.title or run.goal}", file=out.stream)
        else:
            echo("No run waits for the monthly cap.", file=out.stream)
    elif held:
        echo(
            f"{len(held)} run(s) wait for the cap; resume them with "
            "`desktop-agent usage --resume-held`:",
            file=out.stream,
        )
        for run in held:
            echo(f"  {run.id[:8]}  {run.title or run.goal}", file=out.stream)
    return EXIT_OK


def _cap_line(spent_usd: float, cap_usd: float | None) -> str:
    month = time.strftime("%B %Y", time.localtime())
    if cap_usd is None:
        return f"{month} so far: {format_usd(spent_usd)} (no monthly spend cap set)"
    share = spent_usd / cap_usd * 100 if cap_usd > 0 else 100.0
    return (
        f"{month} so far: {format_usd(spent_usd)} of the {format_usd(cap_usd)} monthly cap "
        f"({share:.0f}%)"
    )


def _month_line(usage: Usage) -> str:
    """This month so far, against the cap if one is set."""
    month = time.strftime("%B %Y", time.localtime(usage.month_start))
    spent = format_usd(usage.month)
    if usage.cap_usd is None:
        return f"{month} so far: {spent} (no monthly spend cap set)"
    share = usage.month / usage.cap_usd * 100 if usage.cap_usd > 0 else 100.0
    return f"{month} so far: {spent} of the {format_usd(usage.cap_usd)} monthly cap ({share:.0f}%)"


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"usage": cmd_usage}
