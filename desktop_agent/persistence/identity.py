"""Whether the SQLite file a process opened is still the one at its path.

A database file deleted (or replaced by another file) under a running process does not
stop it: on POSIX systems the open descriptors keep the old file alive, reads and writes
go on in it, and nobody else will ever see them. Any connection opened afterwards finds
an empty file (SQLite creates one) or the replacement. :class:`FileWatch` notices:

* it records the file's identity, ``(st_dev, st_ino)``, as the process holds it open
  (on Linux the ``fstat`` of an open descriptor, read through ``/proc/self/fd``), and one
  ``stat`` of the path tells whether that is still the file there;
* once it found the file gone, no new connection is opened to the path (one would create
  an empty database, or open someone else's file);
* a connection of its own (read-only, opened with the identity) still reads the old file
  after the fact, so the journal can be copied out with SQLite's backup API;
* the old file's write-ahead log and index are taken from beside the path, where the next
  database at the path would read them as its own.

The worker's reaction (stop, save what it can, tell the user) is
:mod:`desktop_agent.worker.vanish`; the note it leaves in the data folder is read back by
:func:`vanish_notice`, for the app and the CLI. PostgreSQL has no file: nothing here
applies to it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import event
from sqlalchemy.engine import Engine

from desktop_agent.persistence.db import Database

FileId = tuple[int, int]
"""``(st_dev, st_ino)``: which file a path or a descriptor is."""

Vanished = Literal["deleted", "replaced"]
"""What became of the database file: gone from its path, or another file is there now."""

NOTICE_GLOB = "database-vanished-*.txt"
"""The notes a worker leaves in the data folder when its database file vanished."""

_PROC_FD = Path("/proc/self/fd")


def path_identity(path: Path) -> FileId | None:
    """``(st_dev, st_ino)`` of the file at ``path`` now, or None when there is none."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino)


def open_identity(path: Path) -> FileId | None:
    """``(st_dev, st_ino)`` of the file this process holds open under ``path``.

    On Linux, the ``fstat`` of a descriptor of ours open on that path, read through
    ``/proc/self/fd`` (no descriptor of our own is opened: closing one would drop the
    process's SQLite locks, see :func:`desktop_agent.persistence.db._check_sqlite_file`).
    Elsewhere, and when no descriptor is found, the path's own ``stat``.
    """
    return _held_identity(path) or path_identity(path)


def _held_identity(path: Path) -> FileId | None:
    """``(st_dev, st_ino)`` of a descriptor of this process open on ``path`` (Linux), or None."""
    target = str(path.resolve())
    with contextlib.suppress(OSError):
        for fd in os.listdir(_PROC_FD):
            try:
                if os.readlink(_PROC_FD / fd) != target:
                    continue
                st = os.stat(_PROC_FD / fd)
            except OSError:  # closed meanwhile by another thread
                continue
            return (st.st_dev, st.st_ino)
    return None


class FileWatch:
    """Watches that the SQLite file of ``db`` stays the one opened (see the module).

    Create it with :meth:`open` (None for a database without a file); :meth:`check` at
    every poll; :meth:`close` at the end.
    """

    def __init__(self, db: Database, path: Path, witness: sqlite3.Connection, ident: FileId):
        self.db = db
        self.path = path
        self.identity = ident
        self._witness = witness
        self._lock = threading.Lock()
        self._vanished: Vanished | None = None
        self._engines: list[Engine] = []
        for engine in {id(e): e for e in (db.writer, db.reader)}.values():
            event.listen(engine, "do_connect", self._before_connect)
            self._engines.append(engine)

    @classmethod
    def open(cls, db: Database) -> FileWatch | None:
        """A watch over ``db``'s file, or None: PostgreSQL, an in-memory or missing file."""
        path = db.settings.sqlite_path
        if path is None or not path.is_file():
            return None
        uri = f"{path.resolve().as_uri()}?mode=ro"
        try:
            witness = sqlite3.connect(uri, uri=True, check_same_thread=False)
            witness.execute("PRAGMA schema_version").fetchone()  # the file is open now
        except sqlite3.Error:
            return None
        ident = open_identity(path)
        if ident is None:
            witness.close()
            return None
        return cls(db, path, witness, ident)

    @property
    def vanished(self) -> Vanished | None:
        """What :meth:`check` found, once it found the file gone (it stays so)."""
        with self._lock:
            return self._vanished

    def check(self) -> Vanished | None:
        """One ``stat`` of the path: ``deleted``, ``replaced``, or None while it is ours."""
        if self.vanished is not None:
            return self.vanished
        now = path_identity(self.path)
        if now == self.identity:
            return None
        found: Vanished = "deleted" if now is None else "replaced"
        with self._lock:
            if self._vanished is None:
                self._vanished = found
            return self._vanished

    def _before_connect(self, *_args: Any) -> None:
        """Before the pool opens a connection: never to a file that is not ours."""
        found = self.check()
        if found is not None:
            raise sqlite3.OperationalError(
                f"the database file {self.path} was {found} while this process had it open; "
                "no new connection is opened to that path"
            )

    def drop_old_sidecars(self) -> list[Path]:
        """Remove the old file's write-ahead log and its index from beside the path.

        SQLite leaves them when a connection to a moved or deleted file closes (they are
        not the new file's to delete), but whatever database is put at the path would read
        them as its own: the old file's pages would show through it. Only files this process
        holds open are removed (the same ``(st_dev, st_ino)``; on Linux, where that can be
        read); its connections keep reading and writing them through their descriptors, so
        nothing of the old journal is lost to :meth:`rescue`. Returns what was removed.
        """
        removed = []
        for suffix in ("-wal", "-shm"):
            side = Path(f"{self.path}{suffix}")
            held = _held_identity(side)
            if held is None or held != path_identity(side):
                continue
            with contextlib.suppress(FileNotFoundError):
                side.unlink()
                removed.append(side)
        return removed

    def rescue(self, dest: Path) -> None:
        """Copy the database as this process still sees it (the old file) to ``dest``.

        Through SQLite's backup API from the connection opened with the identity, which
        still reads the old file after it was deleted (on POSIX systems). ``dest`` is
        written private (0600), whole or not at all (a temporary file, then renamed), as a
        single file (no write-ahead log beside it).

        Raises:
            sqlite3.Error, OSError: the copy could not be made.
        """
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = dest.with_name(f".{dest.name}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
        try:
            copy = sqlite3.connect(tmp)
            try:
                with self._lock:
                    self._witness.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE").fetchone()
            finally:
                copy.close()
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def close(self) -> None:
        """Close the connection of its own; stop guarding the engines if the file stayed.

        Once the file vanished the guard stays: no connection is ever opened to the path
        by these engines again.
        """
        if self.vanished is None:
            for engine in self._engines:
                with contextlib.suppress(Exception):
                    event.remove(engine, "do_connect", self._before_connect)
            self._engines.clear()
        with self._lock:
            self._witness.close()


def notice_name(stamp: str) -> str:
    """The file name of a vanish notice made at ``stamp`` (sorted by time)."""
    return NOTICE_GLOB.replace("*", stamp)


def vanish_notice(folder: Path) -> str | None:
    """The first line of the newest vanish notice in the data folder ``folder``, or None.

    A worker whose database file was deleted or replaced leaves one (see
    :mod:`desktop_agent.worker.vanish`); it stays until the user deletes it.
    """
    try:
        notes = sorted(folder.glob(NOTICE_GLOB))
    except OSError:
        return None
    for note in reversed(notes):
        try:
            text = note.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        first = text.strip().splitlines()[:1]
        if first:
            return first[0]
    return None
