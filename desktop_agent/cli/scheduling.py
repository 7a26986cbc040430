"""Command line for schedules, batches, folder watches and the database.

``desktop-agent schedule add|list|pause|resume|remove``, ``batch start|status|retry``,
``watch add|list|pause|resume|remove`` and ``db info|vacuum|archive``. Registered by
:mod:`desktop_agent.cli`, with the same conventions: one-line errors, ``--json``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from desktop_agent.cli import backup as cli_backup
from desktop_agent.cli import forecast as cli_forecast
from desktop_agent.cli.models import (
    add_run_options,
    economy_of,
    effort_of,
    say_notice,
    thinking_of,
)
from desktop_agent.cli.output import (
    TOKENS_HELP,
    TOOLS_HELP,
    echo,
    open_client,
    token_budget,
    usd,
)
from desktop_agent.cli.workers import worker_for_new_runs
from desktop_agent.domain.units import format_duration, parse_duration

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.schedules import RunOptions, Scheduling
    from desktop_agent.domain.scheduling import Batch, BatchItem, FolderWatch, Schedule

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser, common: argparse.ArgumentParser) -> None:
    """Add the ``schedule``, ``batch``, ``watch`` and ``db`` commands.

    Args:
        add: the main parser's ``add(name, help)``.
        common: the parent parser with ``--json`` and ``--db``.
    """

    def group(name: str, help_: str) -> Callable[[str, str], argparse.ArgumentParser]:
        parser = add(name, help_)
        sub = parser.add_subparsers(
            dest=f"{name}_command", metavar="COMMAND", parser_class=type(parser)
        )
        sub.required = True
        return lambda n, h: sub.add_parser(n, help=h, description=h, parents=[common])

    sub = group("schedule", "runs started on a cron expression or an interval")
    p = sub("add", "start a run from this template at each firing")
    p.add_argument("goal")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="'M H DOM MON DOW'", help="e.g. '0 9 * * 1-5'")
    when.add_argument("--every", metavar="DURATION", help="e.g. 30m, 6h, 1d")
    p.add_argument("--name", default="")
    p.add_argument(
        "--overlap",
        choices=["skip", "queue"],
        default="skip",
        help="when the previous run is still active (default: skip)",
    )
    p.add_argument("--tz", default="", metavar="ZONE", help="time zone of --cron (default: local)")
    _run_options(p)
    sub("list", "every schedule")
    for verb, help_ in (
        ("pause", "stop firing"),
        ("resume", "fire again from now on"),
        ("remove", "delete (its runs stay)"),
    ):
        sub(verb, help_).add_argument("id")

    sub = group("batch", "one goal over many items (files of a folder, lines of a file)")
    p = sub(
        "start",
        "create a batch; in economy mode by default where the model can batch (each turn "
        "in a Message Batch, half price), --streamed to opt out",
    )
    p.add_argument("goal", help="{item}, {name}, {path} are replaced per item")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--folder", help="one item per file of this folder")
    source.add_argument("--lines", metavar="FILE", help="one item per non-empty line")
    p.add_argument("--pattern", default="*", help="file names to take from --folder")
    p.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help=f"items running at once (default: {STREAMED_CONCURRENCY} streamed; in economy "
        f"mode, the default, up to {ECONOMY_CONCURRENCY}: their turns share batches)",
    )
    _run_options(p, economy_default=True)
    cli_forecast.add_estimate_option(p, "all the items' runs")
    p = sub("status", "progress and per-item status (no id: every batch)")
    p.add_argument("id", nargs="?")
    p = sub("retry", "start failed or cancelled items again")
    p.add_argument("id")
    p.add_argument("--item", type=int, action="append", metavar="N", help="only item N")

    sub = group("watch", "folders whose new files each start a run")
    p = sub("add", "watch a folder")
    p.add_argument("folder")
    p.add_argument("goal", help="{name} and {path} name the new file")
    p.add_argument("--pattern", default="*", help="file names to react to")
    p.add_argument("--every", default="10s", metavar="DURATION", help="scan interval")
    p.add_argument(
        "--include-existing", action="store_true", help="also start runs for the files there now"
    )
    _run_options(p)
    sub("list", "every watch")
    for verb, help_ in (("pause", "stop scanning"), ("resume", "scan again"), ("remove", "stop")):
        sub(verb, help_).add_argument("id")

    sub = group("db", "the database: size, compaction, archiving old runs")
    sub("info", "where it is, how big, what it holds")
    sub("vacuum", "give unused space back to the disk")
    p = sub("archive", "move finished runs into a compressed file and out of the database")
    p.add_argument("--older-than", required=True, metavar="DURATION", help="e.g. 30d")
    p.add_argument("--out", metavar="FILE", help="archive file (default: archives/ beside the db)")
    p = sub("unarchive", "bring an archived run back into the database")
    p.add_argument("run", help="run id or unique prefix")
    cli_backup.add_parsers(sub)


STREAMED_CONCURRENCY = 4
"""Items of a streamed batch running at once, by default."""

ECONOMY_CONCURRENCY = 1000
"""Items of an economy-mode batch running at once, by default: a run waiting in a Message
Batch holds no thread, and turns ready together share one batch."""


def _run_options(p: argparse.ArgumentParser, *, economy_default: bool = False) -> None:
    p.add_argument("--model", help="demo or a Claude model id")
    p.add_argument("--workspace", help="folder every run works in (default: one per run)")
    p.add_argument("--max-cost", type=usd, metavar="USD")
    p.add_argument("--max-steps", type=int, metavar="N")
    p.add_argument("--max-time", metavar="DURATION")
    p.add_argument("--max-tokens", type=token_budget, metavar="N", help=TOKENS_HELP)
    p.add_argument("--tools", help=TOOLS_HELP)
    p.add_argument("--ask", action="append", default=[], metavar="TOOL")
    add_run_options(p, economy_default=economy_default)
    p.add_argument(
        "--tag", action="append", default=[], metavar="TAG", help="tag every run it starts"
    )
    p.add_argument("--no-worker", action="store_true", help="do not start a worker")


def _options(args: argparse.Namespace, *, economy: bool = False) -> RunOptions:
    """The runs' options; ``economy``: the mode when neither --economy nor --streamed."""
    from desktop_agent.client.schedules import RunOptions

    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    chosen = economy_of(args)
    return RunOptions(
        economy=economy if chosen is None else chosen,
        effort=effort_of(args) or "",
        thinking_budget=thinking_of(args) or 0,
        model=args.model,
        workspace=args.workspace,
        max_cost_usd=args.max_cost,
        max_steps=args.max_steps,
        max_time_s=parse_duration(args.max_time) if args.max_time else None,
        max_tokens_budget=args.max_tokens,
        tools=tools,
        approval_overrides={t: "ask" for t in args.ask},
        tags=tuple(args.tag),
    )


