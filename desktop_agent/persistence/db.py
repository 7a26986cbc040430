"""Opening the database on purpose: SQLite pragmas, private files, migrations.

SQLite is configured for a durable journal (DESIGN.md §4): WAL, ``synchronous=FULL`` by
default (a committed step survives power loss), a 30 s busy timeout, foreign keys, a small
write-ahead log (see :data:`WAL_AUTOCHECKPOINT_PAGES`), and ``BEGIN IMMEDIATE`` for writers
so that two writer processes queue on the lock instead of failing on a deferred
read-then-write upgrade. Readers get their own engine with deferred transactions, so the GUI
never waits for the write lock.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError, OperationalError

from desktop_agent.domain.errors import SchemaTooNewError, StorageError
from desktop_agent.persistence import backup

if TYPE_CHECKING:
    from alembic.config import Config

BUSY_TIMEOUT_MS = 30_000
"""Long enough for another process's checkpoint or a slow disk; short enough to report."""

BUSY_TIMEOUT_ENV = "DESKTOP_AGENT_BUSY_TIMEOUT_MS"
"""Overrides :data:`BUSY_TIMEOUT_MS` (milliseconds); the fault tests shorten it."""

WAL_AUTOCHECKPOINT_PAGES = 200
"""Checkpoint the WAL once it holds this many pages (SQLite's default is 1000).

A journal commit appends a few pages to the WAL and fsyncs it. While the WAL file is still
growing, every fsync also allocates new blocks and records the new size, which on ext4
costs about as much again as the write itself; once the WAL wraps around, commits overwrite
blocks that already exist. With 200 pages (800 KB) the WAL stops growing after ~60 journal
steps instead of ~300, and later checkpoints are small. Measured here (bench/README.md):
a step of a fresh run costs ~25 % less; the steady state is unchanged.
"""

WAL_SIZE_LIMIT_BYTES = 8 * 1024 * 1024
"""``journal_size_limit``: a WAL that grew past this (a long reader held checkpoints back)
is cut back to it after the next full checkpoint, instead of keeping its peak size."""

MAX_PAGES_ENV = "DESKTOP_AGENT_MAX_PAGES"
"""Test seam: ``PRAGMA max_page_count`` on every connection, to simulate a full disk."""


def busy_timeout_ms() -> int:
    """How long a writer waits for another process's lock before reporting it."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    return int(raw) if raw.isdigit() else BUSY_TIMEOUT_MS


def locked_message(busy_ms: int | None = None) -> str:
    """What to tell the user when another process held the write lock too long."""
    waited = (busy_ms if busy_ms is not None else busy_timeout_ms()) / 1000
    return (
        f"the database is locked by another process and stayed locked for {waited:g} s; "
        "close other desktop-agent copies or wait"
    )


MIGRATIONS = Path(__file__).with_name("migrations")

VERSION_TABLE = "alembic_version"
"""Where Alembic stamps the schema's revision."""


