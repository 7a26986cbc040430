"""Full-text search over everything runs recorded, archived runs included.

SQLite's FTS5 on SQLite; on PostgreSQL, the server's full-text search (see the end).

What is indexed: per step, its kind and tool, the model's text and thinking, the tool's
arguments and result, notes (steer steps) and errors, as readable text (the strings of the
JSON, without its keys and punctuation); per run, its goal, title and status message; per
approval, the tool, the arguments, the reason asked, the rule and the analyst's reason;
per note the analyst wrote on a step (kind ``note``), its text.
Everything passes through :func:`~desktop_agent.persistence.redaction.redact` first: a key
that slipped into the journal is never indexed, so searching for it finds nothing.

Where: ``search_docs`` (one row per step, goal or approval) holds the text, and the FTS5
table ``search_fts`` indexes it as *external content* (the text is stored once); triggers
on ``search_docs`` keep the two in step. ``search_runs`` holds what the filters need (status,
model, cost, schedule, batch) and how far each run is indexed. Neither refers to ``runs``:
when retention archives a run and removes its rows, the run's documents stay and are
marked archived, so the analyst still finds them (the archive file holds the full record).
Tokenizer ``unicode61 remove_diacritics 2`` without ``porter``: stemming is English-only and
turns exact terms (names, figures, file names) into fuzzy ones; ``word*`` asks for
prefixes when the analyst wants them.

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

The query syntax (:func:`terms`) is the analyst's, never FTS5's: plain words (all must
match), "quoted phrases" and ``word*`` prefixes; anything else is quoted, so a query can
only fail with a message saying what is wrong with it.

On PostgreSQL the same tables hold the same documents, indexed by the server (migration
0008): each document's words in a stored generated column (``to_tsvector('simple', ...)``
of the text with ASCII punctuation read as spaces, see :data:`PG_SEPARATORS`), a GIN index
on it, and the ``search_hours`` trigger. The same terms become a ``tsquery``
(:func:`pg_query`); the candidates are again the newest :data:`CANDIDATES` matches that
pass the filters, a date window again a range of ids, ranked by ``ts_rank_cd``, with
snippets cut as FTS5's are. Indexing transactions hold one advisory lock (as SQLite's
write lock serialises them). The difference left: ``simple`` does not fold accents.
Measured at 1,000,000 documents (``bench/README.md``): phrases of content words p95 20 ms,
phrases of very common words p95 0.5 s, at worst 0.9 s (the planner walks the newest
documents, reading each one's words).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    bindparam,
    column,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    text,
    update,
)
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import BindParameter, ColumnClause, ColumnElement

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.text import check_text
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import spec_model
from desktop_agent.persistence.redaction import redact
from desktop_agent.persistence.tables import (
    approvals,
    batch_items,
    runs,
    search_docs,
    search_hours,
    search_runs,
    step_notes,
    steps,
)

BATCH_STEPS = 500
"""Most steps indexed per write transaction (a few tens of milliseconds of lock)."""

ANALYZE_AFTER = 10_000
"""Steps indexed by one catch-up after which PostgreSQL's statistics are refreshed at once."""

CANDIDATES = 1000
"""Most matches ranked by relevance in one search: the newest that pass the filters."""

RUN_SPANS = 12
"""Most runs whose id ranges a search reads one by one (see :func:`_candidates`)."""

HOUR = 3600
"""Seconds of ``at`` per row of ``search_hours`` (the ids indexed for that hour)."""

MARK_START, MARK_END = "\x02", "\x03"
"""What the index's snippets put around a match (never in indexed text: stripped)."""

SNIPPET_TOKENS = 16
"""Words of context a snippet shows around the match."""

_SKIPPED_KEYS = frozenset(
    {"type", "id", "tool_use_id", "stop_reason", "model", "sha256", "signature", "is_error"}
)
"""JSON keys whose values are bookkeeping, not text an analyst searches for."""

_TERM = re.compile(r'"([^"]*)"|(\S+)')

_FTS: ColumnClause[Any] = literal_column("search_fts")
"""The FTS5 table, as its functions (``bm25``, ``snippet``) and ``MATCH`` take it."""

_FTS_TABLE = table("search_fts", column("rowid"))
"""The FTS5 table, as a FROM clause."""


