"""Deciding several approvals at once: the question asked first, and what was decided.

:class:`~desktop_agent.gui.commands.RunCommands` asks with :func:`batch_question`, records
each decision with :func:`decide_each` (off the GUI thread) and reports the
:class:`BatchOutcome`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from desktop_agent.client.messages import plain_error
from desktop_agent.domain import Approval
from desktop_agent.domain.errors import DesktopAgentError


@dataclass
class BatchOutcome:
    """What a decision on several approvals did, one approval at a time.

    Attributes:
        verb: ``Approved`` or ``Rejected``.
        decided: the approvals whose decision was recorded.
        failed: the others, each with why (e.g. decided meanwhile elsewhere).
    """

    verb: str
    decided: list[Approval] = field(default_factory=list)
    failed: list[tuple[Approval, str]] = field(default_factory=list)

    def message(self) -> str:
        """One line: how many were decided, and which were not and why."""
        total = len(self.decided) + len(self.failed)
        text = f"{self.verb} {len(self.decided)} of {total} call{'s' if total != 1 else ''}"
        if not self.failed:
            return text
        why = "; ".join(f"{call_label(a)}: {reason}" for a, reason in self.failed)
        return f"{text}. Not decided here: {why}"


def call_label(approval: Approval) -> str:
    """A call in a few words: the tool and what it acts on (``write_file report.md``)."""
    args = approval.arguments if isinstance(approval.arguments, dict) else {}
    for key in ("to", "path", "url", "query", "name"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            target = " ".join(value.split())
            target = target if len(target) <= 40 else target[:39] + "…"
            return f"{approval.tool} to {target}" if key == "to" else f"{approval.tool} {target}"
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return f"{approval.tool} to {', '.join(value)[:40]}"
    return approval.tool


def batch_question(verb: str, approvals: Sequence[Approval]) -> str:
    """The question before deciding several calls (``Approve 3 calls: …, write_file x.md?``)."""
    listed = ", ".join(call_label(a) for a in approvals[:8])
    more = f" and {len(approvals) - 8} more" if len(approvals) > 8 else ""
    return f"{verb} {len(approvals)} calls: {listed}{more}?"


def decide_each(
    approvals: Sequence[Approval], verb: str, record: Callable[[Approval], Any]
) -> BatchOutcome:
    """Record one decision per approval; a refused one is reported, the others go on."""
    outcome = BatchOutcome(verb)
    for approval in approvals:
        try:
            record(approval)
        except DesktopAgentError as exc:
            outcome.failed.append((approval, plain_error(exc)))
        else:
            outcome.decided.append(approval)
    return outcome