@functools.cache
def known_revisions() -> tuple[str, ...]:
    """Every schema revision this release knows, oldest first.

    Read from the migration files' names (``0011_search_redact_again.py`` is revision
    ``0011``; ``tests/persistence`` checks that this agrees with Alembic's own reading of
    the scripts), so that opening an up-to-date database needs no Alembic at all.
    """
    names = (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
    return tuple(sorted(p.name.split("_", 1)[0] for p in names))


def head_revision() -> str:
    """The newest schema revision this release knows."""
    return known_revisions()[-1]


@dataclass(frozen=True)
class DbSettings:
    """How to open the database.

    Attributes:
        url: SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
        synchronous: ``FULL`` (default; survives power loss) or ``NORMAL`` (faster; the
            last commits may be lost on power loss, never on a process crash).
    """

    url: str
    synchronous: str = "FULL"
    password: str | None = field(default=None, repr=False)
    """A server's password from the OS keyring (never in the URL, a file or argv); None
    lets libpq find one (``PGPASSWORD``, ``~/.pgpass``, a service file) or go without."""
    folder: Path | None = None
    """The local data folder (default workspaces, archives, logs): the SQLite file's, or
    the folder that stands for a server (None: unknown, e.g. a bare URL in a test)."""

    @classmethod
    def for_path(
        cls,
        path: Path | str,
        synchronous: str = "FULL",
        password: Callable[[str], str | None] | None = None,
    ) -> DbSettings:
        """Settings for the database at ``path``: a SQLite file, or the server it points to.

        A folder that stands for a PostgreSQL database (see :data:`URL_FILE`) holds the
        server's URL beside where the file would be; everything else about the folder
        (settings, logs, archives) is as for a SQLite database. ``password(url)`` looks a
        server's password up (the OS keyring: ``secrets.database_password``).
        """
        folder = Path(path).parent
        pointer = folder / URL_FILE
        if pointer.is_file():
            url = pointer.read_text(encoding="utf-8").strip()
            secret = password(url) if password is not None else None
            return cls(url, synchronous, secret, folder)
        return cls(f"sqlite:///{Path(path)}", synchronous, folder=folder)

    @property
    def sqlite_path(self) -> Path | None:
        """The database file, for SQLite URLs."""
        if self.url.startswith("sqlite:///"):
            return Path(self.url[len("sqlite:///") :])
        return None


URL_FILE = "database.url"
"""In a data folder that stands for a PostgreSQL database: the server's URL (no password),
written by ``config.resolve_db_path`` when ``--db`` is a URL. A worker started with
``--db`` on that folder's database path finds the server through it."""


def _prepare_private_file(path: Path) -> None:
    """Create the folder (0700) and file (0600) before SQLite does, so they stay private."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    for p, mode in ((folder, 0o700), (path, 0o600)):
        with contextlib.suppress(OSError):
            if stat.S_IMODE(p.stat().st_mode) & 0o077 and p == path:
                os.chmod(p, mode)


def _check_sqlite_file(path: Path) -> None:
    """Fail with a clear message when the file is not a readable SQLite database.

    The header is read through SQLite itself, never with a descriptor of our own: closing
    any descriptor of the file drops every POSIX lock this process holds on it, including
    the shared lock an open connection keeps in WAL mode. Without that lock, another process
    closing its last connection takes itself for the last user and deletes the write-ahead
    log under ours, whose later commits are then lost. SQLite keeps such descriptors open
    while other connections of the process hold locks.
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    uri = f"{path.resolve().as_uri()}?mode=rw"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms() / 1000)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if "not a database" in text:
            raise StorageError(
                f"{path} is not a desktop-agent database (not SQLite, or damaged); "
                f"{backup.restore_offer(path)}; or point --db elsewhere"
            ) from None
        if "unable to open" in text:
            raise StorageError(f"cannot read the database {path}: {text}") from None
        # Anything else (locked, damaged pages) is reported by the real open that follows.


def _sqlite_engine(settings: DbSettings, *, writer: bool) -> Engine:
    path = settings.sqlite_path
    assert path is not None
    engine = sa.create_engine(
        settings.url,
        connect_args={"timeout": busy_timeout_ms() / 1000, "check_same_thread": False},
        pool_size=32,
        max_overflow=32,
        pool_pre_ping=False,
    )
    sync = settings.synchronous.upper()
    if sync not in ("FULL", "NORMAL", "EXTRA"):
        raise StorageError(f"invalid durability level {settings.synchronous!r}: FULL or NORMAL")

    busy_ms = busy_timeout_ms()
    max_pages = os.environ.get(MAX_PAGES_ENV, "").strip()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        # Let SQLAlchemy's begin event below emit BEGIN itself.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={busy_ms}")
        if max_pages.isdigit():
            cur.execute(f"PRAGMA max_page_count={int(max_pages)}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={sync}")
        cur.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    begin_sql = "BEGIN IMMEDIATE" if writer else "BEGIN"

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(begin_sql)

    return engine


MIGRATION_LOCK = 0x6465736B6167
"""The PostgreSQL advisory lock a migration holds (any constant the app alone uses)."""

PING_AFTER_IDLE_S = 30.0
"""A pooled server connection idle longer than this is pinged (one round trip) when taken."""


