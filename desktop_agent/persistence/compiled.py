"""Core statements compiled once for SQLite's own driver, where SQLAlchemy's execution is skipped.

Two places talk to ``sqlite3`` directly: the journal's hot path
(:meth:`SqliteJournalWriter._write_journal
<desktop_agent.persistence.store_sqlite.SqliteJournalWriter._write_journal>`, where SQLAlchemy's
per-statement work costs as much as the commit itself) and the
reconciliation of a restored backup (:mod:`desktop_agent.persistence.restored`, which works on
a file nothing else has open). Both still build their statements from the tables of
:mod:`desktop_agent.persistence.tables`; SQLAlchemy renders them here, once, in the driver's
named parameter style (``:name``), and the rendering is kept for the next call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.expression import ClauseElement

_NAMED = SQLiteDialect_pysqlite(paramstyle="named")
"""The SQLite dialect, rendering parameters as ``:name`` (``sqlite3`` takes a dict)."""

_PYFORMAT: Any = None
"""The PostgreSQL dialect, rendering parameters as ``%(name)s`` (psycopg takes a dict);
made on first use (its driver is optional)."""


class _Executes(Protocol):
    """A ``sqlite3`` connection or cursor."""

    def execute(self, sql: str, parameters: Mapping[str, Any], /) -> Any:
        """Run one statement."""
        ...


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement as ``sqlite3`` runs it.

    Attributes:
        sql: the SQL text, with ``:name`` parameters.
        fixed: values the statement carries itself (a literal compared with, a LIMIT).
    """

    sql: str
    fixed: Mapping[str, Any]

    def params(self, given: Mapping[str, Any]) -> Mapping[str, Any]:
        """Every parameter value: the statement's own, and ``given``."""
        return {**self.fixed, **given} if self.fixed else given


_RENDERED: dict[tuple[ClauseElement, tuple[str, ...], str], Rendered] = {}
"""Renderings by statement and parameter names (statements are module constants)."""


def render(stmt: ClauseElement, keys: Iterable[str] = (), dialect: str = "sqlite") -> Rendered:
    """``stmt`` rendered for ``sqlite3``, once per statement and set of parameter names.

    With ``dialect="postgresql"``, for psycopg instead (``%(name)s`` parameters).

    Args:
        stmt: a statement built from the declared tables. Its bound parameters keep their
            names (``bindparam("run")`` is ``:run``).
        dialect: ``sqlite`` (for ``sqlite3``) or ``postgresql`` (for psycopg).
        keys: the parameter names it is executed with. For an INSERT or UPDATE without
            explicit values they choose the columns (each is bound as ``:column``), exactly
            as SQLAlchemy's own execution does with the same parameters.

    Raises:
        ValueError: a parameter is neither a column of the table written nor a parameter
            of the statement (SQLAlchemy would leave it out silently: a column renamed in
            the declaration but not in the caller), or the statement needs SQLAlchemy at
            execution time (an ``IN`` over a list of values: give it one bound parameter
            per value instead).
    """
    key = (stmt, tuple(keys), dialect)
    done = _RENDERED.get(key)
    if done is None:
        done = _RENDERED[key] = _render(stmt, key[1], dialect)
    return done


def _dialect(name: str) -> Any:
    global _PYFORMAT
    if name == "sqlite":
        return _NAMED
    if _PYFORMAT is None:
        from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

        _PYFORMAT = PGDialect_psycopg(paramstyle="pyformat")  # type: ignore[no-untyped-call]
    return _PYFORMAT


def _render(stmt: ClauseElement, keys: tuple[str, ...], dialect: str) -> Rendered:
    compiled = stmt.compile(dialect=_dialect(dialect), column_keys=list(keys))
    assert isinstance(compiled, SQLCompiler)
    if compiled.post_compile_params or compiled.literal_execute_params:
        raise ValueError(f"cannot render once for sqlite3: {compiled.string}")
    names = set(compiled.bind_names.values())
    if isinstance(stmt, UpdateBase):
        unknown = set(keys) - names - set(stmt.table.c.keys())
        if unknown:
            raise ValueError(f"no column {', '.join(sorted(unknown))} in {stmt.table}")
    fixed = {name: b.value for b, name in compiled.bind_names.items() if not b.required}
    return Rendered(compiled.string, fixed)


def execute(target: _Executes, stmt: ClauseElement, params: Mapping[str, Any]) -> Any:
    """Run ``stmt`` with ``params`` on a ``sqlite3`` connection or cursor; its cursor."""
    r = render(stmt, params)
    return target.execute(r.sql, r.params(params))