@dataclass(frozen=True)
class SearchFilters:
    """What narrows a search; each ``None`` or empty field is no filter.

    Attributes:
        statuses: run statuses (``completed``, ``failed``, ...).
        models: model ids of the runs.
        tools: tool names of the steps (or approvals).
        kinds: step kinds (``model_call``, ``tool_call``, ...; ``goal`` for a run's goal).
        since: steps at or after this time (seconds since the epoch).
        until: steps before this time.
        cost_above: runs that cost more than this, in dollars.
        cost_below: runs that cost less than this, in dollars.
        schedule_id: runs started by this schedule.
        batch_id: runs of this batch.
        archived: True only archived runs, False only runs still in the database, None both.
    """

    statuses: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    cost_above: float | None = None
    cost_below: float | None = None
    schedule_id: str | None = None
    batch_id: str | None = None
    archived: bool | None = None


@dataclass(frozen=True)
class SearchHit:
    """One matching step, goal or approval.

    Attributes:
        run_id: the run.
        seq: the step's sequence number (0 for the run's goal).
        kind: the step kind, ``goal``, or ``approval`` for an approval's decision.
        tool: the tool called or asked for ("" when none).
        snippet: the matching text around the match, on one line.
        spans: (start, end) offsets of the matched words in ``snippet``.
        at: when the step started (the run was created, the approval was decided).
        archived: the run was archived (its full record is in an archive file).
        goal: the run's title, or its goal.
        run_status: the run's status when last indexed.
    """

    run_id: str
    seq: int
    kind: str
    tool: str
    snippet: str
    spans: tuple[tuple[int, int], ...]
    at: float
    archived: bool
    goal: str
    run_status: str
    rank: float = field(default=0.0, compare=False)


# --------------------------------------------------------------------------- query syntax


@dataclass(frozen=True)
class Term:
    """One term of the analyst's query: a word or a phrase, matched as a prefix or whole."""

    text: str
    prefix: bool = False


def terms(text: str) -> list[Term]:
    """The analyst's query as its terms, every one of which must match.

    Words and "quoted phrases"; a word ending in ``*`` matches as a prefix. Anything else
    (``AND``, ``-``, ``:`` or ``(``) is plain text.

    Raises:
        InvalidInputError: the query is empty, has an unmatched double quote, a ``*``
            that follows no word, or a NUL, a lone surrogate or a control character
            other than a tab or a line break (:func:`~desktop_agent.domain.text.check_text`).
    """
    check_text(text, "the search")
    if text.count('"') % 2:
        raise InvalidInputError('the search has an unmatched double quote (")')
    found: list[Term] = []
    for match in _TERM.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if phrase is not None:
            if phrase.strip():
                found.append(Term(phrase))
            continue
        core = word.rstrip("*")
        if not core:
            raise InvalidInputError("a * in the search must end a word, as in report*")
        if "*" in core:
            raise InvalidInputError(f"{word!r}: a * may only end a word, as in report*")
        found.append(Term(core, prefix=word.endswith("*")))
    if not found:
        raise InvalidInputError("the search is empty: give a word or a quoted phrase")
    return found


def fts_query(text: str) -> str:
    """The analyst's query (see :func:`terms`) as an FTS5 expression: every term must match.

    Every term is quoted for FTS5, so FTS5's own syntax in it is plain text.
    """
    return " AND ".join(_quoted(t.text) + (" *" if t.prefix else "") for t in terms(text))


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


# --------------------------------------------------------------------------- text


