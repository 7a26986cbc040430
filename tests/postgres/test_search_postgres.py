"""Search on a real PostgreSQL server: its own index, and indexers that run at once.

What search finds and how filters narrow it is the same suite on both databases
(``tests/search``, parametrized over the backends). Here: what only PostgreSQL has, the
GIN index of migration 0008 that the query must use, and two processes catching up at
once without a write lock that serialises them as SQLite's does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.persistence import search as search_index
from desktop_agent.persistence.db import Database, DbSettings
from tests.helpers import postgres
from tests.helpers.journal import write_long_run
from tests.helpers.polling import wait_until

pytestmark = pytest.mark.skipif(
    postgres.unavailable() is not None, reason=str(postgres.unavailable())
)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    """A client on a fresh database of the test server."""
    path = tmp_path / "data" / "desktop-agent.db"
    with postgres.database_for(path.parent, "postgresql"):
        Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
        c = Client(path)
        yield c
        c.close()


def _plan(db: Database, sql: str) -> str:
    with db.read() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))  # a tiny table: force a choice
        return "\n".join(str(r) for r in conn.execute(text("EXPLAIN " + sql)).scalars())


def test_the_search_reads_the_gin_index_of_migration_0008(client: Client) -> None:
    with client.store.db.read() as conn:
        (definition,) = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :name"),
            {"name": search_index.PG_INDEX},
        ).scalars()
        (generated,) = conn.execute(
            text(
                "SELECT generation_expression FROM information_schema.columns "
                "WHERE table_name = 'search_docs' AND column_name = 'body_tsv'"
            )
        ).scalars()
    assert definition.endswith("USING gin (body_tsv)")
    assert generated.startswith("to_tsvector('simple'::regconfig, translate(body, ")

    query = search_index.pg_query(search_index.terms('heron "part 12" otter*'))
    with client.store.db.read() as conn:
        stmt = search_index.pg_candidates(conn, query, search_index.SearchFilters(), 1000)
        dialect = conn.dialect  # the driver's own, as the search compiles for
    assert stmt is not None
    sql = str(stmt.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    plan = _plan(client.store.db, sql)
    # Rare words (here: no statistics yet): the index's bitmap, not a scan of every row.
    assert f"Bitmap Index Scan on {search_index.PG_INDEX}" in plan, plan


def test_two_indexers_at_once_index_each_step_once(client: Client) -> None:
    runs = [client.start_run(f"Chart the heron sightings {k}", model="demo") for k in range(6)]
    for run in runs:
        write_long_run(client, run.id, 120)
    url = client.store.db.settings.url
    dbs = [Database(DbSettings(url)) for _ in range(2)]
    start = threading.Barrier(2)
    indexed: list[int] = []
    errors: list[BaseException] = []

    def catch_up(db: Database) -> None:
        try:
            start.wait()
            indexed.append(search_index.catch_up(db, batch_steps=10))
        except BaseException as exc:  # reported below, with the test's assertion
            errors.append(exc)

    threads = [threading.Thread(target=catch_up, args=(db,)) for db in dbs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for db in dbs:
        db.dispose()
    assert not errors, errors
    assert sum(indexed) >= 6 * 119  # between them, every finished step

    with client.store.db.read() as conn:
        doubled = conn.execute(
            text(
                "SELECT run_id, seq, source, count(*) FROM search_docs "
                "GROUP BY run_id, seq, source HAVING count(*) > 1"
            )
        ).all()
        ranges = conn.execute(
            text(
                "SELECT r.run_id, r.first_doc_id, r.last_doc_id, min(d.id), max(d.id) "
                "FROM search_runs r JOIN search_docs d ON d.run_id = r.run_id "
                "GROUP BY r.run_id, r.first_doc_id, r.last_doc_id"
            )
        ).all()
    assert doubled == []
    assert len(ranges) == 6
    for run_id, first, last, low, high in ranges:
        assert first <= low and last >= high, run_id  # each run's range holds its documents
    hits = client.search('"part 111"')
    assert sorted((h.run_id, h.seq) for h in hits) == sorted((r.id, 111) for r in runs)


def test_accents_are_kept_there_and_punctuation_splits_words_as_on_sqlite(client: Client) -> None:
    run = client.start_run("Map the café district around tangerine-outage.md", model="demo")
    assert [h.run_id for h in client.search("café")] == [run.id]
    assert client.search("cafe") == []  # the one difference the README states
    (hit,) = client.search('"tangerine outage"')
    assert [hit.snippet[a:b] for a, b in hit.spans] == ["tangerine-outage"]
    assert [h.run_id for h in client.search("outage.md")] == [run.id]


def _analyzed(db: Database) -> bool:
    with db.read() as conn:
        at = conn.execute(
            text("SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'search_docs'")
        ).scalar()
    return at is not None


def test_a_big_catch_up_refreshes_the_statistics_the_planner_chooses_by(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = client.start_run("Chart the heron sightings", model="demo")
    write_long_run(client, run.id, 60)
    monkeypatch.setattr(search_index, "ANALYZE_AFTER", 1000)
    assert search_index.catch_up(client.store.db) < 1000
    assert not _analyzed(client.store.db)  # a small catch-up leaves it to autovacuum

    other = client.start_run("Chart the otter sightings", model="demo")
    write_long_run(client, other.id, 60)
    monkeypatch.setattr(search_index, "ANALYZE_AFTER", 50)
    assert search_index.catch_up(client.store.db) >= 50
    # ANALYZE reports to the server's statistics itself; polled, in case that lags.
    wait_until(lambda: _analyzed(client.store.db), what="search_docs analyzed")
