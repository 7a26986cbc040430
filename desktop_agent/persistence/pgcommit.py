"""A journal commit on PostgreSQL as one statement: data-modifying CTEs, one round trip.

:meth:`SqlStore.commit <desktop_agent.persistence.store.SqlStore.commit>` writes a step's
outcome, the next intents, the run's progress (and sometimes a patch of the run, a
snapshot, applied commands, approvals) in one transaction, fenced by the worker's lease.
On PostgreSQL all of it is one ``WITH`` statement, sent alone in autocommit mode by
:class:`~desktop_agent.persistence.store_postgres.PostgresJournalWriter`: the server runs it as one
implicit transaction and commits it before answering (with ``synchronous_commit`` as
configured), so a step costs one round trip, as little as a plain ``INSERT`` could.

The fence is the ``UPDATE runs`` itself: its ``WHERE`` is the lease check (:data:`HELD
<desktop_agent.persistence.workers.HELD>`), and every other part writes only ``WHERE EXISTS
(SELECT 1 FROM run)``, so a worker that lost its lease writes nothing at all (not even an
intent that would collide with the new owner's step); the statement's one result, the
number of run rows updated, tells the caller to raise ``LeaseLost``. The row lock taken by
that ``UPDATE`` orders it against a concurrent claim as the separate fence statement did.

What one statement changes against the former sequence of statements, and why it does not
matter here: its parts do not see each other's writes, so each row is written by one part
only (the run's patch, counters and fence are one ``UPDATE``), the snapshot's
delete-then-insert is an upsert, and an approval's update-else-insert is an upsert on its
id. The statement is built from the declared tables once per shape (which parts, how many
intents, ...) and rendered once (:func:`~desktop_agent.persistence.compiled.render`); psycopg
prepares it on the server after a few uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Exists,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.selectable import CTE

from desktop_agent.persistence.compiled import Rendered, render
from desktop_agent.persistence.tables import approvals, commands, runs, snapshots, steps
from desktop_agent.persistence.workers import HELD

INTENT_COLUMNS = (
    "run_id", "seq", "kind", "name", "status", "effect", "attempt", "input", "output",
    "error", "partial_text", "started_at", "finished_at",
)  # fmt: skip
"""The columns of a new journal record (``_intent_values`` in the store)."""

OUTCOME_COLUMNS = (
    "status", "output", "error", "finished_at", "input_tokens", "output_tokens",
    "cache_write_tokens", "cache_read_tokens", "cost_usd",
)  # fmt: skip
"""The columns an outcome sets on its step."""

SNAPSHOT_COLUMNS = ("run_id", "seq", "state", "created_at")

APPROVAL_COLUMNS = tuple(approvals.c.keys())

DECIDED = ("state", "decided_arguments", "decision_note", "decided_at")
"""The columns of an approval that a decision changes."""


@dataclass(frozen=True)
class Shape:
    """What a commit writes, as far as its statement's text depends on it.

    Attributes:
        fenced: the run's row is written only under the worker's lease.
        patch: the run's columns a patch sets (besides the progress always written).
        outcome: a step's outcome is written.
        intents: how many new journal records.
        touch: the run's ``updated_at`` moves.
        snapshot: the run's snapshot is replaced.
        commands: how many commands are marked applied.
        approvals: how many approvals are written (inserted or decided).
    """

    fenced: bool
    patch: tuple[str, ...]
    outcome: bool
    intents: int
    touch: bool
    snapshot: bool
    commands: int
    approvals: int


_BUILT: dict[tuple[Shape, int], Rendered] = {}


def statement(shape: Shape, progress: Mapping[Any, ColumnElement[Any]]) -> Rendered:
    """The commit's statement for ``shape``, rendered for psycopg (built once per shape).

    ``progress`` is what every commit sets on the run's row (its counters), a module
    constant of the store, with parameters ``run``, ``seq``, ``active``, ``cost``, ``it``,
    ``ot``, ``cw``, ``cr``. The other parameters are those :func:`params` gives.
    """
    key = (shape, id(progress))
    done = _BUILT.get(key)
    if done is None:
        done = _BUILT[key] = render(_build(shape, progress), (), "postgresql")
    return done


def _typed(table_column: Column[Any], name: str) -> ColumnElement[Any]:
    """A parameter in a ``SELECT`` list: cast, so that a ``None`` still has its column's type."""
    return cast(bindparam(name, type_=table_column.type), table_column.type)