def readable(value: Any) -> str:
    """The strings of a JSON value (decoded or as text), one per line, keys left out."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return "\n".join(_strings(value))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _SKIPPED_KEYS:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _clean(*parts: str | None) -> str:
    text = "\n".join(p for p in parts if p)
    return str(redact(text)).replace(MARK_START, " ").replace(MARK_END, " ")


def _step_doc(run_id: str, row: RowMapping) -> dict[str, Any]:
    kind, name = str(row["kind"]), str(row["name"])
    tool = name if kind == "tool_call" else ""
    output = row["output"] if row["output"] else None
    body = _clean(
        f"{kind} {name}",
        readable(row["input"]) if row["input"] else None,
        readable(output) if output else row["partial_text"],
        readable(row["error"]) if row["error"] else None,
    )
    return _doc(run_id, int(row["seq"]), "step", kind, tool, float(row["started_at"]), body)


def _approval_doc(run_id: str, row: RowMapping) -> dict[str, Any]:
    body = _clean(
        f"approval {row['tool']} {row['state']}",
        readable(row["arguments"]) if row["arguments"] else None,
        row["reason"],
        row["rule"],
        readable(row["decided_arguments"]) if row["decided_arguments"] else None,
        row["decision_note"],
    )
    at = float(row["decided_at"] or row["created_at"])
    return _doc(run_id, int(row["seq"]), "approval", "approval", str(row["tool"]), at, body)


def _note_doc(run_id: str, row: RowMapping) -> dict[str, Any]:
    body = _clean("note", row["text"])
    return _doc(run_id, int(row["seq"]), "note", "note", "", float(row["created_at"]), body)


def _goal_doc(row: RowMapping) -> dict[str, Any]:
    title = row["title"] if row["title"] != row["goal"] else ""
    body = _clean(title, row["goal"], row["status_message"])
    return _doc(str(row["id"]), 0, "run", "goal", "", float(row["created_at"]), body)


def _doc(
    run_id: str, seq: int, source: str, kind: str, tool: str, at: float, body: str
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "seq": seq,
        "source": source,
        "kind": kind,
        "tool": tool,
        "at": at,
        "body": body,
    }


# --------------------------------------------------------------------------- indexing


def available(db: Database) -> bool:
    """Whether this database has a full-text index: SQLite's FTS5 or PostgreSQL's GIN."""
    return db.writer.dialect.name in ("sqlite", "postgresql")


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
    if done >= ANALYZE_AFTER and not db.is_sqlite:
        # The planner picks between the GIN bitmap and the newest-first walk by the words'
        # statistics; without them, one query of the bench took 10.5 s after a backfill.
        with db.write() as conn:
            conn.exec_driver_sql("ANALYZE search_docs")
    return done


def catch_up_runs(conn: Connection, run_ids: Sequence[str]) -> None:
    """Index every step of ``run_ids`` not yet indexed, inside the caller's transaction."""
    for run_id in run_ids:
        while index_run(conn, run_id, BATCH_STEPS)[1]:
            pass


def mark_archived(conn: Connection, run_ids: Sequence[str]) -> None:
    """Mark the runs' documents archived (their rows are about to be removed)."""
    stmt = update(search_runs).where(search_runs.c.run_id.in_(list(run_ids)))
    conn.execute(stmt.values(archived=True))


def index_run(conn: Connection, run_id: str, batch_steps: int) -> tuple[int, bool]:
    """Index one run from its watermark: at most ``batch_steps`` steps, its goal and approvals.

    Documents of the steps after the watermark (an open step indexed before) are replaced;
    the watermark moves to the last step up to which every step is finished.

    Returns:
        (steps indexed, whether a full batch was indexed and more may follow).
    """
    on_sqlite = conn.dialect.name == "sqlite"
    if not on_sqlite:
        # SQLite's write lock serialises indexers; on PostgreSQL two catching up at once
        # would both read the same watermark and index the same steps twice, and the
        # hours trigger's row locks, taken in the order of the documents' times, could
        # deadlock two runs' batches. One lock for all indexing (short transactions; the
        # journal's commits never take it).
        conn.execute(select(func.pg_advisory_xact_lock(_PG_INDEX_LOCK)))
    run = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
    if run is None:
        return 0, False
    progress = conn.execute(
        select(search_runs.c.indexed_seq).where(search_runs.c.run_id == run_id)
    ).scalar()
    mark = int(progress or 0)
    rows = (
        conn.execute(
            select(steps)
            .where(steps.c.run_id == run_id, steps.c.seq > mark)
            .order_by(steps.c.seq)
            .limit(batch_steps)
        )
        .mappings()
        .all()
    )
    of_run = search_docs.c.run_id == run_id
    conn.execute(
        delete(search_docs).where(of_run, search_docs.c.source == "step", search_docs.c.seq > mark)
    )
    # The goal and the approvals are indexed again each time: under the ids they had, so
    # that they do not pass for the newest documents (a search reads newest ids first).
    # The analyst's notes on steps likewise (a note is never removed either).
    again = of_run & search_docs.c.source.in_(["run", "approval", "note"])
    kept = conn.execute(
        select(search_docs.c.source, search_docs.c.id).where(again).order_by(search_docs.c.id)
    ).all()
    old_ids = {
        source: [int(i) for s, i in kept if s == source] for source in ("run", "approval", "note")
    }
    conn.execute(delete(search_docs).where(again))
    asked = select(approvals).where(approvals.c.run_id == run_id).order_by(approvals.c.created_at)
    noted = select(step_notes).where(step_notes.c.run_id == run_id).order_by(step_notes.c.id)
    reused, fresh = _with_old_ids(
        [_goal_doc(run)],
        [_approval_doc(run_id, a) for a in conn.execute(asked).mappings()],
        old_ids,
        [_note_doc(run_id, n) for n in conn.execute(noted).mappings()],
    )
    fresh += [_step_doc(run_id, r) for r in rows]
    if reused:
        conn.execute(insert(search_docs), reused)
    ids = [int(d["id"]) for d in reused]
    if fresh and on_sqlite:
        conn.execute(insert(search_docs), fresh)
        # Under the write lock, the documents just inserted took the ids after the largest.
        last = int(conn.execute(select(func.max(search_docs.c.id))).scalar_one())
        ids += [last - len(fresh) + 1, last]
    elif fresh:
        # Other writers take ids from the same sequence meanwhile: ask which ours are.
        taken = conn.execute(insert(search_docs).returning(search_docs.c.id), fresh).scalars()
        ids += [int(i) for i in taken]
    first, last = min(ids), max(ids)  # the goal is always there: never empty
    for r in rows:
        if r["status"] == "started":
            break
        mark = int(r["seq"])
    _save_progress(conn, run, mark, (first, last))
    return len(rows), len(rows) == batch_steps and mark == int(rows[-1]["seq"])


