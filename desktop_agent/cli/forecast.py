"""``--estimate`` of ``run`` and ``batch start``: the forecast printed, nothing started.

The text gives the mode asked for (marked ``→``) and the other beside it, each as the
median and the 90th percentile of the cost and of one run's duration, and what the
figures come from; ``--json`` prints :func:`~desktop_agent.client.forecast.forecast_json`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, Out

if TYPE_CHECKING:
    from desktop_agent.client.api import Client
    from desktop_agent.client.forecast import Forecast
    from desktop_agent.client.schedules import RunOptions, Scheduling


def add_estimate_option(p: argparse.ArgumentParser, what: str = "the run") -> None:
    """``--estimate`` on a command that starts runs."""
    p.add_argument(
        "--estimate",
        action="store_true",
        help=f"print the forecast of {what}'s cost and duration (economy mode beside "
        "streamed) and start nothing",
    )


def _economy(args: argparse.Namespace, options: dict[str, Any]) -> bool | None:
    """The mode asked for: ``--economy`` when the command has it, else the options'."""
    given = options.pop("economy", None)
    if getattr(args, "economy", False):
        return True
    return None if given is None else bool(given)


def print_forecast(f: Forecast, out: Out) -> int:
    """Print ``f`` (text or ``--json``); nothing was started."""
    from desktop_agent.client.forecast import forecast_json, text_lines

    out.emit("\n".join([*text_lines(f), "Nothing was started."]), forecast_json(f))
    return EXIT_OK


def estimate_run(client: Client, args: argparse.Namespace, out: Out, **options: Any) -> int:
    """``run … --estimate``: ``options`` are those ``run`` would start the run with."""
    from desktop_agent.client.estimates import estimate_run as estimate

    economy = _economy(args, options)
    if economy is not None:
        options["economy"] = economy
    return print_forecast(estimate(client, **options), out)


def estimate_batch(
    sched: Scheduling, args: argparse.Namespace, options: RunOptions, out: Out
) -> int:
    """``batch start … --estimate``: all the items' runs, ``--concurrency`` at a time."""
    from desktop_agent.client.estimates import estimate_batch as estimate

    f = estimate(
        sched,
        args.goal,
        folder=args.folder,
        pattern=args.pattern,
        lines=args.lines,
        concurrency=args.concurrency,
        options=options,
        economy=True if getattr(args, "economy", False) else None,
    )
    return print_forecast(f, out)
