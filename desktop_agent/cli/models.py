"""``desktop-agent models [--json] [--refresh] [--all]``, and the run options of a model.

The table lists what each model takes (thinking types, effort levels, the default one
marked), its window, its largest answer, its status and its price, with where the list was
read and when on the line above. ``--refresh`` reads the catalogue from the API with the
analyst's key first (and stores it for the app and the workers).

The ``--effort``, ``--thinking`` and ``--economy``/``--streamed`` options of every command
that defines a run (``run``,
``rerun``, ``schedule add``, ``batch start``, ``watch add``) are declared here too, with
the notice a deprecated model gets after the run is made.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_FAILED, EXIT_OK, echo
from desktop_agent.domain.catalogue import EFFORT_LEVELS
from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.api import Client
    from desktop_agent.client.models import ModelList, ModelRow

AddParser = Callable[[str, str], argparse.ArgumentParser]

SOURCES = {
    "api": "read from the API",
    "database": "as a worker last read it from the API",
    "snapshot": "shipped with this version (not read from the API yet)",
}


# --------------------------------------------------------------------------- run options


def add_run_options(p: argparse.ArgumentParser, *, economy_default: bool = False) -> None:
    """The model options of a command that defines runs (effort, thinking, economy).

    ``economy_default``: the command is in economy mode unless ``--streamed`` (a batch).
    """
    p.add_argument(
        "--effort",
        metavar="LEVEL",
        help=f"{', '.join(EFFORT_LEVELS)}, or default (the model's; see `desktop-agent models`)",
    )
    p.add_argument(
        "--thinking",
        choices=("on", "off"),
        help="let the model think before it answers (default: off)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--economy",
        dest="economy",
        action="store_const",
        const=True,
        help="economy mode: each model turn waits in a Message Batch (half price; most "
        "batches end within an hour, all within 24)"
        + (" — the default here, where the model can batch" if economy_default else ""),
    )
    mode.add_argument(
        "--streamed",
        dest="economy",
        action="store_const",
        const=False,
        help="stream every model call (full price, answers at once)"
        + (" instead of the default economy mode" if economy_default else ""),
    )


def economy_of(args: argparse.Namespace) -> bool | None:
    """``--economy`` (True), ``--streamed`` (False), or None when neither was given."""
    value = getattr(args, "economy", None)
    return None if value is None else bool(value)


def effort_of(args: argparse.Namespace) -> str | None:
    """The ``--effort`` given: None when left out, "" for ``default``."""
    effort: str | None = getattr(args, "effort", None)
    if effort is None:
        return None
    effort = effort.strip().lower()
    return "" if effort == "default" else effort


def thinking_of(args: argparse.Namespace) -> int | None:
    """The ``thinking_budget`` of ``--thinking`` (None when left out)."""
    thinking: str | None = getattr(args, "thinking", None)
    if thinking is None:
        return None
    from desktop_agent.client.views import thinking_budget_for

    return thinking_budget_for(thinking == "on")


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """``effort``, ``thinking_budget`` and ``economy`` for ``Client.start_run``, if given."""
    options: dict[str, Any] = {}
    effort, thinking, economy = effort_of(args), thinking_of(args), economy_of(args)
    if effort is not None:
        options["effort"] = effort
    if thinking is not None:
        options["thinking_budget"] = thinking
    if economy is not None:
        options["economy"] = economy
    return options


def say_notice(client: Client) -> None:
    """The client's notice on the model of the run just made (deprecated), on stderr."""
    from desktop_agent.client.views import model_notice

    notice = model_notice(client)
    if notice:
        echo(f"desktop-agent: note: {notice}", file=sys.stderr)


# --------------------------------------------------------------------------- models


def add_parsers(add: AddParser) -> None:
    """Add the ``models`` command to the main parser (``add(name, help)``)."""
    p = add("models", "the models runs can use: efforts, thinking, window, status, price")
    p.add_argument(
        "--refresh", action="store_true", help="read the list from the API first (needs the key)"
    )
    p.add_argument("--all", action="store_true", help="list retired models too")


def _tokens(n: int | None) -> str:
    if not n:
        return "-"
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}"


def status_words(row: ModelRow) -> str:
    """``active``, ``deprecated, retires 2026-11-30 → use X`` or ``retired → use X``."""
    when = time.strftime("%Y-%m-%d", time.gmtime(row.retires_at)) if row.retires_at else ""
    instead = f" → use {row.replacement}" if row.replacement else ""
    if row.lifecycle == "deprecated":
        return f"deprecated{f', retires {when}' if when else ''}{instead}"
    if row.lifecycle == "retired":
        return f"retired{instead}"
    return row.lifecycle


def efforts_words(row: ModelRow) -> str:
    """The effort levels, the default one marked with ``*`` (``-`` for none)."""
    if not row.efforts:
        return "-"
    return ",".join(f"{e}*" if e == row.default_effort else e for e in row.efforts)


def thinking_words(row: ModelRow) -> str:
    """The thinking types it takes (``adaptive,disabled``; ``-`` for none)."""
    return ",".join(row.thinking) or "-"


COLUMNS = ("ID", "NAME", "STATUS", "CONTEXT", "MAX OUT", "THINKING", "EFFORTS", "PRICE")


def table(models: ModelList) -> list[str]:
    """The human output: the source line, the header and one line per model."""
    source = SOURCES.get(models.source, models.source)
    if models.read_at:
        source += f", read {time.strftime('%Y-%m-%d %H:%M', time.localtime(models.read_at))}"
    lines = [f"Models {source} (* the default effort)"]
    rows = [
        (
            r.id,
            r.name,
            status_words(r),
            _tokens(r.context_window),
            _tokens(r.max_output),
            thinking_words(r),
            efforts_words(r),
            r.price,
        )
        for r in models.rows
    ]
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(COLUMNS)]
    for cells in (COLUMNS, *rows):
        line = "  ".join(
            cell.rjust(w) if i in (3, 4) else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )
        lines.append(line.rstrip())
    return lines


def cmd_models(args: argparse.Namespace, out: Out) -> int:
    """Print the models (or ``--json``); a refresh that fails says why and exits with 1."""
    from desktop_agent import config
    from desktop_agent.client.api import Client

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        try:
            models = client.models(refresh=args.refresh, include_retired=args.all)
        except InvalidInputError as exc:
            if out.as_json:
                out.emit("", {"error": str(exc), "code": "refresh_failed"})
            else:
                echo(f"desktop-agent: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    finally:
        client.close()
    out.emit("\n".join(table(models)), models.to_json())
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"models": cmd_models}
