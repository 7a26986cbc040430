r"""What both databases' full-text search share: documents, the query's terms, the filters.

The documents a run's records make (:func:`index_run`: steps, goal, approvals, notes, as
readable and redacted text), the watermarks and document ranges kept in ``search_runs``,
the analyst's query as :class:`Term`\ s, the filters as conditions on ``search_docs`` and
``search_runs``, a date window as a range of document ids (:func:`id_range`), and a hit as
shown (:func:`hit`). What each database does its own way is in
:mod:`~desktop_agent.persistence.search_sqlite` (FTS5) and
:mod:`~desktop_agent.persistence.search_postgres` (the server's text search), indexing
through :class:`Indexing`; :mod:`~desktop_agent.persistence.search` chooses between them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.elements import ColumnElement

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


def _citation_docs(run_id: str, row: RowMapping) -> list[dict[str, Any]]:
    """One document (kind ``citation``) per passage a model step's answer cites.

    The body is the cited passage (``cited_text``), the cited document's title and the
    sentence of the answer that cites it; the document is the step's (``source`` step, its
    seq), so it is replaced with the step's own when the step is indexed again.
    """
    if row["kind"] != "model_call" or not row["output"]:
        return []
    output = row["output"]
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return []
    content = output.get("content") if isinstance(output, dict) else None
    out: list[dict[str, Any]] = []
    at = float(row["finished_at"] or row["started_at"])
    for block in content if isinstance(content, list) else []:
        citations = block.get("citations") if isinstance(block, dict) else None
        for citation in citations if isinstance(citations, list) else []:
            if not isinstance(citation, dict) or not citation.get("cited_text"):
                continue
            body = _clean(
                "citation",
                str(citation["cited_text"]),
                str(citation.get("document_title") or ""),
                str(block.get("text") or ""),
            )
            out.append(_doc(run_id, int(row["seq"]), "step", "citation", "", at, body))
    return out


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


class Indexing(Protocol):
    """What indexing does its own way on one database (:func:`index_run`, ``catch_up``)."""

    def serialise(self, conn: Connection) -> None:
        """Keep other indexers out until the transaction ends (before the watermark is read)."""
        ...

    def insert_fresh(self, conn: Connection, docs: list[dict[str, Any]]) -> list[int]:
        """Insert documents that take new ids; the ids taken (at least the lowest and highest)."""
        ...

    def least(self, a: Any, b: Any) -> ColumnElement[Any]:
        """The lesser of two values, in SQL."""
        ...

    def greatest(self, a: Any, b: Any) -> ColumnElement[Any]:
        """The greater of two values, in SQL."""
        ...

    def refresh_statistics(self, db: Database) -> None:
        """Bring the planner's statistics up to date after a large catch-up."""
        ...


def mark_archived(conn: Connection, run_ids: Sequence[str]) -> None:
    """Mark the runs' documents archived (their rows are about to be removed)."""
    stmt = update(search_runs).where(search_runs.c.run_id.in_(list(run_ids)))
    conn.execute(stmt.values(archived=True))


def mark_unarchived(conn: Connection, run_ids: Sequence[str]) -> None:
    """Mark the runs' documents as the database's again (the runs were brought back)."""
    stmt = update(search_runs).where(search_runs.c.run_id.in_(list(run_ids)))
    conn.execute(stmt.values(archived=False))


def index_run(
    conn: Connection, run_id: str, batch_steps: int, dialect: Indexing
) -> tuple[int, bool]:
    """Index one run from its watermark: at most ``batch_steps`` steps, its goal and approvals.

    Documents of the steps after the watermark (an open step indexed before) are replaced;
    the watermark moves to the last step up to which every step is finished. ``dialect``
    is how the connection's database indexes.

    Returns:
        (steps indexed, whether a full batch was indexed and more may follow).
    """
    dialect.serialise(conn)
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
    for r in rows:
        fresh.append(_step_doc(run_id, r))
        fresh += _citation_docs(run_id, r)
    if reused:
        conn.execute(insert(search_docs), reused)
    ids = [int(d["id"]) for d in reused]
    if fresh:
        ids += dialect.insert_fresh(conn, fresh)
    first, last = min(ids), max(ids)  # the goal is always there: never empty
    for r in rows:
        if r["status"] == "started":
            break
        mark = int(r["seq"])
    _save_progress(conn, run, mark, (first, last), dialect)
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


def _save_progress(
    conn: Connection, run: RowMapping, mark: int, doc_ids: tuple[int, int], dialect: Indexing
) -> None:
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
    widened = {
        "first_doc_id": dialect.least(func.coalesce(r.first_doc_id, first), first),
        "last_doc_id": dialect.greatest(func.coalesce(r.last_doc_id, last), last),
    }
    found = update(search_runs).where(r.run_id == run["id"]).values(**values, **widened)
    if conn.execute(found).rowcount == 0:
        conn.execute(
            insert(search_runs).values(
                run_id=run["id"], first_doc_id=first, last_doc_id=last, **values
            )
        )


# --------------------------------------------------------------------------- reading


def run_conditions(f: SearchFilters) -> list[ColumnElement[bool]]:
    """The filters on runs, as conditions on ``search_runs``."""
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


def doc_conditions(f: SearchFilters) -> list[ColumnElement[bool]]:
    """The filters on documents (tool, kind, dates), as conditions on ``search_docs``."""
    d = search_docs.c
    conditions = [
        d.tool.in_(f.tools) if f.tools else None,
        d.kind.in_(f.kinds) if f.kinds else None,
        d.at >= f.since if f.since is not None else None,
        d.at < f.until if f.until is not None else None,
    ]
    return [c for c in conditions if c is not None]


SHOWN = (
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


def id_range(conn: Connection, f: SearchFilters) -> tuple[int, int] | None:
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


def hit(row: RowMapping, marked: str, rank: float) -> SearchHit:
    """The hit a row of :data:`SHOWN` makes, with its snippet (``marked``) and rank."""
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
