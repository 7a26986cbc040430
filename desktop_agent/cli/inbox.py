"""``desktop-agent inbox``: what needs the analyst, across runs, on one screen.

Every run that only the analyst can move on (``Run.needs_analyst``): the calls waiting for
a decision, a question, a budget or the monthly cap reached, a missing API key, a step left
in doubt; each with the command that decides it. Oldest first: what has waited longest
comes first. A run whose decision is made and waits for a worker to apply it is counted,
not listed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import (
    EXIT_OK,
    budget_commands,
    budget_report,
    echo,
    json_line,
    open_client,
)
from desktop_agent.domain import ApprovalState, RunStatus, WaitReason
from desktop_agent.domain.units import format_duration

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.domain import Approval, Run

AddParser = Callable[[str, str], argparse.ArgumentParser]

SHOWN_CALLS = 5
"""Pending calls listed per run; more are counted."""


def add_parsers(add: AddParser) -> None:
    """Add the ``inbox`` command to the main parser (``add(name, help)``)."""
    add("inbox", "what needs you across runs, each with the command that decides it")


def item(
    run: Run,
    pending: list[Approval],
    *,
    monthly: bool = False,
    cap_usd: float | None = None,
    report: Any = None,
) -> dict[str, Any]:
    """What ``run`` waits for and the commands that move it on.

    ``monthly``: the run waits for the monthly spend cap (``cap_usd`` now), not its own
    budget; the command raises the cap instead. ``report``: its budget step's spend report
    (see :func:`~desktop_agent.cli.output.budget_commands`).
    """
    short = run.id[:10]
    if run.status == RunStatus.NEEDS_ATTENTION and run.attention_seq is not None:
        what = f"a step left in doubt (step {run.attention_seq}): {run.status_message}"
        commands = [f"desktop-agent resolve {short} probe|mark_done|retry|skip"]
    elif run.status == RunStatus.NEEDS_ATTENTION:
        what = run.status_message or "stopped after an error"
        commands = [f"desktop-agent resume {short}", f"desktop-agent show {short}"]
    elif run.wait_reason == WaitReason.APPROVAL:
        n = len(pending)
        what = f"{n} call{'s' if n != 1 else ''} to approve"
        commands = [f"desktop-agent approve {a.id}" for a in pending[:SHOWN_CALLS]]
        commands += [f"desktop-agent reject {a.id} --reason TEXT" for a in pending[:1]]
    elif run.wait_reason == WaitReason.HUMAN_INPUT:
        what = f"a question: {run.status_message}"
        commands = [f'desktop-agent answer {short} "TEXT"']
    elif run.wait_reason == WaitReason.BUDGET:
        what = run.status_message
        commands = list(budget_commands(run, monthly=monthly, cap_usd=cap_usd, report=report))
    else:  # an API key
        what = run.status_message or "an API key"
        commands = ["desktop-agent key set"]
    return {
        "run": run.id,
        "title": run.title or run.goal,
        "status": str(run.status),
        "wait_reason": str(run.wait_reason) if run.wait_reason else None,
        "since": run.updated_at,
        "what": what,
        "approvals": [
            {"id": a.id, "tool": a.tool, "arguments": a.arguments, "rule": a.rule} for a in pending
        ],
        "commands": commands,
    }


def cmd_inbox(args: argparse.Namespace, out: Out) -> int:
    """Print what needs the analyst (or ``--json``)."""
    from desktop_agent.client.stepkinds import clip
    from desktop_agent.config import Settings

    client = open_client(args)  # closed by main() when the command ends
    active = client.runs([RunStatus.WAITING, RunStatus.NEEDS_ATTENTION], limit=100_000)
    runs = sorted((r for r in active if r.needs_analyst), key=lambda r: r.updated_at)
    by_run: dict[str, list[Approval]] = {}
    for approval in client.approvals(ApprovalState.PENDING):
        by_run.setdefault(approval.run_id, []).append(approval)
    # Decided already (an answer, an approval, a resume queued for a worker): not for you.
    decided = [
        r
        for r in runs
        if client.has_pending_commands(r.id)
        or (r.wait_reason == WaitReason.APPROVAL and r.id not in by_run)
    ]
    budget = [r for r in runs if r.wait_reason == WaitReason.BUDGET and r not in decided]
    cap_usd = Settings.load(client.db_path).monthly_spend_cap_usd if budget else None
    items = [
        item(
            run,
            by_run.get(run.id, []),
            monthly=run in budget and client.waits_for_monthly_cap(run),
            cap_usd=cap_usd,
            report=budget_report(client, run) if run in budget else None,
        )
        for run in runs
        if run not in decided
    ]
    if out.as_json:
        out.emit("", items)
        return EXIT_OK
    applied = (
        f" ({len(decided)} more you decided, which a worker applies at its next step)"
        if decided
        else ""
    )
    if not items:
        echo(
            "Nothing needs you: no run waits for a decision, an answer, a budget or a key"
            + (applied or ".")
        )
        return EXIT_OK
    now = time.time()
    many = len(items) != 1
    echo(f"{len(items)} run{'s' if many else ''} need{'' if many else 's'} you{applied}:")
    for it in items:
        waited = format_duration(max(0.0, now - it["since"]))
        echo(f"\n{it['run'][:10]}  {clip(it['title'], 60)}  (waiting {waited})")
        echo(f"  {clip(it['what'], 100)}")
        for a in it["approvals"][:SHOWN_CALLS]:
            echo(f"    {a['tool']} {clip(json_line(a['arguments']), 70)}  (asked: {a['rule']})")
        if len(it["approvals"]) > SHOWN_CALLS:
            echo(f"    … and {len(it['approvals']) - SHOWN_CALLS} more (desktop-agent approvals)")
        for command in it["commands"]:
            echo(f"  $ {command}")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"inbox": cmd_inbox}
