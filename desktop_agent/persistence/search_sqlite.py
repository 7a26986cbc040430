"""Full-text search on SQLite: an FTS5 index over the documents.

Where: the FTS5 table ``search_fts`` indexes ``search_docs`` as *external content* (the
text is stored once); triggers on ``search_docs`` keep the two in step. Tokenizer
``unicode61 remove_diacritics 2`` without ``porter``: stemming is English-only and turns
exact terms (names, figures, file names) into fuzzy ones; ``word*`` asks for prefixes when
the analyst wants them. Indexing (:func:`~desktop_agent.persistence.search_common.index_run`)
needs nothing of its own here: SQLite's write lock serialises indexers (:data:`INDEXING`).

How a search reads (:func:`search`): the newest ``CANDIDATES`` matches that pass the
filters, by document id (indexing order), are ranked by bm25 among themselves; the best
``limit`` are shown. So a phrase matched by half a million documents costs what its newest
thousand do: FTS5 reads the index newest first (``ORDER BY rowid DESC``, which it serves
without sorting) and stops at the bound. A date window is a range of ids FTS5 seeks to
(``search_hours``: the lowest and highest id indexed per hour of ``at``, a superset, then
the exact filter on ``at``); run filters that leave a few runs read only those runs' ids
(``search_runs.first_doc_id``/``last_doc_id``). bm25 is computed over a temporary index of
the candidates, because FTS5's on the main index first counts every match of each phrase
in the whole index (0.5 s for two very common words in a million documents). Measured
(``bench/search_bench.py --scale``, 1,000,000 steps): 200 phrase queries with filters,
p95 604 ms before, about 60 ms after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, column, func, insert, literal_column, or_, select, table, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import BindParameter, ColumnClause, ColumnElement

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.search_common import (
    MARK_END,
    MARK_START,
    SHOWN,
    SNIPPET_TOKENS,
    SearchFilters,
    SearchHit,
    doc_conditions,
    hit,
    id_range,
    run_conditions,
    terms,
)
from desktop_agent.persistence.tables import search_docs, search_runs

_FTS: ColumnClause[Any] = literal_column("search_fts")
"""The FTS5 table, as its functions (``bm25``, ``snippet``) and ``MATCH`` take it."""

_FTS_TABLE = table("search_fts", column("rowid"))
"""The FTS5 table, as a FROM clause."""

EachRun = Callable[[Connection, str, SearchFilters, list[tuple[Any, ...]], int], list[int]]
"""How the matches within a few runs' id ranges are read (:func:`each_run`)."""


def fts_query(text: str) -> str:
    """The analyst's query (see :func:`terms`) as an FTS5 expression: every term must match.

    Every term is quoted for FTS5, so FTS5's own syntax in it is plain text.
    """
    return " AND ".join(_quoted(t.text) + (" *" if t.prefix else "") for t in terms(text))


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


_CANDIDATES = (
    select(_FTS_TABLE.c.rowid)
    .select_from(_FTS_TABLE)
    .join(search_docs, search_docs.c.id == _FTS_TABLE.c.rowid)
    .join(search_runs, search_runs.c.run_id == search_docs.c.run_id)
    .where(_FTS.op("MATCH")(bindparam("query")))
)
"""Matching documents, filtered; :func:`search` takes the newest (``ORDER BY
search_fts.rowid DESC``: FTS5 gives that order itself, so the scan stops at the bound)."""

_RANKED_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_ranked USING fts5(body, "
    "tokenize='unicode61 remove_diacritics 2')"
)
"""A connection's own small index of the candidates, with the main index's tokenizer."""

_RANKED_FILL = text(
    "INSERT INTO temp.search_ranked(rowid, body) SELECT id, body FROM search_docs WHERE id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_RANKED_BEST = text(
    "SELECT r.rowid AS id, bm25(search_ranked) AS rank FROM temp.search_ranked AS r "
    "JOIN search_docs AS d ON d.id = r.rowid WHERE search_ranked MATCH :query "
    "ORDER BY rank, d.at DESC LIMIT :limit"
)
"""The best of the candidates by bm25 among themselves, then newest first."""

