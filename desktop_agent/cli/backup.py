"""Command line for backups: ``desktop-agent db backups|backup|restore``.

Part of the ``db`` group (:mod:`desktop_agent.cli.scheduling` registers it). These commands
never open the database through the usual path, so that they still work when it is
damaged: that is when ``restore`` is needed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

VERBS = ("backups", "backup", "restore")


def add_parsers(sub: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add ``backups``, ``backup`` and ``restore`` to the ``db`` group."""
    sub("backups", "list the automatic backups, newest first")
    sub("backup", "back the database up now")
    p = sub("restore", "put a backup in place of the database (stop the app and workers first)")
    p.add_argument(
        "backup", nargs="?", metavar="BACKUP", help="a name from `db backups` (default: newest)"
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def cmd(args: argparse.Namespace, out: Out) -> int:
    """Run ``db backups|backup|restore``."""
    from desktop_agent import config
    from desktop_agent.client import backups

    db_path = config.resolve_db_path(getattr(args, "db", None))
    if args.db_command == "backups":
        found = backups.backups(db_path)
        lines = [b.describe() for b in found] or ["no backups yet (the worker makes one a day)"]
        out.emit(
            "\n".join(lines),
            [
                {
                    "path": str(b.path),
                    "created_at": b.created_at,
                    "size": b.size,
                    "reason": b.reason,
                }
                for b in found
            ],
        )
        return 0
    if args.db_command == "backup":
        made = backups.make_backup(db_path)
        out.emit(f"backed up to {made.describe()}", {"path": str(made.path), "size": made.size})
        return 0
    return _restore(db_path, args, out)


def _restore(db_path: Path, args: argparse.Namespace, out: Out) -> int:
    from desktop_agent.client import backups

    backups.check_no_worker(db_path)
    chosen = Path(args.backup) if args.backup else None
    if not args.yes:
        target = args.backup or "the newest sound backup"
        if not sys.stdin.isatty():
            raise InvalidInputError(
                f"restoring replaces {db_path} with {target}: add --yes to confirm"
            )
        answer = input(f"Replace {db_path} with {target}? The current file is kept. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.emit("nothing restored", {"restored": None})
            return 0
    done = backups.restore(db_path, chosen)
    kept = f"; the previous file is kept as {done.damaged.name}" if done.damaged else ""
    found = done.reconciled
    ledger = backups.effect_ledger(db_path)
    out.emit(
        f"restored {done.backup.describe()}{kept}; {found.summary(ledger)}",
        {
            "restored": str(done.backup.path),
            "created_at": done.backup.created_at,
            "previous": str(done.damaged) if done.damaged else None,
            "backup_at": found.backup_at,
            "effect_ledger": found.ledger,
            "effect_ledger_path": str(ledger),
            "needs_attention": list(found.held),
            "effects_in_doubt": found.in_doubt,
            "effects_of_runs_not_in_backup": found.orphaned,
            "unreadable_ledger_lines": found.skipped_lines,
        },
    )
    return 0
