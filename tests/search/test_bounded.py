"""Ranking among the newest matches, and date windows read as ranges of document ids.

Documents are written straight into the index's tables (the triggers keep FTS5 and
``search_hours`` in step), in an order chosen so that document ids and dates disagree: a
re-indexed or late-indexed document has a new id and an old date.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import delete, func, insert, select, update

from desktop_agent.client.api import Client
from desktop_agent.persistence import search
from desktop_agent.persistence.db import Database, DbSettings, head_revision
from desktop_agent.persistence.search import SearchFilters
from desktop_agent.persistence.tables import search_docs, search_hours, search_runs
from tests.helpers.journal import write_long_run

DAY = 86400.0
NOW = 1_800_000_000.0


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """An empty database at the newest revision."""
    database = Database(DbSettings.for_path(tmp_path / "search.db"))
    try:
        yield database
    finally:
        database.dispose()


def _runs(db: Database, statuses: dict[str, str]) -> None:
    rows = [{"run_id": r, "status": s, "created_at": 0.0} for r, s in statuses.items()]
    with db.write() as conn:
        conn.execute(insert(search_runs), rows)


def _doc(db: Database, run_id: str, seq: int, at: float, body: str) -> int:
    """Index one document; returns its id."""
    row = {"run_id": run_id, "seq": seq, "source": "step", "kind": "tool_call"}
    with db.write() as conn:
        done = conn.execute(insert(search_docs).values(**row, tool="read_file", at=at, body=body))
        key = done.inserted_primary_key
        assert key is not None
        doc_id = int(key[0])
        r = search_runs.c
        conn.execute(  # as the indexer widens the run's range
            update(search_runs)
            .where(r.run_id == run_id)
            .values(
                first_doc_id=func.min(func.coalesce(r.first_doc_id, doc_id), doc_id),
                last_doc_id=func.max(func.coalesce(r.last_doc_id, doc_id), doc_id),
            )
        )
        return doc_id


def _found(db: Database, query: str, limit: int = 50, **filters: object) -> list[tuple[str, int]]:
    hits = search.search(db, query, SearchFilters(**filters), limit)  # type: ignore[arg-type]
    return [(h.run_id, h.seq) for h in hits]


def test_more_matches_than_the_bound_rank_only_the_newest_filtered_ones(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "CANDIDATES", 4)
    _runs(db, {"kept": "completed", "dropped": "failed"})
    # Oldest first: the older a document, the more relevant (the word more often).
    for seq in range(1, 13):
        run = "kept" if seq % 2 else "dropped"
        _doc(db, run, seq, NOW + seq, " ".join(["heron"] * (14 - seq)) + " filler words here")
    kept = _found(db, "heron", limit=3, statuses=("completed",))
    # The 4 newest completed matches are seqs 11, 9, 7, 5; the best 3 of them by bm25
    # are the older ones (more herons), best first. Seqs 1 and 3 are more relevant still,
    # but older than the bound.
    assert kept == [("kept", 5), ("kept", 7), ("kept", 9)]
    assert _found(db, "heron", limit=2, statuses=("failed",)) == [("dropped", 6), ("dropped", 8)]
    newest = [("kept", 9), ("dropped", 10), ("kept", 11), ("dropped", 12)]
    assert _found(db, "heron", limit=4) == newest
    # A limit above the bound ranks that many of the newest.
    assert {seq for _r, seq in _found(db, "heron", limit=10)} == set(range(3, 13))


def test_a_window_far_in_the_past_finds_its_matches_under_newer_ones(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "CANDIDATES", 3)
    _runs(db, {"r": "completed", "late": "completed"})
    for seq in range(1, 40):
        _doc(db, "r", seq, NOW - 400 * DAY + seq * 60, "kestrel seen over the ridge")
    for seq in range(40, 80):
        _doc(db, "r", seq, NOW - seq * 60, "kestrel seen over the ridge")
    late = NOW - 380 * DAY  # indexed last (an imported run): the highest id, an old date
    _doc(db, "late", 1, late, "kestrel seen late")
    old = _found(db, "kestrel", limit=3, since=NOW - 401 * DAY, until=NOW - 399 * DAY)
    assert {seq for _r, seq in old} == {37, 38, 39}  # the newest 3 of that window
    assert _found(db, "kestrel", limit=3) == [("late", 1), ("r", 78), ("r", 79)]  # ties: newest
    assert _found(db, "kestrel", limit=3, since=late - 1, until=late + 1) == [("late", 1)]
    assert len(_found(db, "kestrel", limit=3, since=NOW - 401 * DAY, until=late + 1)) == 3
    exact = _found(db, "kestrel", since=NOW - 400 * DAY + 10 * 60, until=NOW - 400 * DAY + 12 * 60)
    assert exact == [("r", 11), ("r", 10)]  # exactly the window, not its hours
    assert _found(db, "kestrel", since=NOW - 300 * DAY, until=NOW - 200 * DAY) == []
    assert _found(db, "kestrel", until=NOW - 500 * DAY) == []
    assert _found(db, "kestrel", since=NOW + DAY) == []


def test_a_document_indexed_again_keeps_being_found_by_its_date(db: Database) -> None:
    _runs(db, {"r": "completed"})
    first = _doc(db, "r", 1, NOW - 90 * DAY, "osprey nest count")
    for seq in range(2, 30):
        _doc(db, "r", seq, NOW - seq, "osprey nest count")
    with db.write() as conn:  # the way index_run replaces a document: delete, insert
        conn.execute(delete(search_docs).where(search_docs.c.id == first))
    again = _doc(db, "r", 1, NOW - 90 * DAY, "osprey nest count again")
    assert again > first
    assert _found(db, "osprey", since=NOW - 91 * DAY, until=NOW - 89 * DAY) == [("r", 1)]
    with db.read() as conn:
        hour = int((NOW - 90 * DAY) // search.HOUR)
        row = conn.execute(select(search_hours).where(search_hours.c.hour == hour)).one()
    assert (row.first_id, row.last_id) == (first, again)


@pytest.mark.parametrize("seed", range(6))
def test_filters_never_drop_a_match_within_the_bound(
    db: Database, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Against a reference: the newest (by id) matches that pass the filters, bounded."""
    bound = 8
    monkeypatch.setattr(search, "CANDIDATES", bound)
    rng = random.Random(seed)
    statuses = {f"run-{i}": rng.choice(("completed", "failed", "stopped")) for i in range(6)}
    _runs(db, statuses)
    docs: list[tuple[int, str, int, float, bool]] = []  # id, run, seq, at, matches
    for seq in range(1, 121):
        run = rng.choice(sorted(statuses))
        at = NOW - rng.uniform(0, 30) * DAY  # ids and dates in no common order
        matches = rng.random() < 0.6
        body = "egret wading" if matches else "plover wading"
        docs.append((_doc(db, run, seq, at, body), run, seq, at, matches))
    for _ in range(15):
        since = NOW - rng.uniform(0, 30) * DAY
        until = since + rng.uniform(0.01, 10) * DAY
        wanted = tuple(rng.sample(("completed", "failed", "stopped"), rng.choice((1, 2))))
        passing = sorted(
            (d for d in docs if d[4] and since <= d[3] < until and statuses[d[1]] in wanted),
            reverse=True,
        )
        expected = {(run, seq) for _id, run, seq, _at, _m in passing[:bound]}
        found = _found(db, "egret", bound, since=since, until=until, statuses=wanted)
        assert set(found) == expected and len(found) == len(expected)
        assert set(_found(db, "egret", limit=3, since=since, until=until, statuses=wanted)) <= (
            expected
        )


