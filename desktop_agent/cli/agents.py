"""Your other Claude agents: ``import claude-code`` and ``hook claude-code``.

``desktop-agent import claude-code [--project DIR] [--since WHEN]`` reads the sessions
Claude Code keeps on disk and shows each as a run (``cc-<session id>``): new sessions are
added, grown ones get what is new, unchanged ones are left as they are. The word
``claude-code`` always means Claude Code: a bundle file of that name is imported with a
path (``desktop-agent import ./claude-code``).

``desktop-agent hook claude-code`` is Claude Code's ``PreToolUse`` hook: it reads the call
on standard input and, when the analyst's rules ask about it, waits for the decision in
desktop-agent's inbox and prints it for Claude Code. A call the rules let through ends the
hook at once with no output. ``--install`` prints the hook's entry for Claude Code's
settings, or with ``--project DIR`` merges it into ``DIR/.claude/settings.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo, json_line, open_client
from desktop_agent.domain.errors import DesktopAgentError, InvalidInputError

if TYPE_CHECKING:
    from desktop_agent.agents.claude_code import FoundSession
    from desktop_agent.cli.output import Out
    from desktop_agent.client.claude_code import HookCall, ImportSummary

AddParser = Callable[[str, str], argparse.ArgumentParser]

CLAUDE_CODE = "claude-code"

PACKAGE = "desktop_agent"
"""The module ``python -m`` runs when no ``desktop-agent`` program is found."""

HOOK_MARK = "hook claude-code"
"""What identifies desktop-agent's entry among a project's hooks (``--install`` replaces it)."""

WAIT_MARGIN_S = 30
"""How much longer than its wait Claude Code lets the hook run (``--install``)."""

_POLICIES = ("ask", "never")


def add_parsers(add: AddParser) -> None:
    """Add ``hook`` to the main parser (``import claude-code`` is ``import``'s, in export)."""
    p = add("hook", "answer a Claude Code hook: its tool calls decided in desktop-agent")
    p.add_argument("agent", choices=[CLAUDE_CODE], help="the agent whose hook this is")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long to wait for a decision (default 600)",
    )
    p.add_argument(
        "--ask", action="append", default=[], metavar="TOOL", help="always ask about TOOL"
    )
    p.add_argument(
        "--never", action="append", default=[], metavar="TOOL", help="deny TOOL every time"
    )
    p.add_argument(
        "--install",
        action="store_true",
        help="print the hook's entry for Claude Code's settings (with --project: add it there)",
    )
    p.add_argument("--project", metavar="DIR", help="with --install: the project to add it to")


def add_import_options(p: argparse.ArgumentParser) -> None:
    """``import``'s options for ``import claude-code``."""
    p.add_argument("--project", metavar="DIR", help="claude-code: only this project's sessions")
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="claude-code: only sessions changed since WHEN (today, 'last 7 days', 2026-11-01)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 24 * 3600:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 86400 seconds")
    return value


# --------------------------------------------------------------------------- import


def cmd_import_claude_code(args: argparse.Namespace, out: Out) -> int:
    """Import Claude Code's sessions (all projects, or ``--project``), showing progress."""
    from desktop_agent.client.claude_code import import_claude_code
    from desktop_agent.client.search import date_range

    if Path(CLAUDE_CODE).exists():
        echo(
            f"desktop-agent: note: importing Claude Code's sessions; to import the file "
            f"{CLAUDE_CODE} here as a bundle, give ./{CLAUDE_CODE}",
            file=sys.stderr,
        )
    since = date_range(time.time(), since=args.since)[0] if args.since else None
    project = Path(args.project).expanduser().absolute() if args.project else None
    client = open_client(args)
    started = time.monotonic()
    summary = import_claude_code(client, project, since, progress=_progress(out))
    if _progress_shown(out):
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    _report(summary, out, time.monotonic() - started)
    return EXIT_OK


def _progress_shown(out: Out) -> bool:
    return not out.as_json and sys.stderr.isatty()


def _progress(out: Out) -> Callable[[int, int, FoundSession], None] | None:
    """A line on the terminal that says which session is read (none when not a terminal)."""
    if not _progress_shown(out):
        return None

    def show(i: int, n: int, session: FoundSession) -> None:
        words = " ".join((session.title or session.summary or session.session_id).split())
        line = f"reading session {i + 1} of {n}: {words}"
        width = shutil.get_terminal_size((80, 20)).columns - 1
        print("\r\033[K" + line[:width], end="", file=sys.stderr, flush=True)

    return show


def _report(summary: ImportSummary, out: Out, took: float) -> None:
    new, grown, same = summary.count("new"), summary.count("grown"), summary.count("unchanged")
    data: dict[str, Any] = {
        "folder": str(summary.folder),
        "sessions": len(summary.sessions),
        "new": new,
        "grown": grown,
        "unchanged": same,
        "steps_added": summary.steps_added,
        "steps_completed": summary.steps_completed,
        "runs": [
            {"session_id": s.session_id, "run_id": s.run_id, "outcome": s.outcome,
             "steps_added": s.steps_added}
            for s in summary.sessions
        ],
        "failed": [{"session_id": sid, "error": why} for sid, why in summary.failed],
    }  # fmt: skip
    if out.as_json:
        out.emit("", data)
        return
    if not summary.sessions and not summary.failed:
        echo(f"no Claude Code sessions found in {summary.folder}")
        return
    echo(
        f"{len(summary.sessions)} Claude Code session(s) from {summary.folder} in {took:.1f}s: "
        f"{new} new, {grown} grown, {same} unchanged; {summary.steps_added:,} step(s) added"
    )
    for s in summary.sessions:
        if s.outcome != "unchanged":
            echo(f"  {s.run_id}  {s.outcome}, {s.steps_added} step(s) added")
    for sid, why in summary.failed:
        echo(f"  {sid}  not imported: {why}")
    changed = [s for s in summary.sessions if s.outcome != "unchanged"]
    if changed:
        echo(
            f"`desktop-agent show {changed[-1].run_id[:11]}` shows one, "
            "`desktop-agent runs` lists them"
        )


