"""Statements are rendered by SQLAlchemy for each database, never rewritten by hand.

There is no PostgreSQL server here: these tests compile the statements whose parameter
style used to be rewritten with a regex (``:name`` into ``%(name)s``) for PostgreSQL's
psycopg driver, and check that SQLAlchemy renders them in that driver's style, and in
``sqlite3``'s named style for the journal's hot path on SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import ClauseElement, Dialect
from sqlalchemy.dialects.postgresql import psycopg

from desktop_agent.persistence import store
from desktop_agent.persistence.compiled import render
from desktop_agent.persistence.scheduling_rows import sync_items
from desktop_agent.persistence.sqlbase import by_prefix
from desktop_agent.persistence.tables import runs
from desktop_agent.persistence.workers import FENCE

STEP_COLUMNS = ("run_id", "seq", "kind", "name", "status", "input", "started_at")

JOURNAL: list[tuple[str, ClauseElement, tuple[str, ...], tuple[str, ...]]] = [
    ("fence", FENCE, (), ("run", "owner", "epoch")),
    ("intent", store._INSERT_STEP, STEP_COLUMNS, STEP_COLUMNS),
    ("outcome", store._FINISH_STEP, ("run", "at_seq", "status"), ("run", "at_seq", "status")),
    ("progress", store._RUN_TOTALS, (), ("run", "now", "seq", "cost", "it", "active")),
    ("patch", store._PATCH_RUN, ("run", "status", "wake_at"), ("run", "status", "wake_at")),
    ("command", store._APPLY_COMMAND, ("command", "result"), ("command", "result")),
]


PSYCOPG: Dialect = psycopg.dialect()  # type: ignore[no-untyped-call]  # untyped in SQLAlchemy
"""PostgreSQL through psycopg 3 (``postgresql+psycopg://`` URLs): ``%(name)s`` parameters."""


def _psycopg_sql(stmt: ClauseElement, keys: tuple[str, ...] = ()) -> str:
    return str(stmt.compile(dialect=PSYCOPG, column_keys=list(keys)))


@pytest.mark.parametrize(
    ("stmt", "keys", "names"),
    [pytest.param(s, k, n, id=i) for i, s, k, n in JOURNAL],
)
def test_the_journal_renders_in_psycopg_style_for_postgresql(
    stmt: ClauseElement, keys: tuple[str, ...], names: tuple[str, ...]
) -> None:
    sql = _psycopg_sql(stmt, keys)
    for name in names:
        assert f"%({name})s" in sql, sql
        assert f":{name}" not in sql, sql


@pytest.mark.parametrize(
    ("stmt", "keys", "names"),
    [pytest.param(s, k, n, id=i) for i, s, k, n in JOURNAL],
)
def test_the_journal_renders_in_named_style_for_sqlite3(
    stmt: ClauseElement, keys: tuple[str, ...], names: tuple[str, ...]
) -> None:
    sql = render(stmt, keys).sql
    for name in names:
        assert f":{name}" in sql, sql
        assert "%(" not in sql, sql


def test_queries_with_values_render_their_own_parameters_for_postgresql() -> None:
    sql = _psycopg_sql(by_prefix(runs, "ab_c"))
    assert "LIKE %(id_1)s" in sql and "ESCAPE '\\'" in sql, sql
    sql = _psycopg_sql(sync_items(1.0, "b-1"))
    assert "%(batch_id_1)s" in sql and "%(updated_at)s" in sql, sql


def test_the_sqlite3_rendering_refuses_a_column_the_table_does_not_have() -> None:
    # SQLAlchemy leaves an unknown key out of an INSERT silently; the raw path must not.
    bad: dict[str, Any] = {"run_id": "r", "seq": 1, "kind": "x", "sequence": 2}
    with pytest.raises(ValueError, match="no column sequence in steps"):
        render(store._INSERT_STEP, bad)