def _with_old_ids(
    goal: list[dict[str, Any]],
    asked: list[dict[str, Any]],
    old_ids: dict[str, list[int]],
    noted: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The goal, approval and note documents that take back an id, and those that need one.

    The goal takes the run's former goal id; approvals take the former approval ids in the
    order they were asked (an approval is never removed from a run, so the i-th keeps its id);
    notes the former note ids in the order they were written.
    """
    reused: list[dict[str, Any]] = []
    fresh: list[dict[str, Any]] = []
    for source, docs in (("run", goal), ("approval", asked), ("note", noted or [])):
        ids = old_ids.get(source, [])
        for i, doc in enumerate(docs):
            if i < len(ids):
                reused.append({**doc, "id": ids[i]})
            else:
                fresh.append(doc)
    return reused, fresh


def _save_progress(conn: Connection, run: RowMapping, mark: int, doc_ids: tuple[int, int]) -> None:
    batch = conn.execute(
        select(batch_items.c.batch_id).where(batch_items.c.run_id == run["id"]).limit(1)
    ).scalar()
    values = {
        "goal": run["goal"],
        "title": run["title"],
        "status": run["status"],
        "model": spec_model(str(run["spec"]), ""),
        "cost_usd": run["cost_usd"],
        "schedule_id": run["schedule_id"],
        "batch_id": batch,
        "created_at": run["created_at"],
        "indexed_seq": mark,
        "seen_updated_at": run["updated_at"],
        "archived": False,
    }
    first, last = doc_ids
    r = search_runs.c
    sqlite = conn.dialect.name == "sqlite"
    lesser, greater = (func.min, func.max) if sqlite else (func.least, func.greatest)
    widened = {
        "first_doc_id": lesser(func.coalesce(r.first_doc_id, first), first),
        "last_doc_id": greater(func.coalesce(r.last_doc_id, last), last),
    }
    found = update(search_runs).where(r.run_id == run["id"]).values(**values, **widened)
    if conn.execute(found).rowcount == 0:
        conn.execute(
            insert(search_runs).values(
                run_id=run["id"], first_doc_id=first, last_doc_id=last, **values
            )
        )


# --------------------------------------------------------------------------- reading


def _run_conditions(f: SearchFilters) -> list[ColumnElement[bool]]:
    r = search_runs.c
    conditions = [
        r.status.in_(f.statuses) if f.statuses else None,
        r.model.in_(f.models) if f.models else None,
        r.cost_usd > f.cost_above if f.cost_above is not None else None,
        r.cost_usd < f.cost_below if f.cost_below is not None else None,
        r.schedule_id == f.schedule_id if f.schedule_id else None,
        r.batch_id == f.batch_id if f.batch_id else None,
        r.archived.is_(f.archived) if f.archived is not None else None,
    ]
    return [c for c in conditions if c is not None]


def _doc_conditions(f: SearchFilters) -> list[ColumnElement[bool]]:
    d = search_docs.c
    conditions = [
        d.tool.in_(f.tools) if f.tools else None,
        d.kind.in_(f.kinds) if f.kinds else None,
        d.at >= f.since if f.since is not None else None,
        d.at < f.until if f.until is not None else None,
    ]
    return [c for c in conditions if c is not None]


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

_SHOWN = (
    select(
        search_docs.c.id,
        search_docs.c.run_id,
        search_docs.c.seq,
        search_docs.c.kind,
        search_docs.c.tool,
        search_docs.c.at,
        search_runs.c.goal,
        search_runs.c.title,
        search_runs.c.status,
        search_runs.c.archived,
    )
    .select_from(search_docs)
    .join(search_runs, search_runs.c.run_id == search_docs.c.run_id)
    .where(search_docs.c.id.in_(bindparam("ids", expanding=True)))
)
"""What a hit shows, for the documents kept."""

_HOURS = select(func.min(search_hours.c.first_id), func.max(search_hours.c.last_id))
"""The document ids indexed for a stretch of hours (see :data:`HOUR`)."""


def _id_range(conn: Connection, f: SearchFilters) -> tuple[int, int] | None:
    """Document ids that hold every document dated within ``since``/``until``.

    A superset (the exact filter on ``at`` still applies): ``search_hours`` keeps the
    lowest and highest id ever indexed per hour of ``at``; ids of deleted documents stay
    in it. ``None`` when no document was ever indexed for those hours.
    """
    stmt = _HOURS
    if f.since is not None:
        stmt = stmt.where(search_hours.c.hour >= _hour_of(f.since))
    if f.until is not None:
        stmt = stmt.where(search_hours.c.hour <= _hour_of(f.until))
    low, high = conn.execute(stmt).one()
    return None if low is None else (int(low), int(high))


def _hour_of(at: float) -> int:
    """The hour of ``at`` as the triggers compute it: ``at / 3600``, truncated.

    Times are positive: SQLite's ``CAST`` and PostgreSQL's ``floor`` agree.
    """
    return math.floor(at / HOUR)


def _candidates(conn: Connection, expression: str, f: SearchFilters, bound: int) -> list[int]:
    """The ids of the newest ``bound`` matches that pass the filters, newest first.

    FTS5 reads the id range of the date window (:func:`_id_range`) newest first and stops
    at the ``bound``-th match that passes the filters. When the run filters leave at most
    :data:`RUN_SPANS` runs whose documents lie within a quarter of that range or less, it
    reads each of those runs' ids instead (``search_runs.first_doc_id``/``last_doc_id``,
    a superset of where a run's documents are), every match of them, before the newest
    ``bound`` are kept.
    """
    fts_id = _FTS_TABLE.c.rowid
    low, high = 0, None
    if f.since is not None or f.until is not None:
        bounds = _id_range(conn, f)
        if bounds is None:
            return []
        low, high = bounds
    of_runs = _run_conditions(f)
    stmt = _CANDIDATES.where(*of_runs, *_doc_conditions(f))
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
        if not unplaced and n <= RUN_SPANS and int(width) * 4 <= high - low + 1:
            spans = conn.execute(select(r.run_id, span_low, span_high).where(*narrowed)).all()
            return _each_run(conn, expression, f, [tuple(s) for s in spans], bound)
    if high is not None:
        stmt = stmt.where(fts_id.between(low, high))
    newest = stmt.order_by(fts_id.desc()).limit(bound)
    return [int(i) for i in conn.execute(newest, {"query": expression}).scalars()]


def _each_run(
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


def search(db: Database, query: str, filters: SearchFilters, limit: int) -> list[SearchHit]:
    """The best ``limit`` of the newest :data:`CANDIDATES` matches, by relevance.

    What the order means exactly: among the documents that match ``query`` and pass
    ``filters``, the :data:`CANDIDATES` (or ``limit``, if more) most recently indexed
    (the highest document ids: indexing order, which follows the steps' times) are the
    candidates. They are ranked by bm25 computed among themselves (FTS5's bm25 over a
    temporary index of just them: the same tokens, term frequencies and lengths, but each
    word or phrase of the query weighs the same, being in every candidate), best first,
    then newest (``at``) first; the first ``limit`` are returned. So when no more than
    that many documents match with the filters, every match is ranked; when more do, an
    older match never displaces a newer one, however relevant: a search for common words
    shows the best of the recent ones, and a date window (``since``/``until``) reaches
    older ones. The window is read as a range of document ids (:func:`_id_range`), so
    FTS5 reads only that part of the index.

    Reads the index as it is: call :func:`catch_up` first for what was recorded since.

    Raises:
        InvalidInputError: the query cannot be read (see :func:`fts_query`), or this
            database has no index.
    """
    if not available(db):
        raise InvalidInputError("search works on SQLite and PostgreSQL databases only")
    if not db.is_sqlite:
        return _pg_search(db, terms(query), filters, limit)
    expression = fts_query(query)
    try:
        with db.read() as conn:
            ids = _candidates(conn, expression, filters, max(CANDIDATES, limit))
            if not ids:
                return []
            best, snippets = _ranked(conn, expression, ids, limit)
            shown = {int(r["id"]): r for r in conn.execute(_SHOWN, {"ids": list(best)}).mappings()}
    except OperationalError as exc:
        if "fts5" in str(exc.orig) or "MATCH" in str(exc.orig):
            raise InvalidInputError(
                f'cannot read the search {query!r}; use words, "phrases" and word*'
            ) from None
        raise
    return [_hit(shown[i], snippets.get(i, ""), rank) for i, rank in best.items()]


def _ranked(
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


def _hit(row: RowMapping, marked: str, rank: float) -> SearchHit:
    snippet, spans = _marked(" ".join(marked.split()))
    return SearchHit(
        run_id=str(row["run_id"]),
        seq=int(row["seq"]),
        kind=str(row["kind"]),
        tool=str(row["tool"]),
        snippet=snippet,
        spans=spans,
        at=float(row["at"]),
        archived=bool(row["archived"]),
        goal=str(row["title"] or row["goal"]),
        run_status=str(row["status"]),
        rank=rank,
    )


def _marked(text: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``text`` without the match marks, and where the marked parts are in it.

    Marked parts with only spaces between them are one part: FTS5 marks a matched phrase
    as a whole, PostgreSQL's ``ts_headline`` word by word.
    """
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    length, start = 0, -1
    for ch in text:
        if ch == MARK_START:
            start = length
        elif ch == MARK_END:
            if start >= 0:
                if spans and not "".join(out[spans[-1][1] : start]).strip():
                    spans[-1] = (spans[-1][0], length)
                else:
                    spans.append((start, length))
            start = -1
        else:
            out.append(ch)
            length += 1
    return "".join(out), tuple(spans)


# --------------------------------------------------------------------------- PostgreSQL

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
    is a range of ids there too (:func:`_id_range`). ``None``: no document in the window.
    """
    d = search_docs.c
    stmt = (
        select(d.id)
        .select_from(search_docs)
        .join(search_runs, search_runs.c.run_id == d.run_id)
        .where(_PG_VECTOR.op("@@")(query), *_run_conditions(f), *_doc_conditions(f))
        .order_by(d.id.desc())
        .limit(bound)
    )
    if f.since is not None or f.until is not None:
        bounds = _id_range(conn, f)
        if bounds is None:
            return None
        stmt = stmt.where(d.id.between(*bounds))
    return stmt


def _pg_search(db: Database, found: list[Term], f: SearchFilters, limit: int) -> list[SearchHit]:
    """:func:`search` on PostgreSQL: the same candidates, ranked by ``ts_rank_cd``.

    The best ``limit`` of the candidates (:func:`pg_candidates`) by ``ts_rank_cd``, then
    newest first, with snippets cut as FTS5 cuts them (:func:`_snippet`).
    """
    query = pg_query(found)
    d = search_docs.c
    rank = func.ts_rank_cd(_PG_VECTOR, query)
    with db.read() as conn:
        newest = pg_candidates(conn, query, f, max(CANDIDATES, limit))
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
        shown = {int(r["id"]): r for r in conn.execute(_SHOWN, {"ids": list(best)}).mappings()}
    return [_hit(shown[i], snippets.get(i, ""), rank) for i, rank in best.items()]


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


def mark_unarchived(conn: Connection, run_ids: Sequence[str]) -> None:
    """Mark the runs' documents as the database's again (the runs were brought back)."""
    stmt = update(search_runs).where(search_runs.c.run_id.in_(list(run_ids)))
    conn.execute(stmt.values(archived=False))