def test_the_migration_fills_the_hours_and_goes_back(tmp_path: Path) -> None:
    path = tmp_path / "previous.db"
    db = Database(DbSettings.for_path(path))
    _runs(db, {"r": "completed"})
    ids = [_doc(db, "r", seq, NOW + seq * 1000, "grebe") for seq in range(1, 9)]
    with db.writer.connect() as conn:
        command.downgrade(db._alembic_config(conn), "0006")
        conn.commit()
    db.dispose()
    engine = sa.create_engine(f"sqlite:///{path}")
    assert "search_hours" not in sa.inspect(engine).get_table_names()
    assert "first_doc_id" not in {c["name"] for c in sa.inspect(engine).get_columns("search_runs")}
    engine.dispose()

    db = Database(DbSettings.for_path(path))  # upgraded again: filled from search_docs
    try:
        with db.read() as conn:
            assert db.current_revision(conn) == head_revision()
            hours = conn.execute(select(search_hours).order_by(search_hours.c.hour)).all()
            span = conn.execute(select(search_runs.c.first_doc_id, search_runs.c.last_doc_id))
            assert tuple(span.one()) == (min(ids), max(ids))
        expected: dict[int, list[int]] = {}
        for seq, doc_id in enumerate(ids, start=1):
            expected.setdefault(int((NOW + seq * 1000) // 3600), []).append(doc_id)
        assert [(h.hour, h.first_id, h.last_id) for h in hours] == [
            (hour, min(i), max(i)) for hour, i in sorted(expected.items())
        ]
        later = _doc(db, "r", 9, NOW + 9000, "grebe")  # the trigger is back
        assert _found(db, "grebe", since=NOW + 8999, until=NOW + 9001) == [("r", 9)]
        with db.read() as conn:
            top = conn.execute(select(search_hours.c.last_id).order_by(search_hours.c.hour.desc()))
            assert top.scalars().first() == later
    finally:
        db.dispose()


@pytest.mark.parametrize("one_by_one", [True, False])
def test_a_few_runs_read_by_their_ranges_find_what_a_full_scan_finds(
    db: Database, monkeypatch: pytest.MonkeyPatch, one_by_one: bool
) -> None:
    bound = 6
    monkeypatch.setattr(search, "CANDIDATES", bound)
    monkeypatch.setattr(search, "RUN_SPANS", 100 if one_by_one else 0)
    reads: list[int] = []
    each_run = search._each_run

    def counted(*args: object) -> list[int]:
        reads.append(1)
        return each_run(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(search, "_each_run", counted)
    runs = [f"run-{i:02d}" for i in range(40)]
    _runs(db, dict.fromkeys(runs, "completed"))
    with db.write() as conn:
        conn.execute(
            update(search_runs).where(search_runs.c.run_id.in_(runs[5:7])).values(batch_id="b")
        )
    rng = random.Random(3)
    docs: list[tuple[int, str, int]] = []
    others = runs[:5] + runs[7:]
    for seq in range(1, 801):  # the batch's runs indexed together, interleaved with a third
        run = runs[5 + seq % 3] if 400 < seq <= 460 else rng.choice(others)
        docs.append((_doc(db, run, seq, NOW - rng.uniform(0, 10) * DAY, "ibis ibis"), run, seq))
    in_batch = sorted((d for d in docs if d[1] in runs[5:7]), reverse=True)
    assert len(in_batch) > bound
    expected = [(run, seq) for _id, run, seq in in_batch[:bound]]
    found = _found(db, "ibis", bound, batch_id="b")
    assert set(found) == set(expected) and len(found) == bound
    assert len(reads) == (1 if one_by_one else 0)
    since, until = NOW - 5 * DAY, NOW - 2 * DAY
    window = [d for d in in_batch if since <= dict(_ats(db))[d[0]] < until]
    found = _found(db, "ibis", bound, batch_id="b", since=since, until=until)
    assert set(found) == {(run, seq) for _id, run, seq in window[:bound]}
    assert _found(db, "ibis", bound, batch_id="none") == []


def _ats(db: Database) -> list[tuple[int, float]]:
    with db.read() as conn:
        return [
            (int(i), float(a)) for i, a in conn.execute(select(search_docs.c.id, search_docs.c.at))
        ]


def test_a_run_without_a_known_range_is_still_searched(db: Database) -> None:
    _runs(db, {"r": "completed"})
    for seq in range(1, 4):
        _doc(db, "r", seq, NOW + seq, "avocet")
    with db.write() as conn:
        conn.execute(update(search_runs).values(first_doc_id=None, last_doc_id=None))
    assert len(_found(db, "avocet", statuses=("completed",), since=NOW, until=NOW + 10)) == 3


def test_the_indexer_keeps_each_runs_document_range(client: Client) -> None:
    first = client.start_run("Tally the curlews", model="demo")
    write_long_run(client, first.id, 30)
    second = client.start_run("Tally the godwits", model="demo")
    write_long_run(client, second.id, 30)
    search.catch_up(client.store.db, batch_steps=7)
    goal_id = (search_docs.c.run_id == first.id) & (search_docs.c.source == "run")
    with client.store.db.read() as conn:
        before = conn.execute(select(search_docs.c.id).where(goal_id)).scalar_one()
    search.catch_up(client.store.db, [first.id])  # its goal and open step again, after the second
    with client.store.db.read() as conn:
        d, r = search_docs.c, search_runs.c
        actual = select(d.run_id, func.min(d.id), func.max(d.id)).group_by(d.run_id)
        held = select(r.run_id, r.first_doc_id, r.last_doc_id)
        spans = {run: (low, high) for run, low, high in conn.execute(held)}
        for run, low, high in conn.execute(actual):
            assert spans[run][0] <= low and spans[run][1] == high
        # Indexed again, the first run's goal kept its id: it does not pass for a document
        # newer than the second run's; its open step, indexed anew, did take a new id.
        assert conn.execute(select(search_docs.c.id).where(goal_id)).scalar_one() == before
        assert before < spans[second.id][0]
        assert spans[first.id][1] > spans[second.id][1]
    hits = client.search('"part 21"', SearchFilters(models=("demo",)))
    assert {(h.run_id, h.seq) for h in hits} == {(first.id, 21), (second.id, 21)}