def _build(shape: Shape, progress: Mapping[Any, ColumnElement[Any]]) -> Any:
    c = runs.c
    values: dict[Any, ColumnElement[Any]] = {
        **{c[k]: bindparam(f"p_{k}", type_=c[k].type) for k in shape.patch},
        **progress,
    }
    if shape.touch:
        values[c.updated_at] = bindparam("now", type_=c.updated_at.type)
    where = HELD if shape.fenced else c.id == bindparam("run")
    run = update(runs).where(where).values(values).returning(literal_column("1")).cte("run")
    held: Exists | None = (
        select(literal_column("1")).select_from(run).exists() if shape.fenced else None
    )

    def only_if_held(stmt: Any) -> Any:
        return stmt if held is None else stmt.where(held)

    parts: list[CTE] = []
    if shape.outcome:
        s = steps.c
        finish = (
            update(steps)
            .where(s.run_id == bindparam("run"), s.seq == bindparam("at_seq"))
            .values({s[k]: bindparam(f"o_{k}", type_=s[k].type) for k in OUTCOME_COLUMNS})
        )
        parts.append(only_if_held(finish).cte("outcome"))
    for i in range(shape.intents):
        row = only_if_held(select(*[_typed(steps.c[k], f"i{i}_{k}") for k in INTENT_COLUMNS]))
        parts.append(pg_insert(steps).from_select(INTENT_COLUMNS, row).cte(f"intent{i}"))
    if shape.snapshot:
        row = only_if_held(select(*[_typed(snapshots.c[k], f"s_{k}") for k in SNAPSHOT_COLUMNS]))
        ins = pg_insert(snapshots).from_select(SNAPSHOT_COLUMNS, row)
        new = ins.excluded
        ins = ins.on_conflict_do_update(
            index_elements=[snapshots.c.run_id],
            set_={k: new[k] for k in SNAPSHOT_COLUMNS if k != "run_id"},
        )
        parts.append(ins.cte("snapshot"))
    m = commands.c
    for i in range(shape.commands):
        applied = (
            update(commands)
            .where(m.id == bindparam(f"c{i}_id", type_=m.id.type))
            .values(applied_at=bindparam(f"c{i}_applied_at"), result=bindparam(f"c{i}_result"))
        )
        parts.append(only_if_held(applied).cte(f"command{i}"))
    a = approvals.c
    for i in range(shape.approvals):
        row = only_if_held(select(*[_typed(a[k], f"a{i}_{k}") for k in APPROVAL_COLUMNS]))
        ins = pg_insert(approvals).from_select(APPROVAL_COLUMNS, row)
        new = ins.excluded
        ins = ins.on_conflict_do_update(index_elements=[a.id], set_={k: new[k] for k in DECIDED})
        parts.append(ins.cte(f"approval{i}"))
    return select(func.count()).select_from(run).add_cte(*parts)


def params(
    *,
    progress: Mapping[str, Any],
    fence: Mapping[str, Any] | None,
    patch: Mapping[str, Any],
    outcome: Mapping[str, Any] | None,
    intents: Sequence[Mapping[str, Any]],
    snapshot: Mapping[str, Any] | None,
    applied: Sequence[Mapping[str, Any]],
    approved: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The statement's parameters, by the names :func:`statement` gives them.

    ``progress`` and ``fence`` come with their own names (``run``, ``seq``, ...; ``owner``,
    ``epoch``); ``outcome`` carries ``at_seq`` and the columns it sets; the others are rows
    by column name (an applied command: ``id``, ``applied_at``, ``result``).
    """
    out: dict[str, Any] = {**progress, **(fence or {})}
    out.update({f"p_{k}": v for k, v in patch.items()})
    if outcome is not None:
        out["at_seq"] = outcome["at_seq"]
        out.update({f"o_{k}": outcome[k] for k in OUTCOME_COLUMNS})
    for i, row in enumerate(intents):
        out.update({f"i{i}_{k}": row[k] for k in INTENT_COLUMNS})
    if snapshot is not None:
        out.update({f"s_{k}": snapshot[k] for k in SNAPSHOT_COLUMNS})
    for i, row in enumerate(applied):
        out.update({f"c{i}_{k}": v for k, v in row.items()})
    for i, row in enumerate(approved):
        out.update({f"a{i}_{k}": row[k] for k in APPROVAL_COLUMNS})
    return out