def _scheduling(args: argparse.Namespace) -> Scheduling:
    from desktop_agent.client.schedules import Scheduling

    return Scheduling(open_client(args))  # closed by main() when the command ends


def _worker_note(sched: Scheduling, args: argparse.Namespace) -> str:
    say_notice(sched.client)  # the template's model is deprecated: said once, when made
    if args.no_worker:
        return ""
    return worker_for_new_runs(sched.client).suffix()


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def schedule_json(s: Schedule) -> dict[str, Any]:
    """A schedule as plain data."""
    return {
        "id": s.id,
        "name": s.name,
        "cron": s.cron,
        "every_s": s.every_s,
        "timezone": s.timezone,
        "overlap": str(s.overlap),
        "paused": s.paused,
        "goal": s.template.goal,
        "model": s.template.spec.model,
        "effort": s.template.spec.effort or None,
        "thinking": s.template.spec.thinking_budget > 0,
        "workspace": s.template.workspace,
        "last_fire_at": s.last_fire_at,
        "fires": s.fire_count,
        "skipped": s.skipped,
        "queued": s.queued,
        "last_run": s.last_run_id,
        "last_result": s.last_result,
    }


def watch_json(w: FolderWatch) -> dict[str, Any]:
    """A folder watch as plain data."""
    return {
        "id": w.id,
        "folder": w.folder,
        "pattern": w.pattern,
        "every_s": w.scan_s,
        "paused": w.paused,
        "goal": w.template.goal,
        "model": w.template.spec.model,
        "effort": w.template.spec.effort or None,
        "thinking": w.template.spec.thinking_budget > 0,
    }


def item_json(i: BatchItem) -> dict[str, Any]:
    """A batch item as plain data."""
    return {
        "index": i.idx,
        "item": i.item,
        "status": str(i.status),
        "run": i.run_id,
        "attempts": i.attempts,
    }


# --------------------------------------------------------------------------- schedule


