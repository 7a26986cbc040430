"""``desktop-agent export RUN`` and ``desktop-agent import FILE``: hand a run on, bring one in.

``export --format html`` (the default) is one self-contained page a colleague opens in a
browser; ``md`` is for notes; ``bundle`` is a ``.tar.gz`` (the run's record and the files
it wrote) that ``desktop-agent import`` brings into another installation, read-only. The
file goes to ``--out`` (``-`` for standard output, HTML and Markdown only), by default
``RUN_ID.html``, ``RUN_ID.md`` or ``RUN_ID.tar.gz`` in the current folder; an existing
file is not replaced unless ``--force``. Nothing exported carries the API key.
``import claude-code`` is another import: Claude Code's sessions (see :mod:`.agents`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from desktop_agent.cli.agents import CLAUDE_CODE, add_import_options, cmd_import_claude_code
from desktop_agent.cli.output import EXIT_OK
from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add ``export`` and ``import`` to the main parser (``add(name, help)``)."""
    p = add("export", "a run as an HTML page, Markdown or a bundle to import elsewhere")
    p.add_argument("run")
    p.add_argument("--format", choices=["html", "md", "bundle"], default="html")
    p.add_argument("--out", metavar="FILE", help="where to write it (- for standard output)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p = add(
        "import",
        "bring a run exported as a bundle into this installation, read-only; "
        "`import claude-code` brings in Claude Code's sessions",
    )
    p.add_argument("file", metavar="FILE", help="a bundle, or the word claude-code")
    add_import_options(p)


def cmd_export(args: argparse.Namespace, out: Out) -> int:
    """Write the document."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.export import SUFFIXES, export, export_to

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        if args.out == "-":
            if args.format == "bundle":
                raise InvalidInputError("a bundle goes to a file: give --out FILE")
            _run, text = export(client, args.run, args.format)
            sys.stdout.write(text)
            return EXIT_OK
        run = client.run(args.run)
        target = Path(args.out or f"{run.id}{SUFFIXES[args.format]}").expanduser().absolute()
        if target.exists() and not args.force:
            raise InvalidInputError(
                f"{target} exists: give another --out, or --force to replace it"
            )
        if not target.parent.is_dir():
            raise InvalidInputError(f"no folder {target.parent}: create it or give another --out")
        run, size, note = export_to(client, run.id, args.format, target)
    finally:
        client.close()
    line = f"wrote {target} ({size:,} bytes)" + (f"; {note}" if note else "")
    out.emit(line, {"path": str(target), "bytes": size, "run_id": run.id, "note": note})
    return EXIT_OK


def cmd_import(args: argparse.Namespace, out: Out) -> int:
    """Bring the bundle in as an archived run (``claude-code``: Claude Code's sessions)."""
    from desktop_agent import config

    if args.file == CLAUDE_CODE:
        return cmd_import_claude_code(args, out)
    if args.project or args.since:
        raise InvalidInputError("--project and --since go with `import claude-code`")
    from desktop_agent.client.api import Client
    from desktop_agent.client.export import import_bundle

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        done = import_bundle(client, Path(args.file).expanduser().absolute())
    finally:
        client.close()
    line = (
        f"imported run {done.run_id} ({done.status}, read-only among the archived runs; "
        f"{done.files} file(s) in {done.files_dir}): `desktop-agent show {done.run_id}`"
    )
    out.emit(
        line,
        {
            "run_id": done.run_id,
            "title": done.title,
            "status": done.status,
            "archive": str(done.archive),
            "files_dir": str(done.files_dir),
            "files": done.files,
            "left_out": done.left_out,
        },
    )
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "export": cmd_export,
    "import": cmd_import,
}