_RANKED_SNIPPETS = text(
    "SELECT rowid AS id, snippet(search_ranked, 0, :start, :end, '…', :tokens) AS snippet "
    "FROM temp.search_ranked WHERE search_ranked MATCH :query AND rowid IN :ids"
).bindparams(bindparam("ids", expanding=True))


def candidates(
    conn: Connection,
    expression: str,
    f: SearchFilters,
    bound: int,
    run_spans: int,
    by_run: EachRun,
) -> list[int]:
    """The ids of the newest ``bound`` matches that pass the filters, newest first.

    FTS5 reads the id range of the date window (:func:`id_range`) newest first and stops
    at the ``bound``-th match that passes the filters. When the run filters leave at most
    ``run_spans`` runs whose documents lie within a quarter of that range or less,
    ``by_run`` (:func:`each_run`) reads each of those runs' ids instead
    (``search_runs.first_doc_id``/``last_doc_id``, a superset of where a run's documents
    are), every match of them, before the newest ``bound`` are kept.
    """
    fts_id = _FTS_TABLE.c.rowid
    low, high = 0, None
    if f.since is not None or f.until is not None:
        bounds = id_range(conn, f)
        if bounds is None:
            return []
        low, high = bounds
    of_runs = run_conditions(f)
    stmt = _CANDIDATES.where(*of_runs, *doc_conditions(f))
    if of_runs:
        r = search_runs.c
        unknown = r.last_doc_id.is_(None)  # never left so by the indexer; read as "anywhere"
        narrowed = [*of_runs, or_(unknown, r.last_doc_id >= low)]
        if high is not None:
            narrowed.append(or_(unknown, r.first_doc_id <= high))
        span_low = func.max(r.first_doc_id, low)
        span_high = r.last_doc_id if high is None else func.min(r.last_doc_id, high)
        n, width, unplaced = conn.execute(
            select(
                func.count(),
                func.sum(span_high - span_low + 1),
                func.count().filter(unknown),
            ).where(*narrowed)
        ).one()
        if not n:
            return []
        if high is None:
            high = int(conn.execute(select(func.max(search_docs.c.id))).scalar() or 0)
        if not unplaced and n <= run_spans and int(width) * 4 <= high - low + 1:
            spans = conn.execute(select(r.run_id, span_low, span_high).where(*narrowed)).all()
            return by_run(conn, expression, f, [tuple(s) for s in spans], bound)
    if high is not None:
        stmt = stmt.where(fts_id.between(low, high))
    newest = stmt.order_by(fts_id.desc()).limit(bound)
    return [int(i) for i in conn.execute(newest, {"query": expression}).scalars()]


def each_run(
    conn: Connection,
    expression: str,
    f: SearchFilters,
    spans: list[tuple[Any, ...]],
    bound: int,
) -> list[int]:
    """The newest ``bound`` matches within each run's ids, the document filters applied.

    One statement, the runs' ranges (``spans``: run id, first id, last id) as its outer
    loop: ``CROSS JOIN`` keeps SQLite from making the FTS5 scan the outer loop (which its
    ``ORDER BY rowid`` would otherwise prefer), so FTS5 seeks to each range.
    """
    params: dict[str, Any] = {"query": expression, "bound": bound}
    rows = []
    for i, (run_id, first, last) in enumerate(spans):
        rows.append(f"(:run{i}, :first{i}, :last{i})")
        params.update({f"run{i}": run_id, f"first{i}": first, f"last{i}": last})
    where = [
        "search_fts MATCH :query",
        "search_fts.rowid BETWEEN spans.first AND spans.last",
        "search_docs.id = search_fts.rowid",
        "search_docs.run_id = spans.run_id",
    ]
    expanding: list[BindParameter[Any]] = []
    if f.kinds:
        where.append("search_docs.kind IN :kinds")
        params["kinds"] = list(f.kinds)
        expanding.append(bindparam("kinds", expanding=True))
    if f.tools:
        where.append("search_docs.tool IN :tools")
        params["tools"] = list(f.tools)
        expanding.append(bindparam("tools", expanding=True))
    if f.since is not None:
        where.append("search_docs.at >= :since")
        params["since"] = f.since
    if f.until is not None:
        where.append("search_docs.at < :until")
        params["until"] = f.until
    stmt = text(
        f"WITH spans(run_id, first, last) AS (VALUES {', '.join(rows)}) "
        "SELECT search_fts.rowid FROM spans CROSS JOIN search_fts CROSS JOIN search_docs "
        f"WHERE {' AND '.join(where)} ORDER BY search_fts.rowid DESC LIMIT :bound"
    ).bindparams(*expanding)
    return [int(i) for i in conn.execute(stmt, params).scalars()]


