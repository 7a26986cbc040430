"""Reads shaped for the desktop app's run list and timeline (the client's views call these).

Plain functions over a :class:`~desktop_agent.persistence.db.Database`, each one read
transaction that never takes the write lock, returning domain objects or small named tuples:
the queries stay here, beside the declared tables, and the client only shapes what it gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import and_, bindparam, or_, select

from desktop_agent.domain import Run, RunStatus, StepStatus
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.forks import journal_where, lineage
from desktop_agent.persistence.mapping import run_from_row
from desktop_agent.persistence.tables import runs, steps

CHUNK = 200
"""Runs per query where each run adds its own parameters (SQLite allows a few hundred)."""

PLAN_TOOL = "update_plan"
"""The control tool whose output holds the agent's plan."""


_RUNS_SINCE = (
    select(runs)
    .where(or_(runs.c.updated_at >= bindparam("since"), runs.c.status == str(RunStatus.RUNNING)))
    .order_by(runs.c.created_at.desc())
    .limit(bindparam("n"))
)
"""Built once: the window's run list asks several times a second."""


def runs_since(db: Database, since: float, limit: int) -> list[Run]:
    """Runs updated at or after ``since``, and every running run; newest first."""
    with db.read() as conn:
        rows = conn.execute(_RUNS_SINCE, {"since": since, "n": limit}).mappings().all()
    return [run_from_row(r) for r in rows]


def newest_plans(db: Database, scanned: Sequence[tuple[str, int]]) -> dict[str, str]:
    """The newest plan (the JSON output of an ``update_plan`` step) of each run.

    Only steps after the sequence number given for each run are read; runs without such
    a plan are left out.

    Args:
        db: the database.
        scanned: (run id, last sequence number already looked at).
    """
    newest: dict[str, str] = {}
    for start in range(0, len(scanned), CHUNK):
        after = [
            and_(steps.c.run_id == run_id, steps.c.seq > seq)
            for run_id, seq in scanned[start : start + CHUNK]
        ]
        stmt = (
            select(steps.c.run_id, steps.c.output)
            .where(
                steps.c.name == PLAN_TOOL,
                steps.c.status == str(StepStatus.COMPLETED),
                or_(*after),
            )
            .order_by(steps.c.run_id, steps.c.seq)
        )
        with db.read() as conn:
            found = conn.execute(stmt).all()
        newest.update({str(run_id): str(output) for run_id, output in found if output})
    return newest


class TimelineRow(NamedTuple):
    """A journal step's columns as the timeline reads them (JSON left as text)."""

    run_id: str
    seq: int
    kind: str
    name: str
    status: str
    attempt: int
    effect: str | None
    started_at: float
    finished_at: float | None
    cost_usd: float
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    error: str | None
    partial_text: str | None
    input: str | None
    output: str | None
    salvaged: str | None


_TIMELINE = select(*(steps.c[name] for name in TimelineRow._fields))
"""The columns of :class:`TimelineRow`, in its order."""


_TIMELINE_FROM = _TIMELINE.where(
    steps.c.run_id == bindparam("run_id"), steps.c.seq >= bindparam("from_seq")
).order_by(steps.c.seq)
"""Built once: the window reads the selected run's new steps several times a second."""


def timeline_rows(db: Database, run_id: str, from_seq: int = 1) -> list[TimelineRow]:
    """The run's steps ``from_seq`` onwards, in order.

    A fork's timeline starts with its parent's steps (read from the parent's rows: see
    :mod:`desktop_agent.persistence.forks`); a step whose ``run_id`` is not the fork's is
    one of them. Past the shared prefix the query is the plain one.
    """
    with db.read() as conn:
        segments, _ = lineage(conn, run_id)
        if len(segments) > 1 and from_seq <= (segments[-2].hi or 0):
            stmt = _TIMELINE.where(journal_where(segments), steps.c.seq >= from_seq)
            rows = conn.execute(stmt.order_by(steps.c.seq)).all()
        else:
            rows = conn.execute(_TIMELINE_FROM, {"run_id": run_id, "from_seq": from_seq}).all()
    make = TimelineRow._make
    return [make(r) for r in rows]


class SpendRow(NamedTuple):
    """What one finished step spent, with its run's grouping keys (for usage totals)."""

    run_id: str
    finished_at: float
    cost_usd: float
    input_tokens: int
    output_tokens: int


class RunKeys(NamedTuple):
    """How usage totals group a run: its spec (for the model), schedule and batch."""

    run_id: str
    spec: str
    schedule_id: str | None
    batch_id: str | None


def spend_since(db: Database, since: float) -> tuple[list[SpendRow], list[RunKeys]]:
    """Every step that spent something and finished at or after ``since``, and their runs.

    Only steps with a cost or tokens are read (model calls, compactions): tool calls
    spend nothing, and a day of busy runs is then a few thousand rows, not the journal.
    """
    spent = (
        select(
            steps.c.run_id,
            steps.c.finished_at,
            steps.c.cost_usd,
            steps.c.input_tokens,
            steps.c.output_tokens,
        )
        .where(
            steps.c.finished_at >= since,
            or_(steps.c.cost_usd > 0, steps.c.input_tokens > 0, steps.c.output_tokens > 0),
        )
        .order_by(steps.c.finished_at)
    )
    with db.read() as conn:
        rows = [SpendRow(*r) for r in conn.execute(spent)]
        ids = sorted({r.run_id for r in rows})
        keys: list[RunKeys] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            stmt = select(runs.c.id, runs.c.spec, runs.c.schedule_id, runs.c.parent_id).where(
                runs.c.id.in_(chunk)
            )
            keys += [RunKeys(*r) for r in conn.execute(stmt)]
    return rows, keys
