"""The databases the conformance suite runs against: one journal writer per database.

Every test of ``tests/store`` gets its stores from a :class:`StoreFactory` over one fresh,
empty database. The factory can open that database several times, each time with its own
:class:`~desktop_agent.persistence.db.Database` (its own connection pools), as a second
worker, the GUI or a restarted process would: the tests of concurrency and of durability
need that. Tests reach the database only through the stores' public methods, never with
SQL, so the same tests hold any implementation of the stores to the same contract.

Adding an implementation is one class with the three methods of :class:`Backend` and the
journal writer it expects (:attr:`Backend.writer_class`: every handle opened is checked to
write with one), and its name in :data:`BACKENDS`. A PostgreSQL one, say, reads the
server's URL from an environment variable; its :meth:`Backend.unavailable` says which
variable to set when it is absent (the tests are then skipped with that reason); its
:meth:`Backend.settings` gives every test a database of its own (a fresh database or schema
on that server), and its :meth:`Backend.discard` drops it after the test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.decisions import DecisionQueries
from desktop_agent.persistence.ledger import EffectLedger
from desktop_agent.persistence.schedules import ScheduleStore
from desktop_agent.persistence.store import JournalWriter, SqlStore
from desktop_agent.persistence.store_postgres import PostgresJournalWriter
from desktop_agent.persistence.store_sqlite import SqliteJournalWriter
from tests.helpers import postgres
from tests.helpers.fakes import FakeClock
from tests.helpers.sqlite_template import migrated_database


class Backend(Protocol):
    """Where the database of one test lives, and how to open it."""

    writer_class: type[JournalWriter]
    """The class of the journal writer ``SqlStore(db)`` gets on this database."""

    def unavailable(self) -> str | None:
        """Why this implementation cannot be tested here (the tests are skipped), or None."""
        ...

    def settings(self) -> DbSettings:
        """How to open the test's database (the same one every time)."""
        ...

    def discard(self) -> None:
        """Remove the test's database, once every handle on it is closed."""
        ...


class SqliteBackend:
    """A SQLite file in the test's own folder (pytest removes the folder)."""

    writer_class: type[JournalWriter] = SqliteJournalWriter

    def __init__(self, folder: Path) -> None:
        self.path = folder / "data" / "store.db"

    def unavailable(self) -> str | None:
        """SQLite is always there."""
        return None

    def settings(self) -> DbSettings:
        """The file, with the default durability (``synchronous=FULL``).

        Made on first use as a copy of a migrated database (as the PostgreSQL backend's is):
        what the first open would have made of an empty file, without migrating it again.
        """
        if not self.path.exists():
            migrated_database(self.path)
        return DbSettings.for_path(self.path)

    def discard(self) -> None:
        """Nothing to do: the file goes with the test's folder."""


class PostgresBackend:
    """A database of its own on the test process's PostgreSQL server (dropped after)."""

    writer_class: type[JournalWriter] = PostgresJournalWriter

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name: str | None = None

    def unavailable(self) -> str | None:
        """Why no server can be started here (see :mod:`tests.helpers.postgres`)."""
        return postgres.unavailable()

    def settings(self) -> DbSettings:
        """The test's database on the shared server (created on first use, already migrated)."""
        server = postgres.shared_server()
        if self.name is None:
            self.name = server.create_database(migrated=True)
        return DbSettings(server.url(self.name))

    def discard(self) -> None:
        """Drop the test's database."""
        if self.name is not None:
            postgres.shared_server().drop_database(self.name)


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "sqlite": SqliteBackend,
    "postgresql": PostgresBackend,
}
"""Every implementation the suite runs against, by the name shown in the test ids."""


@dataclass(frozen=True)
class StoreHandle:
    """The stores over one opening of the database, as one process holds them.

    Attributes:
        store: the journal, the worker's queries and the client's writes.
        schedules: the scheduling side (wake times, among others).
        decisions: conditional writes of the analyst's decisions.
    """

    store: SqlStore
    schedules: ScheduleStore
    decisions: DecisionQueries

    def close(self) -> None:
        """Close the handle's connections."""
        self.store.db.dispose()


class StoreFactory:
    """Handles on the one database of a test, with one clock for their bookkeeping.

    Args:
        backend: the implementation under test.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.clock = FakeClock()
        self._open: list[StoreHandle] = []
        self._first: StoreHandle | None = None

    def open(self) -> StoreHandle:
        """A new handle: its own ``Database`` (connection pools) on the same database."""
        db = Database(self.backend.settings())
        store = SqlStore(db, clock=self.clock.now)
        # The suite covers each database's own writer: SqlStore(db) chose it from the URL.
        writer = store.journal_writer
        assert type(writer) is self.backend.writer_class, type(writer)
        handle = StoreHandle(
            store=store,
            schedules=ScheduleStore(db, clock=self.clock.now),
            decisions=DecisionQueries(db, clock=self.clock.now),
        )
        self._open.append(handle)
        return handle

    @property
    def handle(self) -> StoreHandle:
        """The handle most tests use (opened on first use, or again after :meth:`reopen`)."""
        if self._first is None:
            self._first = self.open()
        return self._first

    def reopen(self) -> StoreHandle:
        """Close every handle and open the database anew, as a restarted process would."""
        self.close()
        self._first = self.open()
        return self._first

    def ledger(self) -> EffectLedger | None:
        """The effect ledger beside the database, for implementations that keep one."""
        path = self.backend.settings().sqlite_path
        return EffectLedger.beside(path) if path is not None else None

    def close(self) -> None:
        """Close every handle opened so far."""
        while self._open:
            self._open.pop().close()
        self._first = None
