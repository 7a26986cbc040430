"""Full-text search over everything runs recorded, archived runs included.

SQLite's FTS5 on SQLite (:mod:`~desktop_agent.persistence.search_sqlite`); on PostgreSQL,
the server's full-text search (:mod:`~desktop_agent.persistence.search_postgres`). What
they share (documents, terms, filters, hits) is in
:mod:`~desktop_agent.persistence.search_common`; this module chooses between them
(:data:`_INDEXING` and :func:`search`, by the database's dialect), holds the bounds they
are tuned by, and every name of search is imported from here.

What is indexed: per step, its kind and tool, the model's text and thinking, the tool's
arguments and result, notes (steer steps) and errors, as readable text (the strings of the
JSON, without its keys and punctuation); per run, its goal, title and status message; per
approval, the tool, the arguments, the reason asked, the rule and the analyst's reason;
per note the analyst wrote on a step (kind ``note``), its text.
Everything passes through :func:`~desktop_agent.persistence.redaction.redact` first: a key
that slipped into the journal is never indexed, so searching for it finds nothing.

Where: ``search_docs`` (one row per step, goal or approval) holds the text, which each
database indexes its own way. ``search_runs`` holds what the filters need (status, model,
cost, schedule, batch) and how far each run is indexed. Neither refers to ``runs``: when
retention archives a run and removes its rows, the run's documents stay and are marked
archived, so the analyst still finds them (the archive file holds the full record).

When: off the journal's hot path. The worker's commit does not touch the index; a search
first catches up (:func:`catch_up`): every run whose last step is past its watermark
(``search_runs.indexed_seq``, the last step up to which every step was finished when
indexed) or whose row moved since is indexed again from its watermark, in transactions
of at most :data:`BATCH_STEPS` steps, so a writer waits milliseconds, not the whole
backfill. The archiver catches the runs it removes up in the same transaction as it
removes them. Measured (``bench/search_bench.py``, ``bench/README.md``): triggers on
``steps`` filling the index inside the journal's transaction made a journal step at FULL
1.34x (mean) to 1.68x (median) dearer; catching up costs the journal nothing and indexed
about 24 000 steps a second when a search asked.

How a search reads (:func:`search`): the newest :data:`CANDIDATES` matches that pass the
filters, by document id (indexing order), are ranked among themselves; the best ``limit``
are shown. A date window is a range of ids; run filters that leave a few runs read only
those runs' ids (on SQLite: see each database's module for how, and what it measured).

The query syntax (:func:`terms`) is the analyst's, never FTS5's: plain words (all must
match), "quoted phrases" and ``word*`` prefixes; anything else is quoted, so a query can
only fail with a message saying what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence import search_common, search_postgres, search_sqlite
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.search_common import (
    HOUR,
    MARK_END,
    MARK_START,
    SNIPPET_TOKENS,
    Indexing,
    SearchFilters,
    SearchHit,
    Term,
    mark_archived,
    mark_unarchived,
    readable,
    terms,
)
from desktop_agent.persistence.search_postgres import (
    PG_INDEX,
    PG_SEPARATORS,
    pg_candidates,
    pg_query,
)
from desktop_agent.persistence.search_sqlite import each_run as _each_run
from desktop_agent.persistence.search_sqlite import fts_query
from desktop_agent.persistence.tables import runs, search_runs

__all__ = [
    "ANALYZE_AFTER",
    "BATCH_STEPS",
    "CANDIDATES",
    "HOUR",
    "MARK_END",
    "MARK_START",
    "PG_INDEX",
    "PG_SEPARATORS",
    "RUN_SPANS",
    "SNIPPET_TOKENS",
    "SearchFilters",
    "SearchHit",
    "Term",
    "_each_run",  # read here at each search, so that a test can count the runs read
    "available",
    "catch_up",
    "catch_up_runs",
    "fts_query",
    "index_run",
    "mark_archived",
    "mark_unarchived",
    "pg_candidates",
    "pg_query",
    "readable",
    "search",
    "terms",
]

BATCH_STEPS = 500
"""Most steps indexed per write transaction (a few tens of milliseconds of lock)."""

ANALYZE_AFTER = 10_000
"""Steps indexed by one catch-up after which PostgreSQL's statistics are refreshed at once."""

CANDIDATES = 1000
"""Most matches ranked by relevance in one search: the newest that pass the filters."""

RUN_SPANS = 12
"""Most runs whose id ranges a search reads one by one (SQLite: see
:func:`~desktop_agent.persistence.search_sqlite.candidates`)."""

