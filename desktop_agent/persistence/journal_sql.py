"""The journal's statements and the values they take, shared by both stores.

Every statement is built from the tables declared in
:mod:`~desktop_agent.persistence.tables`, so it renders for either database
(``tests/persistence/test_dialects.py`` renders them for ``sqlite3`` and for psycopg). The
hot path keeps them as module constants: :class:`~desktop_agent.persistence.store_sqlite.
SqliteJournalWriter` runs them one by one on the DB-API connection, rendered once;
:class:`~desktop_agent.persistence.store_postgres.PostgresJournalWriter` builds its one statement
per commit (:mod:`~desktop_agent.persistence.pgcommit`) from the same tables, with
:data:`PROGRESS` and the same values (:func:`intent_values`, :func:`outcome_params`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)

from desktop_agent.domain import AgentSpec, Approval, Lease, RunStatus, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.persistence.mapping import dumps
from desktop_agent.persistence.tables import approvals as approvals_table
from desktop_agent.persistence.tables import commands, runs, snapshots, steps
from desktop_agent.persistence.tables import workers as workers_table


def _spent() -> dict[Any, ColumnElement[Any]]:
    """Add a cost and token counts (``cost``, ``it``, ``ot``, ``cw``, ``cr``) to a run's totals."""
    c = runs.c
    return {
        c.cost_usd: c.cost_usd + bindparam("cost"),
        c.input_tokens: c.input_tokens + bindparam("it"),
        c.output_tokens: c.output_tokens + bindparam("ot"),
        c.cache_write_tokens: c.cache_write_tokens + bindparam("cw"),
        c.cache_read_tokens: c.cache_read_tokens + bindparam("cr"),
    }


def spent_params(usage: Usage | None, cost_usd: float) -> dict[str, Any]:
    """The parameters of :func:`_spent`."""
    u = usage or Usage()
    return {
        "cost": cost_usd,
        "it": u.input_tokens,
        "ot": u.output_tokens,
        "cw": u.cache_write_tokens,
        "cr": u.cache_read_tokens,
    }


def usage_values(usage: Usage | None, cost_usd: float) -> dict[str, Any]:
    """A step's own usage and cost columns, by column name."""
    u = usage or Usage()
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cost_usd": cost_usd,
    }


_THE_RUN = runs.c.id == bindparam("run")
_THE_STEP = (steps.c.run_id == bindparam("run")) & (steps.c.seq == bindparam("at_seq"))

INSERT_STEP = insert(steps)
"""A journal record's intent (parameters: its columns)."""


FINISH_STEP = update(steps).where(_THE_STEP)
"""A journal record's outcome (parameters: ``run``, ``at_seq`` and the columns it sets)."""

ADD_SPENT = update(runs).where(_THE_RUN).values({**_spent(), runs.c.updated_at: bindparam("now")})
"""Add what was spent outside a commit to the run's totals (parameters: ``run``, ``now``
and those of :func:`_spent`)."""

PROGRESS: dict[Any, ColumnElement[Any]] = {
    **_spent(),
    runs.c.last_seq: case(
        (runs.c.last_seq > bindparam("seq"), runs.c.last_seq), else_=bindparam("seq")
    ),
    runs.c.active_seconds: runs.c.active_seconds + bindparam("active"),
}
"""What every commit sets on the run's row: newest seq, totals, time worked (parameters
``run``, ``seq``, ``active`` and those of :func:`_spent`)."""

RUN_PROGRESS = update(runs).where(_THE_RUN).values(PROGRESS)
"""A commit's progress on the run's row: newest seq, totals, time worked."""

RUN_TOTALS = RUN_PROGRESS.values(updated_at=bindparam("now"))
""":data:`RUN_PROGRESS`, moving ``updated_at`` too (see
:data:`~desktop_agent.persistence.store_sqlite.TOUCH_EVERY_S`)."""

PATCH_RUN = update(runs).where(_THE_RUN)
"""Change the run's row (parameters: ``run`` and the columns it sets)."""

DELETE_SNAPSHOT = delete(snapshots).where(snapshots.c.run_id == bindparam("run"))
INSERT_SNAPSHOT = insert(snapshots)

APPLY_COMMAND = update(commands).where(commands.c.id == bindparam("command"))
"""Mark a command applied (parameters: ``command``, ``applied_at``, ``result``)."""

DECIDE_APPROVAL = update(approvals_table).where(approvals_table.c.id == bindparam("approval"))
"""Record an approval's decision (parameters: ``approval`` and the columns it sets)."""

INSERT_APPROVAL = insert(approvals_table)

DECIDED = ("state", "decided_arguments", "decision_note", "decided_at")
"""The columns of an approval that a decision changes."""


