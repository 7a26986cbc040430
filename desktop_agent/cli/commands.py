"""Command line: the same client API as the GUI, human output or ``--json``.

Bad input gets a one-line error naming the problem and a non-zero exit, never a traceback.
Exit codes: 0 done, 1 the run failed or was cancelled, 2 bad input or environment,
3 the run waits for the analyst.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from desktop_agent.cli import agents as cli_agents
from desktop_agent.cli import annotations as cli_annotations
from desktop_agent.cli import compare as cli_compare
from desktop_agent.cli import config as cli_config
from desktop_agent.cli import desktop_entry
from desktop_agent.cli import export as cli_export
from desktop_agent.cli import forecast as cli_forecast
from desktop_agent.cli import forks as cli_forks
from desktop_agent.cli import inbox as cli_inbox
from desktop_agent.cli import managed as cli_managed
from desktop_agent.cli import mcp as cli_mcp
from desktop_agent.cli import models as cli_models
from desktop_agent.cli import scheduling as cli_scheduling
from desktop_agent.cli import search as cli_search
from desktop_agent.cli import serve as cli_serve
from desktop_agent.cli import usage as cli_usage
from desktop_agent.cli.output import (
    EXIT_OK,
    EXIT_USAGE,
    TOKENS_HELP,
    TOOLS_HELP,
    Out,
    batch_line,
    budget_words,
    clients_closed,
    echo,
    event_line,
    exit_code,
    follow,
    fork_lines,
    json_line,
    model_label,
    next_step_hint,
    open_client,
    status_label,
    step_line,
    token_budget,
    usd,
    waits_in_batch,
)
from desktop_agent.cli.workers import (
    DEFAULT_IDLE_EXIT_S,
    IDLE_EXIT_ENV,
    carry_out,
    queued,
    worker_for_new_runs,
)
from desktop_agent.client import logs
from desktop_agent.client.messages import note_delivery, plain_error
from desktop_agent.domain import (
    ApprovalState,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import DesktopAgentError, InvalidInputError, NotFoundError
from desktop_agent.domain.placement import describe, parse_placement
from desktop_agent.domain.units import format_duration, format_usd, parse_duration

if TYPE_CHECKING:
    from desktop_agent.client.api import Client


class CliError(DesktopAgentError):
    """A usage error found while parsing."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as everywhere else
        raise CliError(f"{message} (see `{self.prog} --help`)")


def _positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above zero")
    return value


MAX_LIST = 100_000
"""The most runs ``runs --limit`` lists."""


def _limit(text: str) -> int:
    """An argparse type: how many runs to list, 1 to :data:`MAX_LIST`."""
    value = _positive_int(text)
    if value > MAX_LIST:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_LIST}")
    return value