def cmd_schedule(args: argparse.Namespace, out: Out) -> int:
    """``schedule add|list|pause|resume|remove``."""
    sched = _scheduling(args)
    verb = args.schedule_command
    if verb == "add":
        s = sched.add_schedule(
            args.goal,
            cron=args.cron,
            every_s=parse_duration(args.every) if args.every else None,
            name=args.name,
            overlap=args.overlap,
            timezone=args.tz,
            options=_options(args),
        )
        note = _worker_note(sched, args)
        out.emit(f"schedule {s.id}: {s.describe_when()}{note}", schedule_json(s))
        return 0
    if verb == "list":
        schedules = sched.schedules()
        if out.as_json:
            out.emit("", [schedule_json(s) for s in schedules])
            return 0
        if not schedules:
            echo("no schedules: `desktop-agent schedule add GOAL --every 1d` makes one")
        for s in schedules:
            state = "paused" if s.paused else f"overlap {s.overlap}"
            echo(
                f"{s.id}  {s.describe_when():<24} {state:<14} fired {s.fire_count} "
                f"(skipped {s.skipped}, queued {s.queued}), last {_when(s.last_fire_at)}  "
                f"{s.name}"
            )
        return 0
    target = sched.schedule(args.id)
    action = {
        "pause": sched.pause_schedule,
        "resume": sched.resume_schedule,
        "remove": sched.remove_schedule,
    }[verb]
    s = action(target.id)
    done = {"pause": "paused", "resume": "resumed", "remove": "removed"}[verb]
    out.emit(f"schedule {s.id} {done}", {**schedule_json(s), "action": done})
    return 0


# --------------------------------------------------------------------------- batch


def cmd_batch(args: argparse.Namespace, out: Out) -> int:
    """``batch start|status|retry``."""
    sched = _scheduling(args)
    verb = args.batch_command
    options = None
    if verb == "start":
        # Economy mode is a batch's default where the model can batch: not the demo (it
        # runs here), nor a model whose catalogue entry lists no Message Batches.
        model = (args.model or sched.client.settings.default_model or "").strip()
        options = _options(args, economy=sched.client.can_batch(model))
    if options is not None and args.concurrency is None:
        if options.economy:
            from desktop_agent.client.schedules import batch_source

            items, _source = batch_source(args.folder, args.pattern, args.lines)
            args.concurrency = max(1, min(ECONOMY_CONCURRENCY, len(items)))
        else:
            args.concurrency = STREAMED_CONCURRENCY
    if verb == "start" and args.estimate:  # the forecast alone: no batch is made
        assert options is not None
        return cli_forecast.estimate_batch(sched, args, options, out)
    if verb == "start":
        b = sched.start_batch(
            args.goal,
            folder=args.folder,
            pattern=args.pattern,
            lines=args.lines,
            concurrency=args.concurrency,
            options=options,
        )
        note = _worker_note(sched, args)
        out.emit(
            f"batch {b.id}: {b.total} items from the {b.source}, {b.concurrency} at a time{note}",
            {"id": b.id, "total": b.total, "source": b.source, "concurrency": b.concurrency},
        )
        return 0
    if verb == "status" and args.id is None:
        return _batch_list(sched, out)
    if verb == "status":
        return _batch_status(sched, sched.batch(args.id), out)
    retried = sched.retry_batch(args.id, args.item)
    out.emit(
        f"retrying {len(retried)} item(s) of batch {sched.batch(args.id).id}: "
        + ", ".join(map(str, retried)),
        {"batch": args.id, "retried": retried},
    )
    return 0


def _batch_list(sched: Scheduling, out: Out) -> int:
    rows = [(b, sched.batch_progress(b.id)) for b in sched.batches()]
    if out.as_json:
        out.emit("", [{"id": b.id, "source": b.source, **asdict(p)} for b, p in rows])
        return 0
    if not rows:
        echo("no batches: `desktop-agent batch start GOAL --folder DIR` makes one")
    for b, progress in rows:
        echo(f"{b.id}  {progress.describe():<40} {b.source}")
    return 0


def _batch_status(sched: Scheduling, batch: Batch, out: Out) -> int:
    progress = sched.batch_progress(batch.id)
    items = sched.batch_items(batch.id)
    if out.as_json:
        out.emit(
            "",
            {
                "id": batch.id,
                "source": batch.source,
                "concurrency": batch.concurrency,
                "progress": asdict(progress),
                "items": [item_json(i) for i in items],
            },
        )
        return 0
    echo(f"batch {batch.id}: {progress.describe()}  ({batch.source})")
    for i in items:
        retry = f" (attempt {i.attempts})" if i.attempts > 1 else ""
        echo(f"  {i.idx:>5}  {i.status:<9} {i.run_id or '-':<10}  {i.item}{retry}")
    if progress.failed or progress.cancelled:
        echo(f"retry with `desktop-agent batch retry {batch.id}`")
    if progress.stopped:
        echo("stopped items go on with `desktop-agent resume RUN` (or end with `cancel RUN`)")
    return 0


