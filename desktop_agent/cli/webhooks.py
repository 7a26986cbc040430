"""``desktop-agent webhook-secret [show|rotate]``: the key of the webhooks' signatures.

The worker signs every notification it posts to ``Settings.webhook_url`` (see
:mod:`desktop_agent.webhooks` and ``docs/webhooks.md``); the receiver needs this secret to
check the signatures. ``show`` prints it (making it on first need), ``rotate`` replaces it:
the worker signs its next post with the new one. The secret is kept in the OS keyring, else
in a private file beside the database, and a note on stderr says so and why.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from desktop_agent.cli.output import EXIT_OK, echo

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add ``webhook-secret``."""
    p = add("webhook-secret", "the key webhook receivers check signatures with (OS keyring)")
    p.add_argument("action", choices=["show", "rotate"])


def cmd_webhook_secret(args: argparse.Namespace, out: Out) -> int:
    """Print or replace the webhook secret of the data folder."""
    from desktop_agent import config
    from desktop_agent.domain.errors import KnownError
    from desktop_agent.secrets import rotate_webhook_secret, webhook_secret

    folder = config.resolve_db_path(getattr(args, "db", None)).parent
    try:
        found = rotate_webhook_secret(folder) if args.action == "rotate" else webhook_secret(folder)
    except OSError as exc:
        raise KnownError(f"cannot keep the webhook secret in {folder}: {exc.strerror}") from None
    if found.note:
        echo(f"note: {found.note}", file=sys.stderr)
    if args.action == "rotate":
        echo(
            "the worker signs its next post with this secret: give it to the receiver",
            file=sys.stderr,
        )
    out.emit(found.value, {"secret": found.value, "stored": found.stored, "note": found.note})
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "webhook-secret": cmd_webhook_secret,
}
