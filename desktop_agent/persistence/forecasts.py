"""What a forecast of a run reads and writes: past completed runs, and the forecast kept.

Plain functions over a :class:`~desktop_agent.persistence.db.Database`; the client
(``client/forecast.py``) turns what they return into figures.

- :func:`completed_runs`: the newest completed runs whose stored definition names a model
  (optionally only those of one schedule, watched folder or batch), with their cost and
  times, in one query: it walks ``ix_runs_updated_at`` from the newest run and stops at
  ``limit`` matches or after the newest ``window`` runs of the database (a template's runs
  come through the schedule's and the batch's indexes instead); the model is matched in
  the stored JSON text.
- :func:`model_call_times`: how many model calls each of a few runs made and how long they
  took, in one grouped query by the journal's primary key (needed only to turn streamed
  runs' times into economy-mode ones, or back).
- :func:`record_forecast` / :func:`recorded_forecast`: the forecast made when a run was
  started, kept as a run event of kind ``forecast`` (never changed afterwards; the store's
  list of a run's events leaves it out, since it is not something that happened).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import func, insert, or_, select
from sqlalchemy.engine import Connection

from desktop_agent.domain import RunEventKind, RunStatus, StepKind
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import dumps, loads
from desktop_agent.persistence.readmodels import CHUNK
from desktop_agent.persistence.tables import batches, run_events, runs, schedules, steps, watches

FORECAST = str(RunEventKind.FORECAST)
"""The kind of the run event that keeps a run's forecast."""


class PastRun(NamedTuple):
    """A completed run as a forecast reads it.

    Attributes:
        run_id: the run.
        spec: its stored definition (JSON text).
        cost_usd: what it spent in all (the run's total, the header's cost).
        started_at: when a worker first took it.
        finished_at: when it ended.
    """

    run_id: str
    spec: str
    cost_usd: float
    started_at: float | None
    finished_at: float | None


def model_pattern(model: str) -> str:
    """The text a stored definition holds when it names ``model`` (compact JSON)."""
    return f'"model":{json.dumps(model, ensure_ascii=False)}'


def completed_runs(
    db: Database,
    model: str,
    *,
    template: str | None = None,
    limit: int = 1000,
    window: int = 5000,
) -> list[PastRun]:
    """The newest completed runs on ``model`` (of ``template``, when given), newest first.

    Args:
        db: the database.
        model: the model id the runs' definitions must name (the caller checks the
            definition again: this is the cheap filter in SQL).
        template: a schedule's, a watched folder's or a batch's id: only its runs.
        limit: at most this many rows.
        window: without a template, only among the newest this many runs of the database
            (by last change), so that a model seldom used costs a bounded read.

    Forks that share a parent's steps are left out (their cost is only their own part);
    a "run again" is a whole run and counts.
    """
    c = runs.c
    stmt = (
        select(c.id, c.spec, c.cost_usd, c.started_at, c.finished_at)
        .where(
            # Compared as an expression, the status does not steer SQLite to ix_runs_status
            # (every completed run, then a sort): the walk down ix_runs_updated_at stops at
            # the limit.
            (c.status + "") == str(RunStatus.COMPLETED),
            c.spec.contains(model_pattern(model), autoescape=True),
            or_(c.forked_at_seq.is_(None), c.forked_at_seq == 0),
            c.started_at.is_not(None),
            c.finished_at.is_not(None),
        )
        .order_by(c.updated_at.desc())
        .limit(limit)
    )
    if template is not None:
        stmt = stmt.where(or_(c.schedule_id == template, c.parent_id == template))
    else:
        newest = select(c.updated_at).order_by(c.updated_at.desc()).limit(1).offset(window - 1)
        stmt = stmt.where(c.updated_at >= func.coalesce(newest.scalar_subquery(), 0.0))
    with db.read() as conn:
        return [PastRun(*row) for row in conn.execute(stmt)]


def model_call_times(db: Database, run_ids: Sequence[str]) -> dict[str, tuple[int, float]]:
    """Each run's model calls: how many, and the seconds from their intents to outcomes."""
    s = steps.c
    took = func.sum(func.coalesce(s.finished_at, s.started_at) - s.started_at)
    out: dict[str, tuple[int, float]] = {}
    with db.read() as conn:
        for start in range(0, len(run_ids), CHUNK):
            chunk = list(run_ids[start : start + CHUNK])
            stmt = (
                select(s.run_id, func.count(), took)
                .where(s.run_id.in_(chunk), s.kind == str(StepKind.MODEL_CALL))
                .group_by(s.run_id)
            )
            for run_id, calls, seconds in conn.execute(stmt):
                out[str(run_id)] = (int(calls), float(seconds or 0.0))
    return out


def template_label(db: Database, template: str) -> str | None:
    """What the analyst calls a schedule, a watched folder or a batch (None: not found)."""
    with db.read() as conn:
        name = conn.execute(select(schedules.c.name).where(schedules.c.id == template)).scalar()
        if name is not None:
            return str(name)
        folder = conn.execute(select(watches.c.folder).where(watches.c.id == template)).scalar()
        if folder is not None:
            return f"the watch of {folder}"
        source = conn.execute(select(batches.c.source).where(batches.c.id == template)).scalar()
        if source is not None:
            return f"the batch over the {source}"
    return None


def record_forecast(
    db: Database, run_id: str, message: str, data: Any, now: float | None = None
) -> None:
    """Keep the forecast made when ``run_id`` was started (one insert; the run is not touched)."""
    with db.write() as conn:
        keep_forecast(conn, run_id, data, time.time() if now is None else now, message)


def keep_forecast(
    conn: Connection, run_id: str, data: Any, now: float, message: str | None = None
) -> None:
    """:func:`record_forecast` inside a transaction: a run a template started.

    ``data`` is the forecast the template keeps; ``message`` defaults to its ``explain``.
    """
    if message is None:
        message = str(data.get("explain", "")) if isinstance(data, dict) else ""
    values = {
        "run_id": run_id,
        "seq": None,
        "kind": FORECAST,
        "message": message,
        "data": dumps(data),
        "created_at": now,
    }
    conn.execute(insert(run_events).values(values))


def recorded_forecast(db: Database, run_id: str) -> Any:
    """The forecast kept with ``run_id`` (its data), or None when none was made."""
    e = run_events.c
    stmt = select(e.data).where(e.run_id == run_id, e.kind == FORECAST).order_by(e.id).limit(1)
    with db.read() as conn:
        text = conn.execute(stmt).scalar()
    return loads(text) if text is not None else None