# --------------------------------------------------------------------------- hook


def cmd_hook(args: argparse.Namespace, out: Out) -> int:
    """Answer one ``PreToolUse`` call of Claude Code (or, with ``--install``, set the hook up)."""
    policies = {t: "ask" for t in args.ask} | {t: "never" for t in args.never}
    if args.install:
        return _install(args, out, policies)
    if args.project:
        raise InvalidInputError("--project goes with --install")
    from desktop_agent.client.claude_code import parse_hook_call

    try:
        call = parse_hook_call(sys.stdin.read())
    except InvalidInputError as exc:
        # Not a call to decide (a hook set up under another event): said on standard error
        # with exit 1, which Claude Code shows and goes on from (2 would block the call).
        echo(f"desktop-agent: {exc}", file=sys.stderr)
        return 1
    try:
        answer = _answer(args, call, policies)
    except KeyboardInterrupt:  # Claude Code stopped waiting: it reads no answer now
        return 130
    if answer is not None:
        print(json.dumps(answer), flush=True)
    return EXIT_OK


def _answer(
    args: argparse.Namespace, call: HookCall, policies: dict[str, str]
) -> dict[str, Any] | None:
    """The decision for Claude Code, or None; a failure asks Claude Code's own prompt."""
    from desktop_agent import config
    from desktop_agent.agents.claude_code_hooks import hook_output
    from desktop_agent.client.claude_code import DEFAULT_WAIT_S, answer_hook, hook_rule

    try:
        # The fast path: the rules read the settings only (no database, no SDK).
        settings = config.Settings.load(config.resolve_db_path(getattr(args, "db", None)))
        if hook_rule(settings, call, policies).action == "none":
            return None
        previous = signal.signal(signal.SIGTERM, _interrupted)
        try:
            client = open_client(args)
            return answer_hook(client, call, policies, wait_s=args.timeout or DEFAULT_WAIT_S)
        finally:
            signal.signal(signal.SIGTERM, previous)
    except (DesktopAgentError, OSError) as exc:
        # An answer Claude Code understands, never an exit code that would block the call.
        return hook_output("ask", f"desktop-agent could not decide this call: {exc}")


def _interrupted(signum: int, frame: object) -> None:
    """Claude Code ended the hook (it stopped waiting): unwind, expiring the approval."""
    raise KeyboardInterrupt


def _install(args: argparse.Namespace, out: Out, policies: dict[str, str]) -> int:
    from desktop_agent import config
    from desktop_agent.agents.claude_code import READ_ONLY_TOOLS
    from desktop_agent.client.claude_code import DEFAULT_WAIT_S

    wait = args.timeout or DEFAULT_WAIT_S
    command = [*_executable(), "--db", str(config.resolve_db_path(getattr(args, "db", None)))]
    command += ["hook", CLAUDE_CODE]
    if args.timeout:
        command += ["--timeout", f"{wait:g}"]
    for tool, policy in sorted(policies.items()):
        command += [f"--{policy}", tool]
    harmless = sorted(READ_ONLY_TOOLS - {t for t, p in policies.items() if p in _POLICIES})
    entry = {
        # Every tool but the ones that change nothing (their calls would only be let through).
        "matcher": "^(?!(" + "|".join(harmless) + ")$).*",
        "hooks": [
            {
                "type": "command",
                "command": shlex.join(command),
                "timeout": int(wait) + WAIT_MARGIN_S,
            }
        ],
    }
    if not args.project:
        out.emit(json.dumps({"hooks": {"PreToolUse": [entry]}}, indent=2), {"PreToolUse": entry})
        return EXIT_OK
    target = Path(args.project).expanduser().absolute() / ".claude" / "settings.json"
    _merge(target, entry)
    out.emit(
        f"added desktop-agent's PreToolUse hook to {target}", {"path": str(target), "entry": entry}
    )
    return EXIT_OK


def _executable() -> list[str]:
    """How Claude Code starts this program: the script that runs now, or the module."""
    script = Path(sys.argv[0])
    if script.name == "desktop-agent" and script.is_file():
        return [str(script.absolute())]
    found = shutil.which("desktop-agent")
    if found:
        return [str(Path(found).absolute())]
    if getattr(sys, "frozen", False):  # a bundle: sys.executable is desktop-agent itself
        return [sys.executable]
    return [sys.executable, "-m", PACKAGE]  # a hook's command, not a worker's (procs.py)


def _merge(target: Path, entry: dict[str, Any]) -> None:
    """Put ``entry`` among the file's PreToolUse hooks, replacing an earlier one of ours."""
    settings: dict[str, Any] = {}
    if target.exists():
        try:
            settings = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                f"{target} cannot be read as JSON ({exc}): nothing changed"
            ) from None
        if not isinstance(settings, dict):
            raise InvalidInputError(f"{target} is not a JSON object: nothing changed")
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInputError(f"{target}: 'hooks' is not an object: nothing changed")
    groups = [g for g in hooks.get("PreToolUse") or [] if not _ours(g)]
    hooks["PreToolUse"] = [*groups, entry]
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json_line(settings, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, target)


def _ours(group: object) -> bool:
    if not isinstance(group, dict):
        return False
    return any(
        isinstance(h, dict) and HOOK_MARK in str(h.get("command", ""))
        for h in group.get("hooks") or []
    )


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"hook": cmd_hook}
