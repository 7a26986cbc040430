"""A real PostgreSQL server for the tests: a throwaway cluster on loopback, one per process.

The server comes from Debian's ``postgresql`` package (``packaging/dev.sh test`` installs it
when missing). PostgreSQL refuses to run as root, and CI runs as root: then the cluster is
created and started as the unprivileged ``postgres`` user the package creates (through
``runuser``), in a folder of its own. It listens on 127.0.0.1 at a free port and on a socket
in that folder, trusts local connections (nothing else can reach it), and is stopped and
removed when the test process ends. Durability is relaxed (``fsync=off``): the tests kill
processes, never the machine, and a commit acknowledged to a client is in the server's
memory whatever ``fsync`` says.

Each test gets a database of its own (:meth:`PgServer.create_database`), dropped after.
Where the test would open it through the app at once (:func:`database_for`), the database
is a copy of one migrated once per server (``CREATE DATABASE ... TEMPLATE``): the same
schema as migrating it, without running every migration again for each test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SERVICE_USER = "postgres"
"""The unprivileged user the server runs as when the tests run as root."""


def bin_dir() -> Path | None:
    """The newest installed server's binaries (``initdb``, ``pg_ctl``), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def unavailable() -> str | None:
    """Why no server can be started here, or None."""
    if bin_dir() is None:
        return "PostgreSQL server not installed (apt install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'desktop-agent[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return f"running as root and there is no {SERVICE_USER!r} user to run the server"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running throwaway cluster (see the module's docstring)."""

    root: Path
    port: int
    user: str
    durable: bool = False
    """Commits are flushed to disk (fsync on), as a real server's are: for benchmarks."""
    _databases: list[str] = field(default_factory=list)
    _template: str | None = None
    """A database migrated to the newest schema, copied by ``create_database(migrated=True)``."""

    @property
    def data(self) -> Path:
        """The cluster's data folder."""
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """The libpq connection string of ``database`` (for psycopg directly)."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={database}"

    def create_database(self, *, migrated: bool = False) -> str:
        """A new database, empty or (``migrated``) at the newest schema; returns its name.

        A migrated one is a copy of :meth:`migrated_template`: what opening an empty
        database with the app would have made of it, without running the migrations.
        """
        import psycopg

        template = f' TEMPLATE "{self.migrated_template()}"' if migrated else ""
        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{template}')  # names we made: no injection
        self._databases.append(name)
        return name

    def migrated_template(self) -> str:
        """The server's database at the newest schema, migrated by the app on first use.

        Nothing connects to it afterwards (PostgreSQL copies a template only while nobody
        is connected to it); it goes with the server.
        """
        if self._template is None:
            import psycopg

            from desktop_agent.persistence.db import Database, DbSettings

            name = "template_" + uuid.uuid4().hex[:16]
            with psycopg.connect(self.dsn(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            Database(DbSettings(self.url(name))).dispose()  # migrates it
            self._template = name
        return self._template

    def drop_database(self, name: str) -> None:
        """Drop ``name`` (closing what still holds it)."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        with contextlib.suppress(ValueError):
            self._databases.remove(name)

    def add_password_user(self, user: str, password: str) -> None:
        """A login role that must give ``password`` over TCP (the others are trusted).

        Once per server: a second call for the same role changes nothing.
        """
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone():
                return
            conn.execute(f"CREATE ROLE \"{user}\" LOGIN SUPERUSER PASSWORD '{password}'")
        hba = self.data / "pg_hba.conf"
        rule = f"host all {user} 127.0.0.1/32 scram-sha-256\n"
        _as_service_user(["sh", "-c", f"printf '%s' '{rule}' | cat - {hba} > {hba}.new"])
        _as_service_user(["mv", f"{hba}.new", str(hba)])
        self.pg_ctl("reload")

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``pg_ctl`` on this cluster, as the server's user."""
        binaries = bin_dir()
        assert binaries is not None
        return _as_service_user(
            [str(binaries / "pg_ctl"), "-D", str(self.data), *args], check=check
        )

    def start(self) -> None:
        """Start (or restart after :meth:`stop`) the server; returns once it accepts."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
        options += "-c max_connections=300"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        self.pg_ctl("-o", options, "-l", str(self.root / "server.log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate`` is a crash: no checkpoint, recovery at start)."""
        self.pg_ctl("-m", mode, "-w", "stop", check=False)

    def close(self) -> None:
        """Stop the server and remove its folder."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _as_service_user(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        argv = ["runuser", "-u", SERVICE_USER, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr or result.stdout}")
    return result


def start_server(*, durable: bool = False) -> PgServer:
    """Create and start a throwaway cluster (see the module's docstring)."""
    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError("PostgreSQL server not installed")
    root = Path(tempfile.mkdtemp(prefix="desktop-agent-pg-"))
    user = SERVICE_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVICE_USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    os.chmod(root, 0o700)
    _as_service_user(
        [
            str(binaries / "initdb"),
            "-D",
            str(root / "data"),
            "-U",
            user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]
    )
    server = PgServer(root, _free_port(), user, durable=durable)
    server.start()
    return server


_shared: PgServer | None = None


def shared_server() -> PgServer:
    """The test process's server, started on first use and removed when the process ends."""
    global _shared
    if _shared is None:
        import atexit

        _shared = start_server()
        atexit.register(_shared.close)
    return _shared


BACKENDS = ("sqlite", "postgresql")
"""The databases the suites that claim both run on (a fixture parameter)."""


@contextlib.contextmanager
def database_for(folder: Path, backend: str) -> Iterator[None]:
    """Make ``folder``'s database a fresh one on the shared server (or leave it SQLite).

    On the server it is already at the newest schema (a copy of the server's migrated
    template), as the first client to open it would have left it.

    The folder gets the pointer file a database URL would give it (``database.url``), so
    the client, the CLI and worker children opened on ``folder / desktop-agent.db`` all use
    the server; the database is dropped afterwards. Skips the test when no server can run.
    """
    if backend == "sqlite":
        yield
        return
    import pytest

    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = shared_server()
    name = server.create_database(migrated=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "database.url").write_text(server.url(name) + "\n", encoding="utf-8")
    try:
        yield
    finally:
        server.drop_database(name)
