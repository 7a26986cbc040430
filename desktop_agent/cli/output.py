"""Terminal output of the CLI: human lines or ``--json``, and following a run live."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import math
import re
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from desktop_agent.domain import (
    MONTHLY_CAP_REACHED,
    Budget,
    Run,
    RunEvent,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.units import format_duration, format_usd

if TYPE_CHECKING:
    from desktop_agent.client.api import Client
    from desktop_agent.client.economy import BatchWait
    from desktop_agent.client.report import Report

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING = 0, 1, 2, 3
"""Exit codes: done, failed or cancelled, bad input or environment, waits for the analyst."""

_COMMAND_CLIENTS: contextvars.ContextVar[list[Client] | None] = contextvars.ContextVar(
    "command_clients", default=None
)
"""The clients the command in progress opened (in this thread), closed when it ends."""


def open_client(args: argparse.Namespace) -> Client:
    """A client on the database ``--db`` names; :func:`clients_closed` closes it."""
    from desktop_agent import config
    from desktop_agent.client.api import Client

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    opened = _COMMAND_CLIENTS.get()
    if opened is not None:
        opened.append(client)
    return client


@contextlib.contextmanager
def clients_closed() -> Iterator[None]:
    """Close the clients :func:`open_client` gave out inside, however the command ended.

    A command run as its own process would release them at exit anyway; a command run
    in a process that goes on (the tests call ``main``) would leave its connections open.
    """
    opened: list[Client] = []
    token = _COMMAND_CLIENTS.set(opened)
    try:
        yield
    finally:
        _COMMAND_CLIENTS.reset(token)
        for client in opened:
            client.close()


def usd(text: str) -> float:
    """An argparse type: dollars, finite and above zero (``nan``, ``inf`` and ``-1`` are not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of dollars") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite amount above zero")
    return value


MAX_TOKENS_BUDGET = 2_000_000_000
"""The largest token budget a run takes (the New run dialog's range)."""

TOOLS_HELP = (
    "comma-separated tool names; mcp:SERVER for every tool of an MCP server "
    "(`desktop-agent mcp list`), mcp:SERVER/TOOL for one"
)

TOKENS_HELP = (
    "token budget: tokens of every kind (input, output, cache) across all the run's model "
    "calls; the run waits for you when it reaches it (`desktop-agent budget RUN "
    f"--add-tokens N` extends it). Not the length of one answer. At most {MAX_TOKENS_BUDGET:,}."
)


def token_budget(text: str) -> int:
    """An argparse type: a token budget, a whole number from 1 to :data:`MAX_TOKENS_BUDGET`."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above zero")
    if value > MAX_TOKENS_BUDGET:
        raise argparse.ArgumentTypeError(f"{value:,} tokens is more than {MAX_TOKENS_BUDGET:,}")
    return value


_ESCAPE_SEQUENCES = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: titles, links, clipboard
    r"|(?:\x1b[P^_X]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: cursor, erase, colours, modes
    r"|\x1b[ -/]*[0-~]?"  # any other escape sequence
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_C1_AND_DEL = re.compile(r"[\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` without anything a terminal would act on rather than show.

    Goals, model answers, tool output and file names come from outside (a file in the
    workspace, a web page, the model): printed as they are, an escape sequence in them
    could retitle the analyst's terminal, clear it, move the cursor over earlier output or
    write to the clipboard. Whole escape sequences (CSI, OSC and the other string
    sequences, in their 7-bit and 8-bit forms) are dropped, then every other C0 control
    but newline and tab, DEL and every C1 control.
    """
    if text.isascii() and text.isprintable():
        return text
    return _CONTROLS.sub("", _ESCAPE_SEQUENCES.sub("", text))


def echo(text: str = "", *, file: TextIO | None = None, flush: bool = False) -> None:
    """Print a line of human output, made :func:`terminal_safe` first."""
    print(terminal_safe(text), file=file or sys.stdout, flush=flush)


