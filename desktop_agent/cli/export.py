"""``desktop-agent export RUN [--format html|md] [--out FILE]``: a run as a document to hand on.

HTML (the default) is one self-contained page a colleague opens in a browser; Markdown is
for notes. The file goes to ``--out`` (``-`` for standard output), by default
``RUN_ID.html`` or ``RUN_ID.md`` in the current folder; an existing file is not replaced
unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from desktop_agent import config
from desktop_agent.cli.output import EXIT_OK
from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add the ``export`` command to the main parser (``add(name, help)``)."""
    p = add("export", "a run as one HTML page or Markdown, to hand on (never with the API key)")
    p.add_argument("run")
    p.add_argument("--format", choices=["html", "md"], default="html")
    p.add_argument("--out", metavar="FILE", help="where to write it (- for standard output)")
    p.add_argument("--force", action="store_true", help="replace an existing file")


def cmd_export(args: argparse.Namespace, out: Out) -> int:
    """Write the document."""
    from desktop_agent.client.api import Client
    from desktop_agent.client.export import export

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        run, text = export(client, args.run, args.format)
    finally:
        client.close()
    if args.out == "-":
        sys.stdout.write(text)
        return EXIT_OK
    target = Path(args.out or f"{run.id}.{args.format}").expanduser().absolute()
    if target.exists() and not args.force:
        raise InvalidInputError(f"{target} exists: give another --out, or --force to replace it")
    target.write_text(text, encoding="utf-8")
    out.emit(
        f"wrote {target} ({len(text.encode()):,} bytes)",
        {"path": str(target), "bytes": len(text.encode()), "run_id": run.id},
    )
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"export": cmd_export}