def _check_server_side(engine: Engine) -> None:
    """Hand out only live server connections, mostly without a round trip.

    Replaces SQLAlchemy's ``pool_pre_ping`` (a ``SELECT 1`` at every checkout, as costly as
    the journal's whole commit). A connection taken from the pool is discarded, and another
    one opened in its place, when:

    * its socket has something to read: an idle connection is spoken to only when the
      server ends it (a shutdown or restart, the backend terminated or crashed: the server
      sends its reason and closes the socket, or the kernel closes it), so this sees a
      restarted server at no cost;
    * it sat in the pool for more than :data:`PING_AFTER_IDLE_S` and a ping fails: what
      the socket cannot tell (the server's machine rebooted, a middlebox dropped the
      connection) takes longer than that to happen.

    A server found gone makes the pool discard every connection opened before (as
    ``pool_pre_ping`` does); a connection that breaks in use is discarded by whoever used it
    (SQLAlchemy, or the journal's own path), never handed out again. Raising
    ``DisconnectionError`` from the checkout event is SQLAlchemy's documented way to have
    the pool replace a connection.
    """
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if dbapi_conn.closed or dbapi_conn.broken:
            raise sa.exc.DisconnectionError("the connection was closed")
        if _readable(dbapi_conn.fileno()):
            raise sa.exc.InvalidatePoolError("the server ended the connection")
        idle = time.monotonic() - record.info.get("idle_since", time.monotonic())
        if idle > PING_AFTER_IDLE_S:
            try:
                alive = dialect.do_ping(dbapi_conn)
            except dialect.loaded_dbapi.Error as exc:
                if not dialect.is_disconnect(exc, dbapi_conn, None):
                    raise
                alive = False
            if not alive:
                raise sa.exc.InvalidatePoolError("the server did not answer a ping")


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read (or was closed by the other end), at once.

    ``poll`` where there is one: ``select`` refuses descriptors past FD_SETSIZE (1024),
    which a long-lived app with many files and sockets open can reach.
    """
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # Windows: sockets only, no such limit
    return bool(readable)


class Database:
    """The two engines (writer, reader) over one database, migrated to the newest schema.

    Args:
        settings: where and how to open it.
        migrate: bring the schema up to date (creating it in an empty database).
    """

    def __init__(self, settings: DbSettings, *, migrate: bool = True) -> None:
        self.settings = settings
        self.busy_ms = busy_timeout_ms()
        path = settings.sqlite_path
        self.is_sqlite = path is not None
        if path is not None:
            _check_sqlite_file(path)
            try:
                _prepare_private_file(path)
            except OSError as exc:
                raise StorageError(f"cannot create the database {path}: {exc.strerror}") from None
            self.writer = _sqlite_engine(settings, writer=True)
            self.reader = _sqlite_engine(settings, writer=False)
        else:
            connect_args = {} if settings.password is None else {"password": settings.password}
            try:
                self.writer = sa.create_engine(
                    settings.url,
                    pool_size=32,
                    max_overflow=32,
                    pool_pre_ping=False,  # checked without a round trip: _check_server_side
                    connect_args=connect_args,
                )
            except ModuleNotFoundError as exc:
                raise StorageError(
                    f"cannot open {self.describe()}: its driver {exc.name} is not installed "
                    "(pip install 'desktop-agent[postgres]')",
                    code="driver_missing",
                ) from None
            _check_server_side(self.writer)
            self.reader = self.writer
        try:
            if migrate:
                self.migrate()
            else:
                self.check_schema()
        except (OperationalError, DatabaseError) as exc:
            self.dispose()
            if path is not None and backup.is_corruption(str(exc.orig)):
                raise StorageError(backup.damaged_message(path, str(exc.orig))) from None
            if "locked" in str(exc.orig):
                raise StorageError(locked_message(self.busy_ms)) from None
            first = (str(exc.orig).strip().splitlines() or ["unknown error"])[0]
            raise StorageError(f"cannot open the database {self.describe()}: {first}") from None
        except BaseException:
            self.dispose()
            raise

    def describe(self) -> str:
        """Where the database is, for messages (no password)."""
        path = self.settings.sqlite_path
        return str(path) if path else sa.engine.make_url(self.settings.url).render_as_string()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on exit."""
        with self.writer.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction that never takes the write lock."""
        with self.reader.begin() as conn:
            yield conn

    # ------------------------------------------------------------------ schema

    def _alembic_config(self, conn: Connection) -> Config:
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = conn
        return cfg

    def current_revision(self, conn: Connection) -> str | None:
        """The schema revision stamped in the database, or None when empty."""
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
        return str(rows[0]) if len(rows) == 1 else None

    def check_schema(self) -> None:
        """Refuse a database written by a newer release."""
        with self.reader.connect() as conn:  # a reader: opening never waits for writers
            rev = self.current_revision(conn)
            if rev is not None and rev not in known_revisions():
                raise SchemaTooNewError(
                    f"the database {self.describe()} was written by a newer desktop-agent "
                    f"(schema {rev}); upgrade desktop-agent to open it"
                )

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision.

        A database already at the newest revision is only read (no write lock, and
        Alembic is not even imported: opening a database is what every command does).
        """
        self.check_schema()
        with self.reader.connect() as conn:
            if self.current_revision(conn) == head_revision():
                return  # up to date: no write lock taken
        from alembic import command
        from alembic.script import ScriptDirectory

        with self.writer.connect() as conn:
            if conn.dialect.name == "postgresql":
                # Several processes may open a new server database at once (a worker and
                # the app, two machines): one migrates, the others wait here, then find
                # the schema up to date. Released when the transaction ends.
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            cfg = self._alembic_config(conn)
            script = ScriptDirectory.from_config(cfg)
            current = self.current_revision(conn)
            if current == script.get_current_head():
                return
            path = self.settings.sqlite_path
            if current is not None and path is not None:
                # A copy of the data as the previous release left it, in case the
                # migration (or the release) turns out wrong.
                backup.make_backup(path, reason="pre-migration")
            command.upgrade(cfg, "head")
            conn.commit()
        self._fix_permissions()

    def _fix_permissions(self) -> None:
        path = self.settings.sqlite_path
        if path is None:
            return
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(path) + suffix)
            with contextlib.suppress(OSError):
                if p.exists():
                    os.chmod(p, 0o600)