def search(
    db: Database,
    query: str,
    filters: SearchFilters,
    limit: int,
    bound: int,
    *,
    run_spans: int,
    by_run: EachRun,
) -> list[SearchHit]:
    """The best ``limit`` of the newest ``bound`` matches, by bm25 among themselves.

    ``run_spans`` and ``by_run`` are as :func:`candidates` takes them. See
    :func:`desktop_agent.persistence.search.search` for what the order means.

    Raises:
        InvalidInputError: the query cannot be read (see :func:`fts_query`).
    """
    expression = fts_query(query)
    try:
        with db.read() as conn:
            ids = candidates(conn, expression, filters, bound, run_spans, by_run)
            if not ids:
                return []
            best, snippets = ranked(conn, expression, ids, limit)
            shown = {int(r["id"]): r for r in conn.execute(SHOWN, {"ids": list(best)}).mappings()}
    except OperationalError as exc:
        if "fts5" in str(exc.orig) or "MATCH" in str(exc.orig):
            raise InvalidInputError(
                f'cannot read the search {query!r}; use words, "phrases" and word*'
            ) from None
        raise
    return [hit(shown[i], snippets.get(i, ""), rank) for i, rank in best.items()]


def ranked(
    conn: Connection, expression: str, ids: list[int], limit: int
) -> tuple[dict[int, float], dict[int, str]]:
    """The best ``limit`` of ``ids`` (id: rank, best first) and their snippets.

    FTS5's bm25 on the main index would first count every match of each phrase in the
    whole index (its inverse document frequency): 0.5 s for two very common words on a
    million documents, whatever the candidates. A temporary index of the candidates
    costs what their text does (about 30 ms for 1,000 long tool results).
    """
    conn.exec_driver_sql(_RANKED_DDL)
    filled = conn.begin_nested()  # rolled back: emptied at no cost (DELETE re-tokenizes)
    try:
        conn.execute(_RANKED_FILL, {"ids": ids})
        found = conn.execute(_RANKED_BEST, {"query": expression, "limit": limit})
        best = {int(i): float(rank) for i, rank in found}
        marked = conn.execute(
            _RANKED_SNIPPETS,
            {
                "query": expression,
                "ids": list(best),
                "start": MARK_START,
                "end": MARK_END,
                "tokens": SNIPPET_TOKENS,
            },
        )
        snippets = {int(i): str(s or "") for i, s in marked}
    finally:
        filled.rollback()
    return best, snippets


class SqliteIndexing:
    """Indexing on SQLite (see :class:`~desktop_agent.persistence.search_common.Indexing`)."""

    def serialise(self, conn: Connection) -> None:
        """Nothing to do: the transaction holds SQLite's write lock, which serialises them."""

    def insert_fresh(self, conn: Connection, docs: list[dict[str, Any]]) -> list[int]:
        """Insert the documents; under the write lock they took the ids after the largest."""
        conn.execute(insert(search_docs), docs)
        last = int(conn.execute(select(func.max(search_docs.c.id))).scalar_one())
        return [last - len(docs) + 1, last]

    def least(self, a: Any, b: Any) -> ColumnElement[Any]:
        """SQLite's two-argument ``min``."""
        return func.min(a, b)

    def greatest(self, a: Any, b: Any) -> ColumnElement[Any]:
        """SQLite's two-argument ``max``."""
        return func.max(a, b)

    def refresh_statistics(self, db: Database) -> None:
        """Nothing to do: the FTS5 plans do not depend on statistics."""


INDEXING = SqliteIndexing()
"""How SQLite indexes."""