def _common() -> _Parser:
    p = _Parser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine output")
    p.add_argument("--db", default=argparse.SUPPRESS, help="database file (or DESKTOP_AGENT_DB)")
    return p


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    common = _common()
    parser = _Parser(
        prog="desktop-agent",
        description="Supervise long-running Claude research agents. No command: start the app.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common])

    p = add("run", "start a run; follows it until it ends or waits (or --detach)")
    p.add_argument("goal")
    p.add_argument("--model", help="demo or a Claude model id")
    p.add_argument(
        "--agent",
        choices=["agent-sdk"],
        help="agent-sdk: a Claude Agent SDK session (Claude Code's tools; needs "
        "pip install 'desktop-agent[agents]'); default: desktop-agent's own loop",
    )
    p.add_argument("--workspace", help="folder the agent works in")
    p.add_argument("--max-cost", type=usd, metavar="USD")
    p.add_argument("--max-steps", type=_positive_int, metavar="N")
    p.add_argument("--max-time", metavar="DURATION", help="e.g. 30m, 2h, 1d")
    p.add_argument("--max-tokens", type=token_budget, metavar="N", help=TOKENS_HELP)
    p.add_argument("--tools", help=TOOLS_HELP + " (default: the built-ins)")
    p.add_argument("--ask", action="append", default=[], metavar="TOOL", help="always ask for TOOL")
    cli_models.add_run_options(p)
    p.add_argument(
        "--placement",
        metavar="WHERE",
        help="which workers may run it: any, host:NAME or pool:NAME "
        "(default: on PostgreSQL this machine, unless the workspace is a shared path)",
    )
    p.add_argument(
        "--tag", action="append", default=[], metavar="TAG", help="tag the run (repeatable)"
    )
    p.add_argument(
        "--attach",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="copy FILE into the workspace's attachments/ and tell the agent of it "
        "(repeatable; the goal goes before it, or after --)",
    )
    p.add_argument("--detach", action="store_true", help="print the run id and return")
    p.add_argument("--yes", action="store_true", help="approve this run's requests as they come")
    p.add_argument(
        "--web-search",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="offer Anthropic's web search to this run, or not (default: the setting)",
    )
    p.add_argument(
        "--search-domain",
        action="append",
        default=[],
        metavar="DOMAIN",
        help="web search returns only DOMAIN (repeatable; not with --block-domain)",
    )
    p.add_argument(
        "--block-domain",
        action="append",
        default=[],
        metavar="DOMAIN",
        help="web search never returns DOMAIN (repeatable; not with --search-domain)",
    )
    p.add_argument(
        "--server-web-fetch",
        action="store_true",
        help="Anthropic's web fetch in the place of web_fetch (URLs already in the run only)",
    )
    p.add_argument(
        "--code-execution",
        action="store_true",
        help="Anthropic's code execution: attachments go into its container, its files "
        "into the workspace's outputs/",
    )
    cli_forecast.add_estimate_option(p)

    p = add("rerun", "start a run again, as it was started (goal, model, tools, budgets)")
    p.add_argument("run")
    p.add_argument("--goal", help="another goal")
    p.add_argument("--model", help="another model")
    p.add_argument("--max-cost", type=usd, metavar="USD", help="another cost limit")
    p.add_argument("--max-tokens", type=token_budget, metavar="N", help="another " + TOKENS_HELP)
    p.add_argument(
        "--tag", action="append", default=None, metavar="TAG", help="other tags (default: its own)"
    )
    cli_models.add_run_options(p)

    p = add("worker", "execute runs (leases, recovery, wake-ups)")
    p.add_argument("--until-idle", action="store_true", help="exit when no run is runnable")
    p.add_argument(
        "--idle-exit",
        metavar="DURATION",
        help="exit after this long with nothing to do (e.g. 10m): no run to execute, no "
        "turn in a Message Batch, no run waking and no lease running out within that time, "
        "no active schedule or watch; a run waking later is claimed by the next worker "
        f"started (the background workers commands start use {IDLE_EXIT_ENV}, default "
        f"{format_duration(DEFAULT_IDLE_EXIT_S)})",
    )
    p.add_argument("--max-runs", type=_positive_int, default=None, metavar="N")
    p.add_argument(
        "--pool", action="append", default=[], metavar="NAME", help="also serve runs of this pool"
    )
    p.add_argument(
        "--nice",
        type=int,
        choices=range(20),
        default=0,
        metavar="N",
        help="run at a lower CPU priority (0-19; the app starts its worker at 10)",
    )

    p = add("runs", "list runs")
    p.add_argument("--status", action="append", choices=[s.value for s in RunStatus])
    p.add_argument("--search")
    p.add_argument(
        "--tag", action="append", default=[], metavar="TAG", help="only runs with this tag (all)"
    )
    p.add_argument("--limit", type=_limit, default=50, help=f"at most {MAX_LIST} (default 50)")
    p.add_argument(
        "--archived", action="store_true", help="archived runs (imported ones too), read-only"
    )
    p.add_argument("--imported", action="store_true", help="only runs brought in with `import`")

    p = add("show", "a run's status and journal")
    p.add_argument("run")
    p.add_argument("--full", action="store_true", help="print step inputs and outputs")

    for name, help_ in (
        ("pause", "pause at the next step boundary"),
        ("resume", "resume a paused run, retry a failed one"),
        ("cancel", "cancel (a partial report is written)"),
        ("stop", "stop gracefully with a partial report"),
    ):
        p = add(name, help_)
        p.add_argument("run")

    p = add("steer", "send the agent a note")
    p.add_argument("run")
    p.add_argument("text")

    p = add("answer", "answer the agent's question")
    p.add_argument("run")
    p.add_argument("text")

    add("approvals", "pending approvals across runs")
    p = add("approve", "approve pending requests (several at once)")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--edit", metavar="JSON", help="replace the arguments (only these run)")
    p = add("reject", "reject pending requests; the reason goes to the agent")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--reason", required=True)

    p = add("budget", "show a run's spending, or extend its budget")
    p.add_argument("run")
    p.add_argument("--add-cost", type=float, default=0.0, metavar="USD")
    p.add_argument("--add-steps", type=int, default=0, metavar="N")
    p.add_argument("--add-time", default=None, metavar="DURATION")
    p.add_argument("--add-tokens", type=int, default=0, metavar="N")

    p = add("resolve", "decide about an effect in doubt after a crash")
    p.add_argument("run")
    p.add_argument("action", choices=["probe", "mark_done", "retry", "skip", "accept"])

    p = add("key", "the Anthropic API key (never on the command line)")
    p.add_argument("action", choices=["set", "status", "delete"])

    cli_scheduling.add_parsers(add, common)
    cli_config.add_parsers(add, common)
    cli_search.add_parsers(add)
    cli_compare.add_parsers(add)
    cli_mcp.add_parsers(add)
    cli_models.add_parsers(add)
    cli_usage.add_parsers(add)
    cli_inbox.add_parsers(add)
    cli_managed.add_parsers(add)
    cli_export.add_parsers(add)
    cli_agents.add_parsers(add)
    cli_forks.add_parsers(add)
    cli_annotations.add_parsers(add)
    cli_serve.add_parsers(add)
    desktop_entry.add_parser(add)
    add("gui", "start the desktop app")
    return parser


# --------------------------------------------------------------------------- output


def attachment_lines(run: Run) -> list[str]:
    """``  attached:  attachments/a.csv · 12.0 KB · sha256 …``, one line per attachment."""
    from desktop_agent.client.attachments import details

    return [
        f"  {'attached:' if i == 0 else '':10} {line}"
        for i, line in enumerate(details(run.spec.attachments))
    ]


def _client(args: argparse.Namespace) -> Client:
    return open_client(args)  # closed by main() when the command ends


def cmd_run(args: argparse.Namespace, out: Out) -> int:
    """Start a run and follow it."""
    from desktop_agent.client.shapes import run_json
    from desktop_agent.client.views import run_settings_words

    if args.detach and args.yes:
        # --yes is carried out by this command while it follows the run: detached, nobody
        # would approve anything, and the run would wait while the user thinks it goes on.
        raise InvalidInputError(
            "--yes approves requests while `run` follows the run, which --detach does not: "
            "leave out one of them (approve later with `desktop-agent approvals` and "
            "`desktop-agent approve`)"
        )
    client = _client(args)
    max_time = parse_duration(args.max_time) if args.max_time else None
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    if args.estimate:  # the forecast alone: nothing is started (the goal is not needed)
        return cli_forecast.estimate_run(
            client,
            args,
            out,
            model=args.model,
            max_cost_usd=args.max_cost,
            max_steps=args.max_steps,
            max_time_s=max_time,
            max_tokens_budget=args.max_tokens,
            tools=tools,
            approval_overrides={t: "ask" for t in args.ask},
            **cli_models.run_options(args),
        )
    run = client.start_run(
        args.goal,
        model=args.model,
        agent=args.agent,
        workspace=args.workspace,
        max_cost_usd=args.max_cost,
        max_steps=args.max_steps,
        max_time_s=max_time,
        max_tokens_budget=args.max_tokens,
        tools=tools,
        approval_overrides={t: "ask" for t in args.ask},
        placement=args.placement,
        tags=args.tag,
        attachments=args.attach,
        web_search=args.web_search,
        search_domains=args.search_domain,
        search_blocked_domains=args.block_domain,
        server_web_fetch=args.server_web_fetch,
        code_execution=args.code_execution,
        **cli_models.run_options(args),
    )
    cli_models.say_notice(client)
    if args.detach:
        queued(out, run.id, run_json(run), worker_for_new_runs(client))
        return EXIT_OK
    if not out.as_json:
        settings = run_settings_words(run)
        echo(
            f"Run {run.id} · {model_label(run.model)}"
            + (f" · {settings}" if settings else "")
            + f" · workspace {run.workspace}",
            file=sys.stderr,
        )
        for line in attachment_lines(run):
            echo(line, file=sys.stderr)
    pid = client.ensure_worker(until_idle=True)
    if pid is not None and not out.as_json:
        echo(
            f"A background worker (pid {pid}) runs it; it exits as soon as no run has work "
            "left (`desktop-agent worker` keeps one running).",
            file=sys.stderr,
        )
    final = follow(client, run.id, out, auto_approve=args.yes)
    return exit_code(final)


def cmd_worker(args: argparse.Namespace, out: Out) -> int:
    """Run a worker in the foreground (the command every background worker runs too)."""
    from desktop_agent import config
    from desktop_agent.worker.main import serve

    activations = serve(
        config.resolve_db_path(getattr(args, "db", None)),
        until_idle=args.until_idle,
        max_runs=args.max_runs,
        nice=args.nice,
        announce=None if out.as_json else lambda line: print(line, file=sys.stderr),
        pools=tuple(parse_placement(f"pool:{p}").removeprefix("pool:") for p in args.pool),
        idle_exit_s=parse_duration(args.idle_exit) if args.idle_exit else None,
    )
    out.emit(f"worker stopped after {activations} activations", {"activations": activations})
    return EXIT_OK


def _warn_storage(client: Client) -> None:
    warning = client.storage_warning()
    if warning:
        echo(f"desktop-agent: warning: {warning}", file=sys.stderr)


def cmd_runs(args: argparse.Namespace, out: Out) -> int:
    """List runs."""
    from desktop_agent.client.shapes import run_json
    from desktop_agent.client.stepkinds import clip

    client = _client(args)
    _warn_storage(client)
    statuses = [RunStatus(s) for s in args.status] if args.status else None
    if args.archived or args.imported:
        return _archived_runs(client, args, statuses, out)
    runs = client.runs(statuses, search=args.search, limit=args.limit, tags=args.tag)
    if out.as_json:
        out.emit("", [run_json(r) for r in runs])
        return EXIT_OK
    if not runs:
        echo(_no_runs_message(args.search, statuses, args.tag))
        return EXIT_OK
    echo(f"{'ID':<10}  {'STATUS':<22} {'STEPS':>5} {'COST':>9}  {'MODEL':<18} {'TAGS':<16} GOAL")
    for r in runs:
        echo(
            f"{r.id:<10}  {status_label(r):<22} {r.last_seq:>5} {format_usd(r.cost_usd):>9}  "
            f"{clip('demo (offline)' if r.is_demo else r.model, 18):<18} "
            f"{clip(','.join(r.tags) or '-', 16):<16} {clip(r.goal, 50)}"
        )
    return EXIT_OK


def _archived_runs(
    client: Client, args: argparse.Namespace, statuses: list[RunStatus] | None, out: Out
) -> int:
    """``runs --archived`` (imported runs too, marked) or ``runs --imported``."""
    from desktop_agent.client.archived import archived_runs
    from desktop_agent.client.shapes import run_json
    from desktop_agent.client.stepkinds import clip

    listed = archived_runs(
        client,
        imported_only=args.imported,
        statuses=statuses,
        search=args.search,
        limit=args.limit,
    )
    if out.as_json:
        out.emit(
            "", [{**run_json(a.run), "archived": True, "imported": a.imported} for a in listed]
        )
        return EXIT_OK
    if not listed:
        if args.search is not None or statuses:
            what = "imported" if args.imported else "archived"
            echo(_no_runs_message(args.search, statuses).replace("no run ", f"no {what} run ", 1))
        elif args.imported:
            echo("no imported runs: `desktop-agent import FILE` brings in an exported bundle")
        else:
            echo(
                "no archived runs: `desktop-agent db archive --older-than 30d` archives the "
                "runs that finished before then"
            )
        return EXIT_OK
    echo(f"{'ID':<10}  {'STATUS':<22} {'STEPS':>5} {'COST':>9}  {'MODEL':<18} {'TAGS':<16} GOAL")
    for a in listed:
        r = a.run
        status = f"{status_label(r)} ({'imported' if a.imported else 'archived'})"
        echo(
            f"{r.id:<10}  {status:<22} {r.last_seq:>5} {format_usd(r.cost_usd):>9}  "
            f"{clip('demo (offline)' if r.is_demo else r.model, 18):<18} "
            f"{clip(','.join(r.tags) or '-', 16):<16} {clip(r.goal, 50)}"
        )
    return EXIT_OK


def _no_runs_message(
    search: str | None, statuses: Sequence[RunStatus] | None, tags: Sequence[str] = ()
) -> str:
    """What an empty run list means: nothing matched the filters, or no run exists."""
    if search is None and not statuses and not tags:
        return "no runs yet: `desktop-agent run GOAL --model demo` starts one"
    what = []
    if statuses:
        what.append("with status " + " or ".join(str(s) for s in statuses))
    if search is not None:
        what.append(f"matching the search {search!r}")
    if tags:
        what.append("tagged " + " and ".join(t.lower() for t in tags))
    return f"no run {' and '.join(what)}"


def cmd_show(args: argparse.Namespace, out: Out) -> int:
    """Show a run and its journal."""
    from desktop_agent.cli.annotations import print_steps
    from desktop_agent.cli.output import print_report
    from desktop_agent.client.annotations import note_json, step_notes
    from desktop_agent.client.economy import batch_wait
    from desktop_agent.client.forecast import forecast_json, kept_words, run_forecast
    from desktop_agent.client.report import report_json, run_report
    from desktop_agent.client.shapes import batch_wait_json, event_json, run_json, step_json
    from desktop_agent.client.views import cache_share, run_settings_words

    client = _client(args)
    _warn_storage(client)
    try:
        run = client.run(args.run)
    except NotFoundError:
        return _show_archived(client, args.run, out, full=args.full)
    steps = client.steps(run.id)
    events = client.events(run.id)
    notes = step_notes(client, run.id)
    kept = run_forecast(client, run.id)
    in_batch = waits_in_batch(run)
    wait = batch_wait(client, run.id) if in_batch else None
    hint = next_step_hint(run, client)
    report = run_report(client, run.id)
    if out.as_json:
        out.emit(
            "",
            {
                **run_json(run),
                "hint": hint,
                "tools": list(run.spec.tool_names),
                "batch": batch_wait_json(wait),
                "forecast": forecast_json(kept) if kept else None,
                "journal": [step_json(s) for s in steps],
                "events": [event_json(e) for e in events],
                "notes": [note_json(n) for n in notes],
                "report": report_json(report),
            },
        )
        return EXIT_OK
    u = run.usage
    b = run.budget
    echo(f"Run {run.id}  {status_label(run)}")
    echo(f"  goal:      {run.goal}")
    settings = run_settings_words(run)
    echo(f"  model:     {model_label(run.model)}" + (f" · {settings}" if settings else ""))
    echo(f"  workspace: {run.workspace}")
    echo(f"  tools:     {', '.join(run.spec.tool_names) or 'none'}")
    if run.tags:
        echo(f"  tags:      {', '.join(run.tags)}")
    for line in attachment_lines(run):
        echo(line)
    if run.placement != "any":
        echo(f"  placement: {run.placement} (only {describe(run.placement)} run it)")
    if run.status_message:
        echo(f"  message:   {run.status_message}")
    if in_batch:
        echo(f"  batch:     {batch_line(wait, time.time())}")
    echo(
        f"  cost:      {format_usd(run.cost_usd)}"
        + (f" of {format_usd(b.max_cost_usd)}" if b.max_cost_usd is not None else "")
        + f"  · tokens in {u.input_tokens}, out {u.output_tokens}, "
        f"cache write {u.cache_write_tokens}, "
        f"cache read {u.cache_read_tokens}"
        + (f" ({_cache_share_words(u)})" if cache_share(u) is not None else "")
    )
    echo(
        f"  worked:    {format_duration(run.active_seconds)}"
        + (f" of {format_duration(b.max_time_s)}" if b.max_time_s else "")
    )
    echo(f"  budget:    {budget_words(b)}")
    if kept is not None:
        echo(f"  forecast:  {kept_words(kept, run)}")
    if hint:
        echo(f"  next:      {hint}")
    for line in fork_lines(run, client.forks_of(run.id)):
        echo(line)
    for event in events:
        echo(event_line(event))
    print()
    print_steps(steps, notes, full=args.full)
    print_report(report)
    return EXIT_OK


def _cache_share_words(usage: Usage) -> str:
    """``87% of the prompt read from the cache``."""
    from desktop_agent.client.views import cache_share

    share = cache_share(usage)
    return "" if share is None else f"{share:.0%} of the prompt read from the cache"


def cmd_rerun(args: argparse.Namespace, out: Out) -> int:
    """Start a run again; prints the new run's id (a worker picks it up)."""
    from desktop_agent.client.shapes import run_json

    client = _client(args)
    changed = cli_models.run_options(args)
    run = client.run_again(
        args.run,
        goal=args.goal,
        model=args.model,
        max_cost_usd=args.max_cost,
        max_tokens_budget=args.max_tokens,
        effort=changed.get("effort"),
        thinking_budget=changed.get("thinking_budget"),
        economy=changed.get("economy"),
        tags=args.tag,
    )
    cli_models.say_notice(client)
    queued(out, run.id, run_json(run), worker_for_new_runs(client))
    return EXIT_OK


def _show_archived(client: Client, run_id: str, out: Out, *, full: bool = False) -> int:
    """``show`` of a run that is only in an archive: what it recorded, read-only.

    An archived run can be brought back (``db unarchive``); an imported one never enters
    this journal, so its hints name only what reads it.

    Raises:
        NotFoundError: no archive holds it either.
    """
    from desktop_agent.client.archived import read_archived
    from desktop_agent.client.shapes import step_json
    from desktop_agent.client.views import run_settings_words

    found = read_archived(client, run_id)
    if found is None:
        raise NotFoundError(f"no run {run_id!r} (archived runs included); `desktop-agent runs`")
    run = found.run
    hints = archived_hints(run.id, imported=found.imported, full=full)
    if out.as_json:
        out.emit("", {**found.record, "archived_in": str(found.path), "hints": hints})
        return EXIT_OK
    where = (
        f"imported{f' from {found.imported_from}' if found.imported_from else ''}, read-only; "
        f"kept in {found.path}"
        if found.imported
        else f"archived in {found.path}"
    )
    echo(f"Run {run.id}  {status_label(run)} ({where})")
    echo(f"  goal:      {run.goal}")
    settings = run_settings_words(run)
    echo(f"  model:     {model_label(run.model)}" + (f" · {settings}" if settings else ""))
    echo(f"  workspace: {run.workspace}")
    if run.status_message:
        echo(f"  message:   {run.status_message}")
    echo(f"  cost:      {format_usd(run.cost_usd)} · {len(found.steps)} steps")
    echo(f"  tools:     {', '.join(run.spec.tool_names) or 'none'}")
    if found.imported:
        echo("  read-only: it cannot be resumed, changed or run again here")
    for hint in hints:
        echo(f"  next:      {hint}")
    print()
    for step in found.steps:
        echo(step_line(step))
        if full:
            echo(json_line(step_json(step), indent=2))
    if full and found.report:
        print()
        echo("Report:")
        echo(found.report)
    return EXIT_OK


def archived_hints(run_id: str, *, imported: bool, full: bool) -> list[str]:
    """What ``show`` suggests for an archived or imported run: only commands that work."""
    hints = [] if full else [f"`desktop-agent show {run_id} --full` prints every step's text"]
    if not imported:  # an imported run never enters this journal: nothing brings it in
        hints.append(f"`desktop-agent db unarchive {run_id}` brings it back into the run list")
    return hints


def _simple(name: str) -> Callable[[argparse.Namespace, Out], int]:
    def cmd(args: argparse.Namespace, out: Out) -> int:
        client = _client(args)
        run = getattr(client, name)(args.run)
        tail = {
            "pause": "",
            "resume": " (a stopped run continues where it stopped)",
            "cancel": "",
            "stop": " (a partial report is written; `resume` continues it)",
        }[name]
        queued(
            out,
            f"{name} requested for run {run.id}; applied at the next step boundary{tail}",
            {"run": run.id, "command": name, "queued": True},
            carry_out(client, [run.id]),
        )
        return EXIT_OK

    return cmd


def cmd_steer(args: argparse.Namespace, out: Out) -> int:
    """Send a note."""
    client = _client(args)
    run = client.steer(args.run, args.text)
    when = note_delivery(run)
    if when and run.attention_seq is not None and run.status == RunStatus.NEEDS_ATTENTION:
        when += f" (`desktop-agent resolve {run.id} ACTION`)"
    queued(
        out,
        f"note queued for run {run.id}" + (f"; {when}" if when else ""),
        {"run": run.id, "queued": True, "delivery": when or "at the run's next step"},
        carry_out(client, [run.id]),
    )
    return EXIT_OK


def cmd_answer(args: argparse.Namespace, out: Out) -> int:
    """Answer a question."""
    client = _client(args)
    run = client.answer(args.run, args.text)
    queued(
        out,
        f"answer queued for run {run.id}",
        {"run": run.id, "queued": True},
        carry_out(client, [run.id]),
    )
    return EXIT_OK


def cmd_approvals(args: argparse.Namespace, out: Out) -> int:
    """List pending approvals."""
    from desktop_agent.client.stepkinds import clip

    pending = _client(args).approvals(ApprovalState.PENDING)
    if out.as_json:
        out.emit(
            "",
            [
                {
                    "id": a.id,
                    "run": a.run_id,
                    "tool": a.tool,
                    "arguments": a.arguments,
                    "reason": a.reason,
                    "rule": a.rule,
                    "deadline": a.deadline,
                }
                for a in pending
            ],
        )
        return EXIT_OK
    if not pending:
        echo("no pending approvals")
    for a in pending:
        args_text = clip(json_line(a.arguments), 80)
        echo(
            f"{a.id}  {a.tool}  {args_text}\n    why asked: {a.rule}"
            + (f"\n    agent: {clip(a.reason, 100)}" if a.reason else "")
        )
    return EXIT_OK


def _parse_edit(text: str) -> Any:
    """The JSON of ``--edit``; malformed or too deeply nested text is a one-line error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"--edit is not valid JSON: {exc.msg} at character {exc.pos}"
        ) from None
    except RecursionError:
        raise InvalidInputError(
            "--edit is nested too deeply to read; tool arguments nest a few levels at most"
        ) from None


def cmd_approve(args: argparse.Namespace, out: Out) -> int:
    """Approve (or edit); says so only for decisions actually recorded."""
    editing = args.edit is not None
    edited = None
    if editing:
        if len(set(args.ids)) > 1:
            raise InvalidInputError("--edit applies to one approval at a time")
        edited = _parse_edit(args.edit)
    client = _client(args)
    if editing:
        decided = [client.approve(args.ids[0], edited, edit=True)]
    else:
        decided = client.approve_all(args.ids)
    note = carry_out(client, [a.run_id for a in decided])
    verb = "edited and approved" if editing else "approved"
    for a in decided:
        queued(
            out,
            f"{verb} {a.id} ({a.tool}); the run continues",
            {"approval": a.id, "decision": "edited" if editing else "approved"},
            note,
        )
    return EXIT_OK


def cmd_reject(args: argparse.Namespace, out: Out) -> int:
    """Reject."""
    if not args.reason.strip():
        raise InvalidInputError("give a reason: the agent reads it")
    client = _client(args)
    decided = client.reject_all(args.ids, args.reason)
    note = carry_out(client, [a.run_id for a in decided])
    for a in decided:
        queued(
            out,
            f"rejected {a.id} ({a.tool}); the agent gets your reason",
            {"approval": a.id, "decision": "rejected"},
            note,
        )
    return EXIT_OK


def cmd_budget(args: argparse.Namespace, out: Out) -> int:
    """Extend a budget, or show what the run spent when nothing is added."""
    time_s = parse_duration(args.add_time) if args.add_time else 0.0
    client = _client(args)
    if not any((args.add_cost, args.add_steps, time_s, args.add_tokens)):
        return _show_spending(client, args.run, out)
    run = client.extend_budget(
        args.run,
        cost_usd=args.add_cost,
        steps=args.add_steps,
        time_s=time_s,
        tokens=args.add_tokens,
    )
    queued(
        out,
        f"budget extension queued for run {run.id}",
        {"run": run.id, "queued": True},
        carry_out(client, [run.id]),
    )
    return EXIT_OK


def _show_spending(client: Client, run_id: str, out: Out) -> int:
    from desktop_agent.client.shapes import run_json

    run: Run = client.run(run_id)
    waits = [s for s in client.steps(run.id, max(1, run.last_seq)) if s.kind == StepKind.BUDGET]
    report = waits[-1].input if waits and waits[-1].status == StepStatus.STARTED else None
    b = run.budget
    lines = [
        f"Run {run.id}: {status_label(run)} · spent {format_usd(run.cost_usd)}"
        + (f" of {format_usd(b.max_cost_usd)}" if b.max_cost_usd is not None else "")
        + f" · worked {format_duration(run.active_seconds)}"
        + (f" of {format_duration(b.max_time_s)}" if b.max_time_s is not None else "")
        + f" · {run.usage.total} tokens"
        + (f" of {b.max_tokens}" if b.max_tokens is not None else "")
    ]
    if isinstance(report, dict):
        models = report.get("by_model", {})
        by_model = ", ".join(f"{m} {format_usd(c)}" for m, c in models.items())
        costly = report.get("by_step", [])[:5]
        steps = ", ".join(f"#{s['seq']} {s['kind']} {format_usd(s['cost_usd'])}" for s in costly)
        projected = report.get("projected_cost_usd")
        burn = format_usd(report.get("burn_rate_usd_per_hour", 0.0))
        lines += [
            f"  limit reached: {report.get('limit')}",
            f"  by model: {by_model or '-'}",
            f"  costliest steps: {steps or '-'}",
            f"  burn rate: {burn}/h · projected cost to finish: "
            + (format_usd(projected) if projected is not None else "unknown (no plan progress)"),
        ]
    if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.BUDGET:
        lines.append(next_step_hint(run, client))
    out.emit("\n".join(lines), {**run_json(run), "budget_report": report})
    return EXIT_OK


def cmd_resolve(args: argparse.Namespace, out: Out) -> int:
    """Resolve an in-doubt effect."""
    client = _client(args)
    run = client.resolve(args.run, args.action)
    queued(
        out,
        f"{args.action} queued for run {run.id}",
        {"run": run.id, "action": args.action},
        carry_out(client, [run.id]),
    )
    return EXIT_OK


def cmd_key(args: argparse.Namespace, out: Out) -> int:
    """Set, show or delete the API key.

    A command-line process ends right after: a key it cannot put in the OS keyring would
    be kept by no one, so ``key set`` then saves nothing, says so and exits with 2.
    """
    from desktop_agent.secrets import ENV_VAR, KeyStore, clean_key, mask

    keys = KeyStore()
    if args.action == "status":
        st = keys.status(session_outlives_call=False)
        key = keys.get()
        human = st.message + (f" ({mask(key)})" if key else "")
        out.emit(
            human,
            {
                "source": st.source,
                "present": st.present,
                "secure_store": st.secure_store,
                "backend": st.backend,
                "message": st.message,
            },
        )
        return EXIT_OK
    if args.action == "delete":
        had = keys.delete()
        out.emit("key deleted" if had else "no stored key", {"deleted": had})
        return EXIT_OK
    key = getpass.getpass("Anthropic API key: ") if sys.stdin.isatty() else sys.stdin.readline()
    key = clean_key(key)
    if not keys.save_in_keyring(key):
        why = (
            f"the OS keyring failed ({keys.last_error})"
            if keys.last_error
            else f"no secure store (OS keyring) exists here ({keys.backend_name()})"
        )
        raise InvalidInputError(
            f"{why}: the key was not saved, and this command cannot keep it once it exits; "
            f"set {ENV_VAR} in the environment of the app and the worker instead",
            code="key_not_saved",
        )
    resumed = 0
    idle = False
    with contextlib.suppress(DesktopAgentError):
        client = _client(args)
        resumed = client.resume_runs_waiting_for_key()
        idle = bool(resumed) and not client.worker_status().alive
    human = "key saved in the OS keyring"
    if resumed:
        human += f"; resuming {resumed} run(s) that were waiting for a key"
    if idle:  # the runs are runnable again, but only a worker moves them
        human += " once a worker runs (`desktop-agent worker` or the app)"
    out.emit(human, {"stored_in": "keyring", "resumed_runs": resumed, "worker_alive": not idle})
    return EXIT_OK


def cmd_gui(args: argparse.Namespace, out: Out) -> int:
    """Start the desktop app."""
    from desktop_agent import config

    try:
        from desktop_agent.gui.app import main as gui_main  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise InvalidInputError(
            f"the desktop app cannot start here ({exc}); use the CLI: `desktop-agent --help`"
        ) from None
    db_path = config.resolve_db_path(getattr(args, "db", None))
    result: int = gui_main(db_path)
    return result


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "run": cmd_run,
    "worker": cmd_worker,
    "runs": cmd_runs,
    "show": cmd_show,
    "pause": _simple("pause"),
    "resume": _simple("resume"),
    "cancel": _simple("cancel"),
    "stop": _simple("stop"),
    "steer": cmd_steer,
    "answer": cmd_answer,
    "approvals": cmd_approvals,
    "approve": cmd_approve,
    "reject": cmd_reject,
    "budget": cmd_budget,
    "resolve": cmd_resolve,
    "key": cmd_key,
    "gui": cmd_gui,
    "install-desktop-entry": desktop_entry.cmd,
    "rerun": cmd_rerun,
    **cli_scheduling.COMMANDS,
    **cli_config.COMMANDS,
    **cli_search.COMMANDS,
    **cli_compare.COMMANDS,
    **cli_mcp.COMMANDS,
    **cli_models.COMMANDS,
    **cli_usage.COMMANDS,
    **cli_inbox.COMMANDS,
    **cli_managed.COMMANDS,
    **cli_export.COMMANDS,
    **cli_agents.COMMANDS,
    **cli_forks.COMMANDS,
    **cli_annotations.COMMANDS,
    **cli_serve.COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``desktop-agent`` command."""
    logs.configure(os.environ.get("DESKTOP_AGENT_LOG", "WARNING"))
    raw = list(argv if argv is not None else sys.argv[1:])
    options = raw[: raw.index("--")] if "--" in raw else raw  # after --, operands
    out = Out("--json" in options)
    try:
        for arg in argv if argv is not None else sys.argv[1:]:
            if not _is_text(arg):
                raise CliError(f"argument {arg!r} is not valid UTF-8 text")
        args = build_parser().parse_args(argv)
        out = Out(bool(getattr(args, "json", False)))
        command = args.command or "gui"
        with clients_closed():
            return COMMANDS[command](args, out)
    except (DesktopAgentError, CliError) as exc:
        _error(out, str(exc), getattr(exc, "code", "error"))
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error worth a message.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        _error(out, "interrupted; the run goes on in the worker", "interrupted")
        return 130
    except OSError as exc:
        _error(out, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), "os_error")
        return EXIT_USAGE
    except RecursionError:
        _error(out, "the input is nested too deeply to read", "invalid_input")
        return EXIT_USAGE
    except UnicodeError:
        _error(out, "the input holds text that is not valid Unicode", "invalid_input")
        return EXIT_USAGE
    except Exception as exc:  # our bug: still one line; the traceback goes to the debug log
        logging.getLogger(__name__).debug("internal error", exc_info=True)
        _error(
            out,
            f"internal error: {plain_error(exc)}; DESKTOP_AGENT_LOG=DEBUG shows where it happened",
            "internal",
        )
        return EXIT_USAGE


def _error(out: Out, message: str, code: str) -> None:
    if out.as_json:
        print(json.dumps({"error": message, "code": code}), file=sys.stdout)
    else:
        # One line, whatever the message quotes: control characters are shown escaped.
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        print(f"desktop-agent: error: {line}", file=sys.stderr)


def _is_text(arg: str) -> bool:
    """Whether a command-line argument is valid UTF-8 (undecodable bytes are not)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