# --------------------------------------------------------------------------- watch


def cmd_watch(args: argparse.Namespace, out: Out) -> int:
    """``watch add|list|pause|resume|remove``."""
    sched = _scheduling(args)
    verb = args.watch_command
    if verb == "add":
        w = sched.add_watch(
            args.folder,
            args.goal,
            pattern=args.pattern,
            every_s=parse_duration(args.every),
            include_existing=args.include_existing,
            options=_options(args),
        )
        note = _worker_note(sched, args)
        out.emit(
            f"watch {w.id}: new files in {w.folder} matching {w.pattern} start runs{note}",
            watch_json(w),
        )
        return 0
    if verb == "list":
        watches = sched.watches()
        if out.as_json:
            out.emit("", [watch_json(w) for w in watches])
            return 0
        if not watches:
            echo("no watched folders: `desktop-agent watch add FOLDER GOAL` adds one")
        for w in watches:
            state = "paused" if w.paused else f"every {format_duration(w.scan_s)}"
            echo(f"{w.id}  {state:<12} {w.folder} ({w.pattern})")
        return 0
    action = {
        "pause": sched.pause_watch,
        "resume": sched.resume_watch,
        "remove": sched.remove_watch,
    }[verb]
    w = action(args.id)
    done = {"pause": "paused", "resume": "resumed", "remove": "removed"}[verb]
    out.emit(f"watch {w.id} {done}", {**watch_json(w), "action": done})
    return 0


# --------------------------------------------------------------------------- db


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def cmd_db(args: argparse.Namespace, out: Out) -> int:
    """``db info|vacuum|archive`` (``backups|backup|restore``: :mod:`~desktop_agent.cli.backup`)."""
    if args.db_command in cli_backup.VERBS:
        return cli_backup.cmd(args, out)
    sched = _scheduling(args)
    verb = args.db_command
    if verb == "unarchive":
        run = sched.unarchive(args.run)
        out.emit(
            f"run {run.id} is back in the database ({run.last_seq} steps); "
            f"`desktop-agent show {run.id}` shows it",
            {"run_id": run.id, "steps": run.last_seq},
        )
        return 0
    if verb == "archive":
        age = parse_duration(args.older_than)
        result = sched.archive(age, args.out)
        if result.path is None:
            out.emit(
                f"no run finished more than {format_duration(age)} ago",
                {"archived": 0, "path": None},
            )
        else:
            out.emit(
                f"archived {len(result.run_ids)} run(s) to {result.path} and removed them",
                {"archived": len(result.run_ids), "path": str(result.path), "runs": result.run_ids},
            )
        if result.kept_for_forks:
            echo(f"kept {len(result.kept_for_forks)} run(s) that forks still read")
        return 0
    if verb == "vacuum":
        before = sched.db_info()
        after = sched.vacuum()
        out.emit(
            f"vacuumed: {_size(before.file_bytes + before.wal_bytes)} → "
            f"{_size(after.file_bytes + after.wal_bytes)}",
            {
                "before_bytes": before.file_bytes + before.wal_bytes,
                "after_bytes": after.file_bytes + after.wal_bytes,
            },
        )
        return 0
    info = sched.db_info()
    stuck = sched.stuck_runs()
    data = {**asdict(info), "stuck_runs": [asdict(s) for s in stuck]}
    lines = [
        f"database {info.location} (schema {info.revision})",
        f"  size: {_size(info.file_bytes)} + {_size(info.wal_bytes)} log, "
        f"{_size(info.free_bytes)} reusable (`desktop-agent db vacuum`)",
        "  rows: " + ", ".join(f"{n} {t}" for t, n in info.rows.items()),
        "  runs: " + (", ".join(f"{n} {s}" for s, n in info.runs_by_status.items()) or "none"),
    ]
    lines += [f"  stuck: run {s.run_id}: {s.message}" for s in stuck]
    out.emit("\n".join(lines), data)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "schedule": cmd_schedule,
    "batch": cmd_batch,
    "watch": cmd_watch,
    "db": cmd_db,
}
"""Entry points, merged into :data:`desktop_agent.cli.COMMANDS`."""
