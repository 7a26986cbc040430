"""Forks: a run whose journal starts with another run's first steps, read, not copied.

A fork records ``forked_from`` (the parent) and ``forked_at_seq`` (N). Its own ``steps``
rows start at N+1; its journal is the parent's steps 1..N (recursively, for a fork of a
fork) followed by its own. Reading the parent's rows instead of copying them keeps storage
linear in the steps taken and keeps one truth for each effect: the prefix's steps keep the
parent's ids and therefore the parent's idempotency keys (``parent:seq``), and they are
all finished, so the engine replays their recorded outputs and never executes them again;
the fork's new steps get keys of its own (``fork:seq``) that cannot collide with the
parent's. The engine needs no change: the store's ``load_steps`` returns the combined
journal, the fork has no snapshot row at first, and a resumed fork folds it as any resumed
run does.

Where N may be (:func:`fork_point_problem`): every step 1..N finished (none started, so
none running, in doubt or an open wait) and the conversation well-formed at N, i.e. no tool
use of the model left unanswered after step N. The one exception is a fork that edits the
arguments of the parent's step N+1: that tool call answers a tool use the model call at N
asked for, so N is the model's turn and N+1 must be a tool call.

A "run again" is recorded the same way with N = 0: it shares no step, and the original
lists it among its forks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.engine import Connection

from desktop_agent.domain import Run, Step, StepKind, StepStatus
from desktop_agent.domain.errors import NondeterminismError
from desktop_agent.engine.state import Conversation, apply_conversation
from desktop_agent.persistence.tables import runs, steps

MAX_DEPTH = 1000
"""Forks of forks deeper than this are refused (a cycle cannot be made, but a limit is cheap)."""

_WAITS = (StepKind.APPROVAL, StepKind.SLEEP)


@dataclass(frozen=True, slots=True)
class Segment:
    """The steps ``lo..hi`` (``hi`` None: no end) of the journal are rows of ``run_id``."""

    run_id: str
    lo: int
    hi: int | None


def lineage(conn: Connection, run_id: str) -> tuple[list[Segment], bool]:
    """Where each part of ``run_id``'s journal is stored, oldest part first.

    The second value says whether the run exists (what is known of a run that does not may
    change: a caller caches only the lineage of one that does, which never changes).
    """
    out: list[Segment] = []
    found = False
    hi: int | None = None
    current: str | None = run_id
    for _ in range(MAX_DEPTH):
        if current is None:
            break
        row = conn.execute(
            select(runs.c.forked_from, runs.c.forked_at_seq).where(runs.c.id == current)
        ).first()
        found = found or (row is not None and current == run_id)
        at = int(row.forked_at_seq or 0) if row is not None else 0
        parent = row.forked_from if row is not None and at > 0 else None
        lo = at + 1 if parent is not None else 1
        if hi is None or hi >= lo:
            out.append(Segment(current, lo, hi))
        hi = at if hi is None else min(hi, at)
        current = parent
    out.reverse()
    return out, found


def journal_where(segments: Sequence[Segment]) -> ColumnElement[bool]:
    """The ``steps`` rows of a journal made of ``segments``."""
    parts: list[ColumnElement[bool]] = []
    for s in segments:
        cond = and_(steps.c.run_id == s.run_id, steps.c.seq >= s.lo)
        if s.hi is not None:
            cond = and_(cond, steps.c.seq <= s.hi)
        parts.append(cond)
    return or_(*parts) if parts else false()


def fork_point_problem(
    parent: Run, journal: Sequence[Step], at_seq: int, *, editing: bool
) -> str | None:
    """Why the parent's journal cannot be forked after step ``at_seq`` (None: it can).

    ``journal`` is the parent's combined journal from step 1 (at least up to ``at_seq``+1).
    ``editing``: the fork edits the arguments of the tool call at ``at_seq``+1.
    """
    last = parent.last_seq
    if at_seq < 1:
        return "fork from step 1 or later (`desktop-agent rerun` starts again from nothing)"
    if at_seq > last:
        return f"run {parent.id} has {last} step{'s' if last != 1 else ''}; fork from 1 to {last}"
    conv = Conversation(goal=parent.goal)
    open_after: list[int] = []
    """Steps after which a tool use of the model is still unanswered."""
    by_seq = {s.seq: s for s in journal}
    for seq in range(1, at_seq + 1):
        step = by_seq.get(seq)
        if step is None:
            return f"step {seq} of run {parent.id} is missing from its journal; fork earlier"
        if step.status == StepStatus.STARTED:
            return _open_problem(parent, step)
        try:
            apply_conversation(conv, step)
        except NondeterminismError:
            return f"the journal of run {parent.id} does not replay at step {seq}; fork earlier"
        if conv.pending:
            open_after.append(seq)
    nxt = by_seq.get(at_seq + 1)
    if editing:
        if nxt is None or nxt.kind != StepKind.TOOL_CALL or not conv.pending:
            what = f"a {nxt.kind.value.replace('_', ' ')}" if nxt else "not recorded yet"
            return (
                f"--args edits the tool call at step {at_seq + 1}, but step {at_seq + 1} is "
                f"{what}; fork from the step before a tool call"
            )
        return None
    if conv.pending:
        before = max((s for s in range(0, at_seq) if s not in open_after), default=0)
        after = _settled_after(conv, journal, at_seq)
        options = " or ".join(str(s) for s in (before, after) if s)
        kind = by_seq[at_seq].kind.value.replace("_", " ")
        return (
            f"step {at_seq} is a {kind} whose model turn continues at step {at_seq + 1}; "
            f"fork from {options or 'another step'}"
        )
    return None


def _open_problem(parent: Run, step: Step) -> str:
    """The refusal for a fork over a step that has no outcome yet."""
    if step.kind in _WAITS:
        what = f"an open wait ({step.kind.value})"
    elif parent.attention_seq == step.seq:
        what = "in doubt (it may or may not have happened)"
    else:
        what = "still running"
    return (
        f"step {step.seq} of run {parent.id} is {what}; fork from an earlier step, "
        "or once it is settled"
    )


def _settled_after(conv: Conversation, journal: Sequence[Step], at_seq: int) -> int:
    """The first step after ``at_seq`` where no tool use is left unanswered (0: none yet)."""
    for step in journal:
        if step.seq <= at_seq:
            continue
        if step.status == StepStatus.STARTED:
            return 0
        try:
            apply_conversation(conv, step)
        except NondeterminismError:
            return 0
        if not conv.pending:
            return step.seq
    return 0


def inherited(journal: Sequence[Step], at_seq: int) -> tuple[float, int]:
    """What the steps 1..``at_seq`` cost (dollars, tokens): a fork's inherited spend."""
    cost, tokens = 0.0, 0
    for s in journal:
        if s.seq <= at_seq:
            cost += s.cost_usd + s.salvaged_cost_usd
            tokens += (s.usage + s.salvaged_usage).total
    return cost, tokens


def fork_rows(conn: Connection, run_id: str) -> list[Any]:
    """The runs made from ``run_id`` (forks and "run again"s), oldest first."""
    stmt = (
        select(runs.c.id, runs.c.forked_at_seq, runs.c.status, runs.c.created_at, runs.c.title)
        .where(runs.c.forked_from == run_id)
        .order_by(runs.c.created_at, runs.c.id)
    )
    return list(conn.execute(stmt).all())
