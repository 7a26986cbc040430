"""``desktop-agent serve [--port N]`` and ``desktop-agent api-token [show|rotate]``.

The API listens on 127.0.0.1 only (there is no option to listen elsewhere). ``--port 0``
takes a free port and prints it. The token is printed only by ``api-token show``;
``api-token rotate`` replaces it, and a running ``serve`` refuses the old one from the
moment the command returns.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from desktop_agent.cli import webhooks as cli_webhooks
from desktop_agent.cli.output import EXIT_OK, echo

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]

DEFAULT_PORT = 8765


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not from 0 to 65535")
    return value


def autostart_workers(environ: Mapping[str, str]) -> bool:
    """Whether the API starts a worker when a request gives runs work and none is alive.

    Not when :data:`~desktop_agent.cli.workers.AUTOSTART_ENV` says not to (0, no, false,
    off), as for every other command.
    """
    from desktop_agent.cli.workers import AUTOSTART_ENV

    return environ.get(AUTOSTART_ENV, "").strip().lower() not in ("0", "no", "false", "off")


def add_parsers(add: AddParser) -> None:
    """Add ``serve``, ``api-token`` and ``webhook-secret`` (:mod:`~desktop_agent.cli.webhooks`)."""
    p = add("serve", "the local HTTP API for scripts, on 127.0.0.1 (see docs/openapi.json)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help="0: any free port")
    p = add("api-token", "the HTTP API's bearer token (kept in the OS keyring)")
    p.add_argument("action", choices=["show", "rotate"])
    cli_webhooks.add_parsers(add)


def cmd_serve(args: argparse.Namespace, out: Out) -> int:
    """Serve until interrupted."""
    import socket

    import uvicorn

    from desktop_agent import config
    from desktop_agent.httpapi.app import create_app
    from desktop_agent.httpapi.auth import CurrentToken
    from desktop_agent.httpapi.server import server_config

    db_path = config.resolve_db_path(getattr(args, "db", None))
    port = args.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    tokens = CurrentToken(db_path)  # follows `api-token rotate` while serving
    app = create_app(db_path, tokens, start_workers=autostart_workers(os.environ))
    echo(
        f"listening on http://127.0.0.1:{port} (the token: desktop-agent api-token show)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.Server(server_config(app, port)).run()
    return EXIT_OK


def cmd_api_token(args: argparse.Namespace, out: Out) -> int:
    """Print or replace the token."""
    from desktop_agent import config
    from desktop_agent.httpapi.auth import make_token, token_for

    db_path = config.resolve_db_path(getattr(args, "db", None))
    token = make_token(db_path) if args.action == "rotate" else token_for(db_path)
    out.emit(token, {"token": token})
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "serve": cmd_serve,
    "api-token": cmd_api_token,
    **cli_webhooks.COMMANDS,
}
