"""Full-text search over everything runs recorded, archived runs included (SQLite FTS5).

What is indexed: per step, its kind and tool, the model's text and thinking, the tool's
arguments and result, notes (steer steps) and errors, as readable text (the strings of the
JSON, without its keys and punctuation); per run, its goal, title and status message; per
approval, the tool, the arguments, the reason asked, the rule and the analyst's reason.
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

The query syntax (:func:`fts_query`) is the analyst's, never FTS5's: plain words (all must
match), "quoted phrases" and ``word*`` prefixes; anything else is quoted, so a query can
only fail with a message saying what is wrong with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Select,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import ColumnClause

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.redaction import redact
from desktop_agent.persistence.tables import (
    approvals,
    batch_items,
    runs,
    search_docs,
    search_runs,
    steps,
)

BATCH_STEPS = 500
"""Most steps indexed per write transaction (a few tens of milliseconds of lock)."""

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


def fts_query(text: str) -> str:
    """The analyst's query as an FTS5 expression: every term must match.

    Words and "quoted phrases" are quoted for FTS5 (so ``AND``, ``-``, ``:`` or ``(`` in
    them are plain text); a word ending in ``*`` matches as a prefix.

    Raises:
        InvalidInputError: the query is empty, has an unmatched double quote, or a ``*``
            that follows no word.
    """
    if text.count('"') % 2:
        raise InvalidInputError('the search has an unmatched double quote (")')
    terms: list[str] = []
    for match in _TERM.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if phrase is not None:
            if phrase.strip():
                terms.append(_quoted(phrase))
            continue
        prefix = word.endswith("*")
        core = word.rstrip("*")
        if not core:
            raise InvalidInputError("a * in the search must end a word, as in report*")
        if "*" in core:
            raise InvalidInputError(f"{word!r}: a * may only end a word, as in report*")
        terms.append(_quoted(core) + (" *" if prefix else ""))
    if not terms:
        raise InvalidInputError("the search is empty: give a word or a quoted phrase")
    return " AND ".join(terms)


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


def _model_of(spec: str) -> str:
    try:
        value = json.loads(spec)
    except ValueError:
        return ""
    return str(value.get("model", "")) if isinstance(value, dict) else ""


# --------------------------------------------------------------------------- indexing


def available(db: Database) -> bool:
    """Whether this database has the full-text index (SQLite only, for now)."""
    return db.is_sqlite


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
    conn.execute(delete(search_docs).where(of_run, search_docs.c.source.in_(["run", "approval"])))
    docs = [_goal_doc(run), *(_step_doc(run_id, r) for r in rows)]
    asked = select(approvals).where(approvals.c.run_id == run_id).order_by(approvals.c.created_at)
    docs += [_approval_doc(run_id, a) for a in conn.execute(asked).mappings()]
    conn.execute(insert(search_docs), docs)
    for r in rows:
        if r["status"] == "started":
            break
        mark = int(r["seq"])
    _save_progress(conn, run, mark)
    return len(rows), len(rows) == batch_steps and mark == int(rows[-1]["seq"])


def _save_progress(conn: Connection, run: RowMapping, mark: int) -> None:
    batch = conn.execute(
        select(batch_items.c.batch_id).where(batch_items.c.run_id == run["id"]).limit(1)
    ).scalar()
    values = {
        "goal": run["goal"],
        "title": run["title"],
        "status": run["status"],
        "model": _model_of(str(run["spec"])),
        "cost_usd": run["cost_usd"],
        "schedule_id": run["schedule_id"],
        "batch_id": batch,
        "created_at": run["created_at"],
        "indexed_seq": mark,
        "seen_updated_at": run["updated_at"],
        "archived": False,
    }
    found = update(search_runs).where(search_runs.c.run_id == run["id"]).values(values)
    if conn.execute(found).rowcount == 0:
        conn.execute(insert(search_runs).values(run_id=run["id"], **values))


# --------------------------------------------------------------------------- reading


def _filtered(stmt: Select[Any], f: SearchFilters) -> Select[Any]:
    d, r = search_docs.c, search_runs.c
    conditions = [
        r.status.in_(f.statuses) if f.statuses else None,
        r.model.in_(f.models) if f.models else None,
        d.tool.in_(f.tools) if f.tools else None,
        d.kind.in_(f.kinds) if f.kinds else None,
        d.at >= f.since if f.since is not None else None,
        d.at < f.until if f.until is not None else None,
        r.cost_usd > f.cost_above if f.cost_above is not None else None,
        r.cost_usd < f.cost_below if f.cost_below is not None else None,
        r.schedule_id == f.schedule_id if f.schedule_id else None,
        r.batch_id == f.batch_id if f.batch_id else None,
        r.archived.is_(f.archived) if f.archived is not None else None,
    ]
    kept = [c for c in conditions if c is not None]
    return stmt.where(and_(*kept)) if kept else stmt


_RANK = func.bm25(_FTS).label("rank")
_SNIPPET = func.snippet(_FTS, 0, MARK_START, MARK_END, "…", SNIPPET_TOKENS).label("snippet")
_HITS = (
    select(
        search_docs.c.run_id,
        search_docs.c.seq,
        search_docs.c.kind,
        search_docs.c.tool,
        search_docs.c.at,
        search_runs.c.goal,
        search_runs.c.title,
        search_runs.c.status,
        search_runs.c.archived,
        _SNIPPET,
        _RANK,
    )
    .select_from(_FTS_TABLE)
    .join(search_docs, search_docs.c.id == _FTS_TABLE.c.rowid)
    .join(search_runs, search_runs.c.run_id == search_docs.c.run_id)
    .where(_FTS.op("MATCH")(bindparam("query")))
)


def search(db: Database, query: str, filters: SearchFilters, limit: int) -> list[SearchHit]:
    """The best ``limit`` matches of ``query``, by relevance (bm25), then newest first.

    Reads the index as it is: call :func:`catch_up` first for what was recorded since.

    Raises:
        InvalidInputError: the query cannot be read (see :func:`fts_query`), or this
            database has no index.
    """
    if not available(db):
        raise InvalidInputError("search works on SQLite databases for now")
    expression = fts_query(query)
    stmt = _filtered(_HITS, filters).order_by(_RANK, search_docs.c.at.desc()).limit(limit)
    try:
        with db.read() as conn:
            rows = conn.execute(stmt, {"query": expression}).mappings().all()
    except OperationalError as exc:
        if "fts5" in str(exc.orig) or "MATCH" in str(exc.orig):
            raise InvalidInputError(
                f'cannot read the search {query!r}; use words, "phrases" and word*'
            ) from None
        raise
    return [_hit(r) for r in rows]


def _hit(row: RowMapping) -> SearchHit:
    snippet, spans = _marked(" ".join(str(row["snippet"] or "").split()))
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
        rank=float(row["rank"]),
    )


def _marked(text: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``text`` without the match marks, and where the marked parts are in it."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    length, start = 0, -1
    for ch in text:
        if ch == MARK_START:
            start = length
        elif ch == MARK_END:
            if start >= 0:
                spans.append((start, length))
            start = -1
        else:
            out.append(ch)
            length += 1
    return "".join(out), tuple(spans)


def mark_unarchived(conn: Connection, run_ids: Sequence[str]) -> None:
    """Mark the runs' documents as the database's again (the runs were brought back)."""
    stmt = update(search_runs).where(search_runs.c.run_id.in_(list(run_ids)))
    conn.execute(stmt.values(archived=False))
