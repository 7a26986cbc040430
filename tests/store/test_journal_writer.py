"""Each database gets its own journal writer, so the suite covers both of them.

``SqlStore(db)`` chooses the writer from the database's URL (``journal_writer_for``); the
suite's handles are checked to write with the one their backend expects
(``tests/store/backends.py``), and this test says so on its own, once per backend.
"""

from __future__ import annotations

from desktop_agent.persistence.store import SqlStore, journal_writer_for, open_store
from desktop_agent.persistence.store_postgres import PostgresJournalWriter
from desktop_agent.persistence.store_sqlite import SqliteJournalWriter
from tests.store.backends import SqliteBackend, StoreFactory


def test_the_store_writes_with_the_writer_of_its_database(store_factory: StoreFactory) -> None:
    store = store_factory.handle.store
    expected = (
        SqliteJournalWriter
        if isinstance(store_factory.backend, SqliteBackend)
        else PostgresJournalWriter
    )
    assert type(store) is SqlStore
    assert type(store.journal_writer) is expected
    assert type(journal_writer_for(store.db)) is expected
    again = open_store(store.db, clock=store_factory.clock.now)
    assert type(again) is SqlStore
    assert type(again.journal_writer) is expected
