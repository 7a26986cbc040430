"""Each database gets its own store class, so the suite covers both of them.

``SqlStore(db)`` chooses the class from the database's URL (``store_class``); the suite's
handles are checked to be of the class their backend expects (``tests/store/backends.py``),
and this test says so on its own, once per backend.
"""

from __future__ import annotations

from desktop_agent.persistence.store import SqlStore, open_store, store_class
from desktop_agent.persistence.store_postgres import PostgresStore
from desktop_agent.persistence.store_sqlite import SqliteStore
from tests.store.backends import SqliteBackend, StoreFactory


def test_the_store_is_the_class_of_its_database(store_factory: StoreFactory) -> None:
    store = store_factory.handle.store
    expected = SqliteStore if isinstance(store_factory.backend, SqliteBackend) else PostgresStore
    assert type(store) is expected
    assert isinstance(store, SqlStore)
    assert store_class(store.db) is expected
    again = open_store(store.db, clock=store_factory.clock.now)
    assert type(again) is expected