def json_line(data: Any, **dumps: Any) -> str:
    """``data`` as JSON for a terminal: DEL and C1 controls escaped as JSON escapes too.

    ``json.dumps`` escapes C0 controls but writes DEL and C1 (e.g. U+009B, an 8-bit CSI)
    as they are when ``ensure_ascii`` is off; escaped, the data read back is the same.
    """
    text = json.dumps(data, default=str, ensure_ascii=False, **dumps)
    return _C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Out:
    """Human or JSON output, safe for a terminal (see :func:`terminal_safe`)."""

    def __init__(self, as_json: bool, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout

    def emit(self, human: str, data: Any) -> None:
        """Print ``human`` or ``data`` as JSON."""
        if self.as_json:
            print(json_line(data), file=self.stream)
        else:
            echo(human, file=self.stream)


def budget_words(budget: Budget) -> str:
    """A run's limits in a line: ``$4.00 · 200 steps · 2h00m worked · 500,000 tokens``."""
    parts = []
    if budget.max_cost_usd is not None:
        parts.append(format_usd(budget.max_cost_usd))
    if budget.max_steps is not None:
        parts.append(f"{budget.max_steps:,} steps")
    if budget.max_time_s is not None:
        parts.append(f"{format_duration(budget.max_time_s)} worked")
    if budget.max_tokens is not None:
        parts.append(f"{budget.max_tokens:,} tokens")
    return " · ".join(parts) or "no limit"


def fork_lines(run: Run, forks: Sequence[Run]) -> list[str]:
    """``show``'s lines on where a run comes from and the runs made from it."""
    lines = []
    if run.forked_from and run.forked_at_seq:
        lines.append(f"  forked:    from {run.forked_from} at step {run.forked_at_seq}")
    elif run.forked_from:
        lines.append(f"  again of:  {run.forked_from}")
    for f in forks:
        how = f"fork at step {f.forked_at_seq}" if f.forked_at_seq else "run again"
        lines.append(f"  {'forks:' if f is forks[0] else '':<10} {f.id}  {how} · {f.status}")
    return lines


def event_line(event: RunEvent) -> str:
    """One line for a run event, marked to stand out from the run's own fields."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.created_at))
    return f"  ! {when}  {' '.join(event.message.split())}"


def model_label(model: str) -> str:
    """The model's name as shown, with the demo clearly marked."""
    return "demo (offline demo model)" if model == "demo" else model


def status_label(run: Run) -> str:
    """Status with the wait reason."""
    if run.status == RunStatus.WAITING and run.wait_reason:
        return f"waiting({run.wait_reason})"
    return str(run.status)


def waits_in_batch(run: Run) -> bool:
    """Whether the run (economy mode) waits for a model turn sent in a Message Batch."""
    return run.status == RunStatus.WAITING and run.wait_reason == WaitReason.BATCH


def batch_line(wait: BatchWait | None, now: float) -> str:
    """Where a run waiting in a Message Batch has its turn, for ``show``.

    ``in a batch, submitted 12 min ago · msgbatch_…``, or ``queued for the next batch (just
    now)`` before it is sent.
    """
    from desktop_agent.client.economy import batch_wait_words

    if wait is None:
        return "its turn is about to be queued for the next batch"
    words = batch_wait_words(wait, now)
    return f"{words} · {wait.batch_id}" if wait.batch_id else words


def step_line(step: Step) -> str:
    """One line describing a step."""
    from desktop_agent.client import stepkinds

    mark = {"completed": "✓", "failed": "✗", "started": "…"}[str(step.status)]
    what = stepkinds.terminal_summary(stepkinds.facts_of(step), model_label)
    extra = []
    if step.duration_s is not None:
        extra.append(
            f"{step.duration_s * 1000:.0f}ms"
            if step.duration_s < 10
            else format_duration(step.duration_s)
        )
    if step.cost_usd:
        extra.append(format_usd(step.cost_usd))
    if step.attempt > 1:
        extra.append(f"attempt {step.attempt}")
    tail = f"  ({', '.join(extra)})" if extra else ""
    return f"[{step.seq:>4}] {mark} {step.kind:<11} {what}{tail}"


def exit_code(run: Run) -> int:
    """Exit code for a run that ended or waits (a stopped run waits to be resumed)."""
    if run.status == RunStatus.COMPLETED:
        return EXIT_OK
    if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        return EXIT_FAILED
    return EXIT_WAITING


def follow(
    client: Client, run_id: str, out: Out, *, auto_approve: bool = False, poll_s: float = 0.2
) -> Run:
    """Print steps as they finish until the run ends or waits for the analyst."""
    from desktop_agent.client.shapes import step_json

    printed = 0
    tick = 0
    interactive = sys.stdin.isatty() and sys.stderr.isatty() and not out.as_json
    idle_since = time.monotonic()
    decided: set[str] = set()
    while True:
        steps = client.steps(run_id, printed + 1)
        last = _print_finished(steps, out, interactive)
        if last is not None:
            printed = last
            idle_since = time.monotonic()
        run: Run = client.run(run_id)
        if _decide_pending(client, run, decided, auto_approve=auto_approve, ask=interactive):
            # An idle worker may have exited while the run waited: the decision needs one.
            client.ensure_worker(until_idle=True)
            time.sleep(poll_s)
            continue
        open_steps = [s for s in steps if s.status == StepStatus.STARTED]
        if _follow_ends(client, run, open_steps):
            rest = [s for s in client.steps(run_id, printed + 1) if s.status != StepStatus.STARTED]
            for step in rest:
                out.emit(step_line(step), {"event": "step", **step_json(step)})
            _final_message(client, run, out)
            return run
        if interactive:
            tick += 1
            _spin(run, open_steps, tick)
        if time.monotonic() - idle_since > 20 and not client.worker_status().alive:
            client.ensure_worker(until_idle=True)
            idle_since = time.monotonic()
        time.sleep(poll_s)


def _cap_now(client: Client) -> float | None:
    """The monthly spend cap as the settings file says now."""
    from desktop_agent.config import Settings

    return Settings.load(client.db_path).monthly_spend_cap_usd


def _print_finished(steps: list[Step], out: Out, interactive: bool) -> int | None:
    """Print the finished steps up to the first open one; the seq of the last printed."""
    from desktop_agent.client.shapes import step_json

    last = None
    for step in steps:
        if step.status == StepStatus.STARTED:
            break
        last = step.seq
        if out.as_json:
            out.emit("", {"event": "step", **step_json(step)})
        else:
            if interactive:
                sys.stderr.write("\r\033[K")
            echo(step_line(step), flush=True)
    return last


def _decide_pending(
    client: Client, run: Run, decided: set[str], *, auto_approve: bool, ask: bool
) -> bool:
    """Approve (or ask the analyst about) the run's pending requests; whether any was decided.

    Each request is decided once (``decided`` remembers it): the worker applies the decision
    when it runs.
    """
    if run.status != RunStatus.WAITING or run.wait_reason != WaitReason.APPROVAL:
        return False
    pending = [a for a in client.approvals() if a.run_id == run.id and a.id not in decided]
    if not pending or not (auto_approve or ask):
        return False
    for a in pending:
        decided.add(a.id)
        if auto_approve or _ask_approval(a):
            client.approve(a.id, note="approved in the terminal")
        else:
            reason = input("Reason for the agent: ").strip() or "rejected in the terminal"
            client.reject(a.id, reason)
    return True


def _follow_ends(client: Client, run: Run, open_steps: list[Step]) -> bool:
    """Whether following stops: the run ended or waits, with nothing left to apply or stream.

    A run that waits but still has commands queued (a decision, a resume) is about to move;
    so is one that waits for approvals none of which is pending any more (the worker applied
    the decisions and moves the run on at its next commit); a model call still open under a
    run that is not over streams on.
    """
    settled = run.status.is_terminal or run.status in (
        RunStatus.WAITING,
        RunStatus.PAUSED,
        RunStatus.STOPPED,
        RunStatus.NEEDS_ATTENTION,
    )
    if not settled or client.has_pending_commands(run.id):
        return False
    if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.APPROVAL:
        return any(a.run_id == run.id for a in client.approvals())
    return run.status.is_terminal or not open_steps or open_steps[0].kind != StepKind.MODEL_CALL


def _spin(run: Run, open_steps: list[Step], tick: int) -> None:
    """The spinner line on the terminal: status, step, cost and the model's live text."""
    spinner = "|/-\\"
    live = open_steps[0].partial_text[-60:].replace("\n", " ") if open_steps else ""
    live = terminal_safe(live).replace("\t", " ")
    sys.stderr.write(
        f"\r\033[K{spinner[tick % 4]} {status_label(run)} · step {run.last_seq} · "
        f"{format_usd(run.cost_usd)} {live}"
    )
    sys.stderr.flush()


def _ask_approval(approval: Any) -> bool:
    sys.stderr.write("\r\033[K")
    echo(f"\nApproval needed: {approval.tool} ({approval.rule})")
    args = json_line(approval.arguments, indent=2)
    echo(args if len(args) < 2000 else args[:2000] + "\n…")
    while True:
        answer = input("Approve? [y/n] ").strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False


def _final_message(client: Client, run: Run, out: Out) -> None:
    from desktop_agent.client.shapes import run_json

    human = (
        f"Run {run.id}: {status_label(run)} · {run.last_seq} steps · {format_usd(run.cost_usd)}"
        + (f"\n{run.status_message}" if run.status_message else "")
    )
    hint = next_step_hint(run, client)
    if hint:
        human += f"\n{hint}"
    out.emit(human, {"event": "end", **run_json(run), "hint": hint})


MONTHLY = "monthly"
"""The limit of a run held by the monthly spend cap (the engine's budget step's name)."""


def budget_limit(run: Run) -> str | None:
    """Which limit a run waiting on its budget reached: cost, steps, time, tokens or monthly.

    Read from the run's status message, which the engine writes anew each time the run
    waits again (after an extension that lifted one limit, another may hold it); failing
    that, from the run's totals against its budget. None: not one the run's totals show.
    """
    message = run.status_message
    if message.startswith(MONTHLY_CAP_REACHED):
        return MONTHLY
    if message.startswith("Budget reached: "):
        words = message.removeprefix("Budget reached: ").split(";")[0]
        if words.startswith("spent "):
            return "cost"
        if words.startswith("worked "):
            return "time"
        for limit in ("steps", "tokens"):
            if words.endswith(f" {limit}"):
                return limit
    b = run.budget
    if b.max_cost_usd is not None and run.cost_usd >= b.max_cost_usd:
        return "cost"
    if b.max_tokens is not None and run.usage.total >= b.max_tokens:
        return "tokens"
    if b.max_time_s is not None and run.active_seconds >= b.max_time_s:
        return "time"
    return None


def budget_commands(
    run: Run, *, monthly: bool = False, cap_usd: float | None = None, report: Any = None
) -> tuple[str, str]:
    """The command that lifts what holds a run waiting on its budget, and the one that stops it.

    For the run's own limit, ``budget RUN --add-…`` with a suggested amount: the limit
    again (doubling it), or more when that would not leave room (a call's tokens or cost
    come in after it starts, and the next call's worst case must fit), so that the new
    limit is half again what it spent plus that worst case. For the monthly spend cap
    (``monthly``, or the status message saying so), the cap command with twice the cap now
    (``cap_usd``; None: no cap is set any more, so only a resume), or half again the
    month's spend, holds and worst case when more, resuming the runs it held. Without a
    limit to tell, the cost budget's flag with ``USD``.
    ``report``: the open budget step's input (the engine's spend report), whose next call's
    worst case (and the month's spend, for the cap) the suggestion leaves room for.
    """
    facts = report if isinstance(report, dict) else {}
    worst = float(facts.get("next_call_worst_case_usd") or 0.0)
    month: dict[str, Any] = facts.get("monthly_cap") or {}
    short = run.id[:10]
    stop = f"desktop-agent stop {short}"
    limit = MONTHLY if monthly else budget_limit(run)
    if limit == MONTHLY:
        if cap_usd is None:
            return "desktop-agent usage --resume-held", stop
        needed = float(month.get("spent_usd") or 0.0) + float(month.get("held_usd") or 0.0)
        cap = _cents_up(max(2 * cap_usd, 1.5 * (needed + worst)))
        return f"desktop-agent usage --cap {cap:.2f} --resume-held", stop
    b = run.budget
    if limit == "cost" and b.max_cost_usd is not None:
        spent = run.cost_usd
        add_usd = max(b.max_cost_usd, 1.5 * (spent + worst) - b.max_cost_usd)
        return f"desktop-agent budget {short} --add-cost {_cents_up(add_usd):.2f}", stop
    if limit == "tokens" and b.max_tokens is not None:
        add_tokens = max(b.max_tokens, math.ceil(1.5 * run.usage.total) - b.max_tokens)
        return f"desktop-agent budget {short} --add-tokens {add_tokens}", stop
    if limit == "steps" and b.max_steps is not None:
        return f"desktop-agent budget {short} --add-steps {b.max_steps}", stop
    if limit == "time" and b.max_time_s is not None:
        return f"desktop-agent budget {short} --add-time {format_duration(b.max_time_s)}", stop
    return f"desktop-agent budget {short} --add-cost USD", stop


def _cents_up(usd: float) -> float:
    """Dollars rounded up to the cent (a suggestion never below what is needed)."""
    return math.ceil(round(usd * 100, 6)) / 100


def budget_report(client: Client, run: Run) -> Any:
    """The spend report of the budget step a run waits on (None: it waits on none)."""
    last = client.steps(run.id, max(1, run.last_seq))
    if last and last[-1].kind == StepKind.BUDGET and last[-1].status == StepStatus.STARTED:
        return last[-1].input
    return None


def budget_hint(
    run: Run, *, monthly: bool = False, cap_usd: float | None = None, report: Any = None
) -> str:
    """The next step for a run waiting on its budget, naming the exact command."""
    lift, stop = budget_commands(run, monthly=monthly, cap_usd=cap_usd, report=report)
    b = run.budget
    limit = MONTHLY if monthly else budget_limit(run)
    if limit == MONTHLY:
        held = f"the monthly spend cap ({format_usd(cap_usd)})" if cap_usd else "the monthly cap"
        return (
            f"It waits for {held}, not its own budget: `{lift}` raises the cap and resumes "
            f"the runs it held, or `{stop}`."
        )
    limits = {
        "cost": (b.max_cost_usd, format_usd, "cost limit"),
        "tokens": (b.max_tokens, lambda n: f"{n:,}", "token budget"),
        "steps": (b.max_steps, lambda n: f"{n:,}", "step budget"),
        "time": (b.max_time_s, format_duration, "time budget"),
    }
    limit_value, shown, name = limits.get(limit or "", (None, str, ""))
    if limit_value is None:
        return f"Extend with `{lift}`, or `{stop}`."
    return f"Extend its {name} of {shown(limit_value)} with `{lift}`, or `{stop}`."


def next_step_hint(run: Run, client: Client | None = None) -> str:
    """What the analyst can do next for a run that waits, paused, stopped or needs attention.

    With ``client``, a run held by the monthly spend cap is told by its budget step, and
    the cap suggested is twice the one set now.
    """
    if run.status == RunStatus.WAITING:
        if run.wait_reason == WaitReason.APPROVAL:
            return "Approve with `desktop-agent approvals` then `desktop-agent approve ID`."
        if run.wait_reason == WaitReason.BUDGET:
            if client is None:
                return budget_hint(run)
            monthly = client.waits_for_monthly_cap(run)
            report = budget_report(client, run)
            return budget_hint(run, monthly=monthly, cap_usd=_cap_now(client), report=report)
        if run.wait_reason == WaitReason.HUMAN_INPUT:
            return f"Answer with `desktop-agent answer {run.id} TEXT`."
        if run.wait_reason == WaitReason.CREDENTIALS:
            return "Set a key with `desktop-agent key set`; the run resumes."
        if run.wait_reason == WaitReason.BATCH:
            return (
                "Nothing to do: its model turn waits in a Message Batch (economy mode, most "
                "end within an hour); keep a worker running (`desktop-agent worker` or the "
                "app) and it goes on when the result is in."
            )
        if run.wake_at:
            return (
                f"It wakes at {time.strftime('%H:%M:%S', time.localtime(run.wake_at))}; "
                "keep a worker running (`desktop-agent worker` or the app)."
            )
    if run.status == RunStatus.NEEDS_ATTENTION:
        return f"Decide with `desktop-agent resolve {run.id} probe|mark_done|retry|skip`."
    if run.status == RunStatus.PAUSED:
        return f"Resume with `desktop-agent resume {run.id}`."
    if run.status == RunStatus.STOPPED:
        return (
            f"Stopped with a partial report: `desktop-agent resume {run.id}` continues it, "
            f"`desktop-agent cancel {run.id}` ends it."
        )
    return ""


def print_report(report: Report | None) -> None:
    """``show``'s report: its text with ``[n]`` references, then the list of references.

    A sentence no citation supports ends with ``[?]``; the legend under the references says
    so and counts them (:mod:`desktop_agent.client.report`). Nothing when there is none.
    """
    if report is None:
        return
    print()
    echo(f"Report: {report.source_words()} · {report.coverage_words()}")
    if report.truncated:
        echo("  (cut: only its beginning is shown)")
    echo()
    for line in report.annotated().rstrip().splitlines():
        echo(f"  {line}" if line else "")
    lines = report.reference_lines()
    if lines:
        echo()
        echo("References")
        for line in lines:
            echo(f"  {line}")