_INDEXING: dict[str, Indexing] = {
    "sqlite": search_sqlite.INDEXING,
    "postgresql": search_postgres.INDEXING,
}
"""How each database indexes, by SQLAlchemy dialect name (the databases with an index)."""


# --------------------------------------------------------------------------- indexing


def available(db: Database) -> bool:
    """Whether this database has a full-text index: SQLite's FTS5 or PostgreSQL's GIN."""
    return db.writer.dialect.name in _INDEXING


_STALE = (
    select(runs.c.id)
    .select_from(runs.outerjoin(search_runs, search_runs.c.run_id == runs.c.id))
    .where(
        or_(
            search_runs.c.run_id.is_(None),
            runs.c.last_seq > search_runs.c.indexed_seq,
            runs.c.updated_at > search_runs.c.seen_updated_at,
        )
    )
    .order_by(runs.c.created_at)
)
"""Runs with something not yet indexed: new, with steps past the watermark, or moved."""


def catch_up(
    db: Database, run_ids: Sequence[str] | None = None, batch_steps: int = BATCH_STEPS
) -> int:
    """Index what runs recorded since the last catch-up; returns the steps indexed.

    Each run is indexed in its own transactions of at most ``batch_steps`` steps; two
    processes catching up at once each re-read the watermark under the write lock, so no
    step is indexed twice. A no-op on databases without the index.

    Args:
        db: the database.
        run_ids: only these runs (default: every run with something new).
        batch_steps: most steps per transaction.
    """
    if not available(db):
        return 0
    if run_ids is None:
        with db.read() as conn:
            stale = [str(i) for i in conn.execute(_STALE).scalars()]
    else:
        stale = list(run_ids)
    done = 0
    for run_id in stale:
        while True:
            with db.write() as conn:
                indexed, more = index_run(conn, run_id, batch_steps)
            done += indexed
            if not more:
                break
    if done >= ANALYZE_AFTER:
        _INDEXING[db.writer.dialect.name].refresh_statistics(db)
    return done


def catch_up_runs(conn: Connection, run_ids: Sequence[str]) -> None:
    """Index every step of ``run_ids`` not yet indexed, inside the caller's transaction."""
    for run_id in run_ids:
        while index_run(conn, run_id, BATCH_STEPS)[1]:
            pass


def index_run(conn: Connection, run_id: str, batch_steps: int) -> tuple[int, bool]:
    """Index one run from its watermark: at most ``batch_steps`` steps, its goal and approvals.

    See :func:`~desktop_agent.persistence.search_common.index_run`, done the way of the
    connection's database.

    Returns:
        (steps indexed, whether a full batch was indexed and more may follow).
    """
    return search_common.index_run(conn, run_id, batch_steps, _INDEXING[conn.dialect.name])


# --------------------------------------------------------------------------- reading


def search(db: Database, query: str, filters: SearchFilters, limit: int) -> list[SearchHit]:
    """The best ``limit`` of the newest :data:`CANDIDATES` matches, by relevance.

    What the order means exactly: among the documents that match ``query`` and pass
    ``filters``, the :data:`CANDIDATES` (or ``limit``, if more) most recently indexed
    (the highest document ids: indexing order, which follows the steps' times) are the
    candidates. They are ranked by relevance computed among themselves (on SQLite, FTS5's
    bm25 over a temporary index of just them: the same tokens, term frequencies and
    lengths, but each word or phrase of the query weighs the same, being in every
    candidate; on PostgreSQL, ``ts_rank_cd``), best first, then newest (``at``) first; the
    first ``limit`` are returned. So when no more than
    that many documents match with the filters, every match is ranked; when more do, an
    older match never displaces a newer one, however relevant: a search for common words
    shows the best of the recent ones, and a date window (``since``/``until``) reaches
    older ones. The window is read as a range of document ids
    (:func:`~desktop_agent.persistence.search_common.id_range`), so only that part of the
    index is read.

    Reads the index as it is: call :func:`catch_up` first for what was recorded since.

    Raises:
        InvalidInputError: the query cannot be read (see :func:`fts_query`), or this
            database has no index.
    """
    name = db.writer.dialect.name
    bound = max(CANDIDATES, limit)
    if name == "sqlite":
        # The bounds, and the reader of a few runs' ranges, are looked up here at each call
        # (tests tune them).
        return search_sqlite.search(
            db, query, filters, limit, bound, run_spans=RUN_SPANS, by_run=_each_run
        )
    if name == "postgresql":
        return search_postgres.search(db, terms(query), filters, limit, bound)
    raise InvalidInputError("search works on SQLite and PostgreSQL databases only")
