"""Full-text search on PostgreSQL: the server's text search over the same documents.

The same tables hold the same documents, indexed by the server (migration 0008): each
document's words in a stored generated column (``to_tsvector('simple', ...)`` of the text
with ASCII punctuation read as spaces, see :data:`PG_SEPARATORS`), a GIN index on it, and
the ``search_hours`` trigger. The analyst's terms
(:func:`~desktop_agent.persistence.search_common.terms`) become a ``tsquery``
(:func:`pg_query`); the candidates are again the newest ``CANDIDATES`` matches that pass
the filters, a date window again a range of ids, ranked by ``ts_rank_cd``, with snippets
cut as FTS5's are. Indexing transactions hold one advisory lock (as SQLite's write lock
serialises them: :data:`INDEXING`). The difference left: ``simple`` does not fold
accents. Measured at 1,000,000 documents (``bench/README.md``): phrases of content words
p95 20 ms, phrases of very common words p95 0.5 s, at worst 0.9 s (the planner walks the
newest documents, reading each one's words).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, insert, literal_column, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import ColumnClause, ColumnElement

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.search_common import (
    MARK_END,
    MARK_START,
    SHOWN,
    SNIPPET_TOKENS,
    SearchFilters,
    SearchHit,
    Term,
    doc_conditions,
    hit,
    id_range,
    run_conditions,
)
from desktop_agent.persistence.tables import search_docs, search_runs

_PG_CONFIG: ColumnClause[Any] = literal_column("'simple'::regconfig")
"""The text search configuration: lower-cased words, no stemming, no stop words (as the
SQLite index's ``unicode61`` tokenizer, which also folds diacritics, as this does not)."""

PG_SEPARATORS = "!\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~"
"""ASCII punctuation, read as spaces before PostgreSQL's parser sees the text (``%`` aside:
the parser already splits there, and the driver would read it as a placeholder). The
parser would otherwise keep ``tangerine-outage.md``, ``a@b.org`` or ``v1.2`` as one word,
where FTS5 sees words ("tangerine outage" finds the first on SQLite: so it must here)."""

_PG_SPACES = str.maketrans(PG_SEPARATORS, " " * len(PG_SEPARATORS))

_PG_VECTOR: ColumnClause[Any] = literal_column("search_docs.body_tsv")
"""A document's words: a stored generated column of migration 0008 (``to_tsvector``
of the text with :data:`PG_SEPARATORS` as spaces), which its GIN index covers. Stored, as
a phrase makes the server check each candidate again: from the text, 98 s for a phrase of
common words in a million documents; from the column, under a second."""

PG_INDEX = "ix_search_docs_body_tsv"
"""Migration 0008's index (outside the tables' declaration, as SQLite's FTS5 table is)."""

_PG_INDEX_LOCK = 0x5EA2C4_0008
"""The advisory lock an indexing transaction holds on PostgreSQL (see :func:`index_run`)."""


def pg_query(found: list[Term]) -> ColumnElement[Any]:
    """The terms as one ``tsquery``: every term, with punctuation read as spaces.

    A word or phrase is ``phraseto_tsquery`` of it (bound text, never read as tsquery
    syntax); a prefix is ``to_tsquery`` of its words quoted, the last with ``:*`` (the
    words hold no quote or backslash: those are separators).
    """
    parts: list[ColumnElement[Any]] = []
    for term in found:
        words = term.text.translate(_PG_SPACES).split()
        if not words:
            continue  # only punctuation: FTS5 finds no token in it either
        if term.prefix:
            quoted = " <-> ".join(f"'{w}'" for w in words) + ":*"
            parts.append(func.to_tsquery(_PG_CONFIG, quoted))
        else:
            parts.append(func.phraseto_tsquery(_PG_CONFIG, " ".join(words)))
    if not parts:
        raise InvalidInputError("the search has no word in it: give a word or a phrase")
    query = parts[0]
    for part in parts[1:]:
        query = query.op("&&")(part)
    return query


def pg_candidates(
    conn: Connection, query: ColumnElement[Any], f: SearchFilters, bound: int
) -> Select[tuple[int]] | None:
    """The newest ``bound`` matches of ``query`` (:func:`pg_query`) that pass the filters.

    On PostgreSQL; a statement.

    The planner chooses, from the statistics of the words (ANALYZE of the GIN index): for
    rare words, the index's bitmap of every match; for common ones, the primary key newest
    first, each document's stored words tested, up to ``bound`` matches. A date window
    is a range of ids there too (:func:`id_range`). ``None``: no document in the window.
    """
    d = search_docs.c
    stmt = (
        select(d.id)
        .select_from(search_docs)
        .join(search_runs, search_runs.c.run_id == d.run_id)
        .where(_PG_VECTOR.op("@@")(query), *run_conditions(f), *doc_conditions(f))
        .order_by(d.id.desc())
        .limit(bound)
    )
    if f.since is not None or f.until is not None:
        bounds = id_range(conn, f)
        if bounds is None:
            return None
        stmt = stmt.where(d.id.between(*bounds))
    return stmt


def search(
    db: Database, found: list[Term], f: SearchFilters, limit: int, bound: int
) -> list[SearchHit]:
    """The best ``limit`` of the newest ``bound`` matches, by ``ts_rank_cd``.

    The best ``limit`` of the candidates (:func:`pg_candidates`) by ``ts_rank_cd``, then
    newest first, with snippets cut as FTS5 cuts them (:func:`_snippet`). See
    :func:`desktop_agent.persistence.search.search` for what the order means.
    """
    query = pg_query(found)
    d = search_docs.c
    rank = func.ts_rank_cd(_PG_VECTOR, query)
    with db.read() as conn:
        newest = pg_candidates(conn, query, f, bound)
        if newest is None:
            return []
        candidates = newest.subquery()
        ranked = (
            select(d.id, rank)
            .where(d.id.in_(select(candidates.c.id)))
            .order_by(rank.desc(), d.at.desc(), d.id.desc())
            .limit(limit)
        )
        best = {int(i): -float(r) for i, r in conn.execute(ranked)}  # lower is better, as bm25
        if not best:
            return []
        bodies = conn.execute(select(d.id, d.body).where(d.id.in_(list(best))))
        snippets = {int(i): _snippet(str(body or ""), found) for i, body in bodies}
        shown = {int(r["id"]): r for r in conn.execute(SHOWN, {"ids": list(best)}).mappings()}
    return [hit(shown[i], snippets.get(i, ""), rank) for i, rank in best.items()]


_WORD = re.compile(r"[^\W_]+")
"""A word as FTS5's ``unicode61`` sees one: letters and digits."""


def _term_pattern(term: Term) -> str:
    """A regular expression for where ``term`` matches in a document's text."""
    words = _WORD.findall(term.text)
    if not words:
        return ""
    joined = r"[\W_]+".join(re.escape(w) for w in words)
    return r"(?<![^\W_])" + joined + (r"[^\W_]*" if term.prefix else r"(?![^\W_])")


def _snippet(body: str, found: list[Term]) -> str:
    """About :data:`SNIPPET_TOKENS` words of ``body`` around its first match, marked.

    As FTS5's ``snippet`` shows them (PostgreSQL's ``ts_headline`` reads words its own
    way, and would mark none of ``tangerine-outage.md`` for "tangerine outage"): the
    matches between :data:`MARK_START` and :data:`MARK_END`, ``…`` where text was cut.
    """
    text = " ".join(body.split())
    tokens = list(_WORD.finditer(text))
    if not tokens:
        return text[:200]
    patterns = [f"(?:{p})" for p in map(_term_pattern, found) if p]
    matches = list(re.finditer("|".join(patterns), text, re.IGNORECASE)) if patterns else []
    first = matches[0].start() if matches else 0
    at = next((i for i, t in enumerate(tokens) if t.end() > first), 0)
    low = max(0, min(at - SNIPPET_TOKENS // 4, len(tokens) - SNIPPET_TOKENS))
    high = min(len(tokens), low + SNIPPET_TOKENS)
    start = 0 if low == 0 else tokens[low].start()
    end = len(text) if high == len(tokens) else tokens[high - 1].end()
    out = ["…" if start > 0 else ""]
    pos = start
    for m in matches:
        a, b = max(m.start(), pos), min(m.end(), end)
        if a < b:
            out += [text[pos:a], MARK_START, text[a:b], MARK_END]
            pos = b
    out += [text[pos:end], "…" if end < len(text) else ""]
    return "".join(out)


class PostgresIndexing:
    """Indexing on PostgreSQL (see :class:`~desktop_agent.persistence.search_common.Indexing`)."""

    def serialise(self, conn: Connection) -> None:
        """Take the one advisory lock of all indexing, until the transaction ends.

        Two indexers catching up at once would both read the same watermark and index the
        same steps twice, and the hours trigger's row locks, taken in the order of the
        documents' times, could deadlock two runs' batches. (Short transactions; the
        journal's commits never take it.)
        """
        conn.execute(select(func.pg_advisory_xact_lock(_PG_INDEX_LOCK)))

    def insert_fresh(self, conn: Connection, docs: list[dict[str, Any]]) -> list[int]:
        """Insert the documents, asking which ids they took (others take from the sequence)."""
        taken = conn.execute(insert(search_docs).returning(search_docs.c.id), docs).scalars()
        return [int(i) for i in taken]

    def least(self, a: Any, b: Any) -> ColumnElement[Any]:
        """PostgreSQL's ``least``."""
        return func.least(a, b)

    def greatest(self, a: Any, b: Any) -> ColumnElement[Any]:
        """PostgreSQL's ``greatest``."""
        return func.greatest(a, b)

    def refresh_statistics(self, db: Database) -> None:
        """``ANALYZE search_docs``.

        The planner picks between the GIN bitmap and the newest-first walk by the words'
        statistics; without them, one query of the bench took 10.5 s after a backfill.
        """
        with db.write() as conn:
            conn.exec_driver_sql("ANALYZE search_docs")


INDEXING = PostgresIndexing()
"""How PostgreSQL indexes."""
