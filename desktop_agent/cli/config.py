"""``desktop-agent config get [KEY] | set KEY VALUE | unset KEY``: the app's settings.

The settings the desktop app's Settings dialog edits (and its palette), kept in
``settings.json`` beside the database (:class:`desktop_agent.config.Settings`), read and
written here with the same checks (:data:`desktop_agent.config.EDITABLE`). A change is
saved as the dialog saves it: running workers read the monthly spend cap again before
their next model call, the rest when they next start (what each setting waits for is said
by ``config --help``, ``config get`` and every ``config set``). Secrets are not settings:
the API key, the HTTP API's token and the SMTP password live in the OS keyring, handled by
their own commands.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo

if TYPE_CHECKING:
    from pathlib import Path

    from desktop_agent.cli.output import Out
    from desktop_agent.config import SettingInfo, Settings

AddParser = Callable[[str, str], argparse.ArgumentParser]

APPLIES = {
    "at_once": "at once: running workers read it again before their next model call",
    "new_runs": "to runs started from now on (the desktop app and `serve` read it when they "
    "start; schedules, batches and watches keep the budgets they were made with)",
    "worker_start": "when a worker next starts: a running worker keeps the value it read",
    "app_start": "when the desktop app next starts",
}
"""When a change applies, per :attr:`SettingInfo.applies`."""

SECRETS = {
    "api_key": "`desktop-agent key set` (kept in the OS keyring)",
    "anthropic_api_key": "`desktop-agent key set` (kept in the OS keyring)",
    "key": "`desktop-agent key set` (kept in the OS keyring)",
    "api_token": "`desktop-agent api-token` (the HTTP API's token, kept in the OS keyring)",
    "token": "`desktop-agent api-token` (the HTTP API's token, kept in the OS keyring)",
    "smtp_password": "the OS keyring (service desktop-agent, user smtp-password)",
    "password": "the OS keyring (service desktop-agent, user smtp-password)",
    "mcp_servers": "`desktop-agent mcp` and the app's Settings, MCP servers",
}
"""Names an analyst may try that are not editable here, and where they are handled."""


def _names_by_when() -> str:
    from desktop_agent.config import EDITABLE

    lines = []
    for when, words in APPLIES.items():
        names = [i.name for i in EDITABLE if i.applies == when]
        lines.append(f"  {words}:\n    {', '.join(names)}")
    return "\n".join(lines)


NAMES_BY_WHEN = "<the settings, by when a change applies>"
"""Stands for :func:`_names_by_when` in the epilog until the help is shown."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Lists the settings only when ``config --help`` is shown.

    They come from the settings' model, which takes a good part of the CLI's start to
    import: building the parser (every command, ``--help``, a usage error) does without.
    """

    def add_text(self, text: str | None) -> None:
        if text is not None and NAMES_BY_WHEN in text:
            text = text.replace(NAMES_BY_WHEN, _names_by_when())
        super().add_text(text)


def add_parsers(add: AddParser, common: argparse.ArgumentParser) -> None:
    """Add the ``config`` command (``get``, ``set``, ``unset``) to the main parser."""
    parser = add("config", "the settings of the app's Settings dialog: get, set, unset")
    parser.formatter_class = _HelpFormatter
    parser.epilog = (
        "Settings are kept beside the database (each data folder has its own). "
        "A change applies\n"
        + NAMES_BY_WHEN
        + "\nThe desktop app reads the settings when it starts: restart it after a change "
        "here\n(its Settings dialog would save back the values it read).\n"
        "Values: numbers (dollars: 5, 12.50), yes/no, durations (90s, 30m, 2h, 3d); "
        "none (or 0)\nfor no limit where a setting allows it. Secrets are not settings: "
        "the API key is set\nwith `desktop-agent key set`, the HTTP API's token with "
        "`desktop-agent api-token`."
    )
    sub = parser.add_subparsers(dest="config_command", metavar="COMMAND", parser_class=type(parser))
    sub.required = True

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common])

    p = verb("get", "list the settings (value, meaning, default), or print one")
    p.add_argument("key", nargs="?", help="a setting's name (default: all of them)")
    p = verb("set", "change a setting (checked as the Settings dialog checks it)")
    p.add_argument("key")
    p.add_argument("value", help="the new value (- reads it from standard input)")
    p = verb("unset", "put a setting back to its default")
    p.add_argument("key")


def find(key: str) -> SettingInfo:
    """The editable setting ``key`` names (``-`` may stand for ``_``).

    Raises:
        InvalidInputError: a secret (with the command that handles it), or no such setting
            (with the close matches and every valid name).
    """
    from desktop_agent.config import EDITABLE, EDITABLE_BY_NAME
    from desktop_agent.domain.errors import InvalidInputError

    name = key.strip().lower().replace("-", "_")
    if name in EDITABLE_BY_NAME:
        return EDITABLE_BY_NAME[name]
    if name in SECRETS:
        raise InvalidInputError(
            f"{key} is not shown or set here: it is a secret, handled by {SECRETS[name]}",
            code="secret",
        )
    names = [i.name for i in EDITABLE]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    maybe = f"did you mean {' or '.join(close)}? " if close else ""
    other = set(_settings_class().model_fields) - set(names)
    why = (
        "it is not one the app's Settings dialog edits (edit settings.json beside the "
        "database for it)"
        if name in other
        else "no such setting"
    )
    raise InvalidInputError(
        f"{key}: {why}; {maybe}valid keys: {', '.join(names)}", code="unknown_setting"
    )


def _settings_class() -> type[Settings]:
    from desktop_agent.config import Settings

    return Settings


def _db(args: argparse.Namespace) -> Path:
    from desktop_agent import config

    return config.resolve_db_path(getattr(args, "db", None))


def describe(info: SettingInfo, value: Any) -> dict[str, Any]:
    """One setting as ``--json`` prints it."""
    from desktop_agent.config import Settings, expected, show_setting

    default = getattr(Settings(), info.name)
    return {
        "name": info.name,
        "value": value if info.kind != "url" else show_setting(info, value),
        "shown": show_setting(info, value),
        "default": default,
        "is_default": value == default,
        "meaning": info.meaning,
        "expected": expected(info),
        "applies": info.applies,
        "applies_words": APPLIES[info.applies],
    }


def cmd_config(args: argparse.Namespace, out: Out) -> int:
    """``config get|set|unset``."""
    if args.config_command == "get":
        return _get(args, out)
    return _set(args, out, unset=args.config_command == "unset")


def _get(args: argparse.Namespace, out: Out) -> int:
    from desktop_agent.config import EDITABLE, Settings, settings_path

    infos = [find(args.key)] if args.key else list(EDITABLE)
    db = _db(args)
    settings = Settings.load(db)
    rows = [describe(i, getattr(settings, i.name)) for i in infos]
    if out.as_json:
        out.emit("", rows[0] if args.key else rows)
        return EXIT_OK
    if args.key:
        row = rows[0]
        echo(f"{row['name']} = {row['shown']}" + ("  (default)" if row["is_default"] else ""))
        echo(f"  {row['meaning']}")
        echo(f"  expects {row['expected']}")
        echo(f"  applies {row['applies_words']}")
        return EXIT_OK
    echo(f"settings of {settings_path(db)} (* = default):")
    width = max(len(r["name"]) for r in rows)
    shown = max(len(r["shown"]) for r in rows)
    for row in rows:
        mark = "*" if row["is_default"] else " "
        echo(f"  {row['name']:<{width}}  {mark} {row['shown']:<{shown}}  {row['meaning']}")
    echo("`desktop-agent config --help` says when a change applies.")
    return EXIT_OK


def _set(args: argparse.Namespace, out: Out, *, unset: bool) -> int:
    from desktop_agent.config import Settings, parse_setting, show_setting

    info = find(args.key)
    if unset:
        new = getattr(Settings(), info.name)
    else:
        text = sys.stdin.readline().rstrip("\n") if args.value == "-" else args.value
        new = parse_setting(info, text)  # a bad value: nothing is read or written
    db = _db(args)
    _check_here(info, new, db)
    settings = Settings.load(db)
    old = getattr(settings, info.name)
    changed = old != new
    if changed:
        settings.updated({info.name: new}).save(db)
    before, after = show_setting(info, old), show_setting(info, new)
    when = APPLIES[info.applies]
    human = (
        f"{info.name}: {before} → {after}\napplies {when}"
        if changed
        else f"{info.name}: unchanged ({after})"
    )
    note = _note(info, db) if changed else ""
    if note:
        human += f"\n{note}"
    out.emit(
        human,
        {
            **describe(info, new),
            "old": old if info.kind != "url" else before,
            "changed": changed,
            "note": note,
        },
    )
    return EXIT_OK


def _check_here(info: SettingInfo, value: Any, db: Path) -> None:
    """What only this installation can tell: the models offered, the kind of database.

    Raises:
        InvalidInputError: the app would not offer this value here.
    """
    from desktop_agent import config
    from desktop_agent.domain.errors import InvalidInputError

    if info.name == "durability" and config.database_url(db) is not None:
        raise InvalidInputError(
            "durability is the SQLite file's: on PostgreSQL the server's own settings "
            "(fsync, synchronous_commit) decide how commits reach the disk"
        )
    if info.name == "default_model":
        from desktop_agent.client.views import model_choices

        client = _open_client(db)
        offered = [c.id for c in model_choices(client.models())]
        if value not in offered:
            close = difflib.get_close_matches(str(value), offered, n=2, cutoff=0.5)
            maybe = f"did you mean {' or '.join(close)}? " if close else ""
            raise InvalidInputError(
                f"default_model: {value!r} is not a model new runs can use; {maybe}"
                f"expected one of {', '.join(offered)} (`desktop-agent models`)"
            )


def _open_client(db: Path) -> Any:
    """A client on ``db`` that the command closes when it ends."""
    from desktop_agent.cli.output import open_client

    return open_client(argparse.Namespace(db=str(db)))


def _note(info: SettingInfo, db: Path) -> str:
    """What else the change needs: runs the cap held resumed, a running worker restarted."""
    if info.name == "monthly_spend_cap_usd":
        return "Runs the cap held wait until resumed: `desktop-agent usage --resume-held`."
    if info.applies != "worker_start":
        return ""
    status = _open_client(db).worker_status()
    if not status.alive or status.worker is None:
        return ""
    return (
        f"A worker is running (pid {status.worker.pid}): it keeps the old value until it restarts."
    )


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"config": cmd_config}
"""Entry points, merged into :data:`desktop_agent.cli.COMMANDS`."""