def change_token_query(newest_step: ColumnElement[Any]) -> Select[Any]:
    """Run count, newest ``updated_at``, newest heartbeat, and ``newest_step``."""
    return select(
        select(func.count()).select_from(runs).scalar_subquery(),
        select(func.max(runs.c.updated_at)).scalar_subquery(),
        select(func.max(workers_table.c.heartbeat_at)).scalar_subquery(),
        newest_step,
    )


def _wait_values(p: RunPatch) -> dict[str, Any]:
    """The run's status and wait columns a patch changes, by column name."""
    values: dict[str, Any] = {}
    if p.status is not None:
        values["status"] = str(p.status)
    if p.clear_wait or (p.status is not None and p.status != RunStatus.WAITING):
        values["wait_reason"] = None
        values["wake_at"] = None
    if p.wait_reason is not None:
        values["wait_reason"] = str(p.wait_reason)
        values["wake_at"] = p.wake_at
    return values


def patch_values(p: RunPatch) -> dict[str, Any]:
    """The run's columns a patch changes, by column name (its time worked aside)."""
    values = _wait_values(p)
    if p.status_message is not None:
        values["status_message"] = p.status_message
    if p.attention_seq is not None or p.clear_attention:
        values["attention_seq"] = p.attention_seq
    if p.budget is not None:
        values["budget"] = dumps(p.budget)
    if p.started_at is not None:
        values["started_at"] = p.started_at
    if p.finished_at is not None:
        values["finished_at"] = p.finished_at
    if p.spec is not None:
        values["spec"] = dumps(p.spec)
        values["definition_hash"] = AgentSpec.from_json(p.spec).definition_hash
    return values


def intent_values(run_id: str, intent: StepIntent, now: float) -> dict[str, Any]:
    """The columns of a new journal record (finished at once unless it is ``started``)."""
    finished = intent.status != StepStatus.STARTED
    return {
        "run_id": run_id,
        "seq": intent.seq,
        "kind": str(intent.kind),
        "name": intent.name,
        "status": str(intent.status),
        "effect": str(intent.effect) if intent.effect else None,
        "attempt": intent.attempt,
        "input": dumps(intent.input),
        "output": dumps(intent.output) if finished else None,
        "error": None,
        "partial_text": "",
        "started_at": now,
        "finished_at": now if finished else None,
    }


def outcome_params(run_id: str, outcome: StepOutcome, now: float) -> dict[str, Any]:
    """The parameters of :data:`FINISH_STEP` for an outcome."""
    return {
        "run": run_id,
        "at_seq": outcome.seq,
        "status": str(outcome.status),
        "output": dumps(outcome.output),
        "error": outcome.error,
        "finished_at": now,
        **usage_values(outcome.usage, outcome.cost_usd),
    }


def snapshot_values(run_id: str, snapshot: Snapshot, now: float) -> dict[str, Any]:
    """The columns of a run's snapshot row."""
    return {
        "run_id": run_id,
        "seq": snapshot.seq,
        "state": dumps(snapshot.state),
        "created_at": now,
    }


def salvage(kept: Any, text: str | None, attempt: int, usage: Usage, cost: float) -> list[Any]:
    """A step's salvage, with what its interrupted ``attempt`` streamed and spent added."""
    out = list(kept or [])
    if text or cost or usage.total:
        out.append(
            {"text": text or "", "attempt": attempt, "cost_usd": cost, "usage": usage.to_json()}
        )
    return out


@dataclass(frozen=True, slots=True)
class JournalWrite:
    """One commit of the journal, as ``SqlStore.commit`` prepared it for the database.

    Attributes:
        run_id: the run.
        now: the commit's time (``started_at``, ``finished_at``, ``applied_at``, ...).
        lease: the worker's lease to check first (None: the analyst's write, unfenced).
        changes: the run's columns the patch changes, by column name (may be empty).
        progress: the parameters of the run's progress (``run``, ``seq``, ``active``, the
            spent counters; ``now`` when ``touch``).
        touch: whether the commit moves the run's ``updated_at``.
        outcome: the outcome of a step started before.
        intents: new journal records.
        snapshot: the run's new snapshot.
        applied_commands: (command id, result) of the commands applied.
        approvals: approval records to insert or decide.
    """

    run_id: str
    now: float
    lease: Lease | None
    changes: dict[str, Any]
    progress: dict[str, Any]
    touch: bool
    outcome: StepOutcome | None
    intents: Sequence[StepIntent]
    snapshot: Snapshot | None
    applied_commands: Sequence[tuple[int, str]]
    approvals: Sequence[Approval]
