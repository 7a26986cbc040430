"""The effect ledger: an append-only file, beside the database, of every effect started.

The journal (the database) is the source of truth, but a restore puts back an *older* copy
of it: what the runs did after the backup is invisible to the restored journal, and a run
resumed from it would do it again. The ledger is written before each effect and lives in
its own file, so that it survives the database's loss; after a restore,
:mod:`desktop_agent.persistence.restored` reads it to put in doubt every effect the
restored journal does not show finished.

Format: UTF-8 text, one JSON object per line. The first line is a header saying since when
the ledger holds *every* effect started (``since``, seconds since the epoch); each other
line is one effect whose intent was just committed::

    {"ledger": 1, "since": 1767000000.0}
    {"run": "r-1", "seq": 2, "key": "r-1:2", "tool": "http_post", "effect": "unsafe",
     "attempt": 1, "at": 1767000012.5, "what": "{'url': ...}"}

How it is written, and why:

* by :meth:`SqlStore.commit <desktop_agent.persistence.store.SqlStore.commit>` over a
  SQLite file (its :class:`~desktop_agent.persistence.store_sqlite.SqliteJournalWriter`'s
  ``ledger``) right after the transaction holding the intent committed (a refused commit
  writes nothing) and before it returns, so before the engine can start the effect;
* each append is one ``write`` to a file opened with ``O_APPEND``, then ``fsync``: lines of
  several worker processes never interleave (a line is far below 4 KB, and the kernel
  appends one ``write`` to a regular file as a whole), and a line that exists is on disk;
* a write cut short by a power loss leaves a torn line; readers skip lines they cannot
  parse (the effect of a torn line never started: its fsync never returned), and an append
  that finds the file not ending in a newline starts with one, so a torn line never eats
  the next;
* the file and its lock file are private (0600), like the database;
* growth is bounded by :meth:`EffectLedger.compact`, run after each backup: a line older
  than the oldest kept backup cannot matter to a restore of any of them (its intent was
  committed before that backup was taken, so every kept backup holds the step and its
  journal shows it), so it is dropped and ``since`` moves up to the cut. A restore of a
  backup older than ``since`` is told the ledger does not reach back that far.

Appends hold a shared lock on ``<ledger>.lock`` and compaction an exclusive one, so that no
line is appended to the old file while compaction replaces it. The locks are
``portalocker``'s: ``flock`` on POSIX (as before, so old and new workers exclude each other),
``LockFileEx`` on Windows.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import bindparam, exists, select

from desktop_agent.domain import EffectClass, StepStatus
from desktop_agent.domain.errors import StorageError
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence.compiled import execute
from desktop_agent.persistence.files import fsync_dir
from desktop_agent.persistence.tables import steps

SUFFIX = ".effects"
"""The ledger of ``agent.db`` is ``agent.db.effects``."""

VERSION = 1

WHAT_CHARS = 200
"""How much of an effect's arguments a line keeps, to tell the analyst which one it was."""

COMPACT_MARGIN_S = 86400.0
"""Lines are kept this much longer than the oldest kept backup strictly needs.

Backup times are read back from local-time file names; a day covers any daylight-saving
shift or clock step between writing and reading them.
"""

LEDGERED = frozenset({EffectClass.UNSAFE, EffectClass.IDEMPOTENT})
"""Effect classes written to the ledger: those a run must not repeat blindly after a restore."""

_ANY_EFFECT = select(
    exists().where(steps.c.effect.in_([bindparam(f"effect{i}") for i in range(len(LEDGERED))]))
)
"""Whether the journal holds a step of a :data:`LEDGERED` class (``effect0``, ...)."""


@dataclass(frozen=True)
class Entry:
    """One effect started.

    Attributes:
        run: the run's id.
        seq: the step's sequence number.
        key: the idempotency key the effect was given.
        tool: the tool's name.
        effect: its effect class (``unsafe`` or ``idempotent``).
        attempt: 1, or more for a step started again.
        at: when the line was written (seconds since the epoch), just before the effect.
        what: the start of the arguments, to recognise the effect by.
    """

    run: str
    seq: int
    key: str
    tool: str
    effect: str
    attempt: int
    at: float
    what: str

    def to_json(self) -> dict[str, object]:
        """The line's object."""
        return {
            "run": self.run,
            "seq": self.seq,
            "key": self.key,
            "tool": self.tool,
            "effect": self.effect,
            "attempt": self.attempt,
            "at": self.at,
            "what": self.what,
        }

    @classmethod
    def from_json(cls, data: object) -> Entry | None:
        """The entry a parsed line holds, or None if it holds none."""
        if not isinstance(data, dict) or "run" not in data:
            return None
        try:
            return cls(
                run=str(data["run"]),
                seq=int(data["seq"]),
                key=str(data["key"]),
                tool=str(data.get("tool", "")),
                effect=str(data.get("effect", "")),
                attempt=int(data.get("attempt", 1)),
                at=float(data["at"]),
                what=str(data.get("what", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Contents:
    """What the ledger file holds.

    Attributes:
        since: the ledger holds every effect started after this time (None: no header).
        entries: the effects, oldest first.
        skipped: lines that could not be read (torn by a crash while being written).
    """

    since: float | None
    entries: list[Entry]
    skipped: int = 0

    def complete_since(self, t: float) -> bool:
        """Whether every effect started after ``t`` is in the ledger."""
        return self.since is not None and self.since <= t


def summarize(arguments: object) -> str:
    """The first :data:`WHAT_CHARS` characters of the arguments, as JSON."""
    text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= WHAT_CHARS else text[: WHAT_CHARS - 1] + "…"


def ledger_path(db_path: Path) -> Path:
    """Where the ledger of the database at ``db_path`` is."""
    return db_path.with_name(db_path.name + SUFFIX)


class EffectLedger:
    """The ledger file of one database.

    Args:
        path: the ledger file (see :func:`ledger_path`).
        clock: time of the lines and of the header.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.clock = clock

    @classmethod
    def beside(cls, db_path: Path) -> EffectLedger:
        """The ledger of the database at ``db_path``."""
        return cls(ledger_path(db_path))

    # ------------------------------------------------------------------ writing

    def record(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Append a line for each effect among ``intents`` that is about to start.

        Called right after the intents were committed; returns once the lines are on disk.

        Raises:
            StorageError: the ledger cannot be written (the effect must then not start).
        """
        now = self.clock()
        entries = [
            Entry(
                run=run_id,
                seq=i.seq,
                key=f"{run_id}:{i.seq}",
                tool=i.name,
                effect=str(i.effect),
                attempt=i.attempt,
                at=now,
                what=summarize(_arguments(i.input)),
            )
            for i in intents
            if i.status == StepStatus.STARTED and i.effect in LEDGERED
        ]
        if entries:
            self.append(entries)

    def append(self, entries: Sequence[Entry]) -> None:
        """Append ``entries`` in one write and fsync them.

        Raises:
            StorageError: the ledger cannot be written.
        """
        data = "".join(_line(e.to_json()) for e in entries).encode()
        try:
            with self._locked(shared=True):
                self._create_if_missing()
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
                try:
                    size = os.fstat(fd).st_size
                    if size and _last_byte(fd, size) != b"\n":
                        data = b"\n" + data  # after a torn line: start a fresh one
                    _write_all(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise StorageError(
                f"cannot write the effect ledger {self.path}: {exc.strerror or exc}"
            ) from None

    def ensure(self, since: float | None = None) -> None:
        """Create the ledger (with its header) if it does not exist yet.

        A worker does this when it starts, before its first backup: the ledger then
        covers every backup made from then on. ``since`` (default: now) is the time from
        which it holds every effect started: 0 for a database in which no effect has
        ever started (see :func:`journal_has_effects`).

        Raises:
            StorageError: it cannot be created.
        """
        try:
            with self._locked(shared=True):
                self._create_if_missing(since)
        except OSError as exc:
            raise StorageError(
                f"cannot create the effect ledger {self.path}: {exc.strerror or exc}"
            ) from None

    def _create_if_missing(self, since: float | None = None) -> None:
        """Create the file with its header, atomically: no one sees it without one."""
        if self.path.exists():
            return
        header = _line({"ledger": VERSION, "since": self.clock() if since is None else since})
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, header.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)  # fails if another process created it meanwhile
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        fsync_dir(self.path.parent)

    @contextlib.contextmanager
    def _locked(self, *, shared: bool) -> Iterator[None]:
        import portalocker  # here: its import reads package metadata (tens of ms)

        fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        with os.fdopen(fd, "r+b") as f:  # closing it releases the lock
            portalocker.lock(f, portalocker.LOCK_SH if shared else portalocker.LOCK_EX)
            yield

    # ------------------------------------------------------------------ reading

    def read(self) -> Contents | None:
        """What the ledger holds; None when there is no ledger file.

        Raises:
            StorageError: the file exists but cannot be read.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(
                f"cannot read the effect ledger {self.path}: {exc.strerror or exc}"
            ) from None
        return parse(raw)

    # ------------------------------------------------------------------ growth

    def compact(self, keep_after: float) -> int:
        """Drop the lines written before ``keep_after``; returns how many were dropped.

        ``since`` moves up to ``keep_after``: the ledger no longer answers for what
        happened before it. Nothing is rewritten when nothing would be dropped.

        Raises:
            StorageError: the ledger cannot be read or replaced.
        """
        try:
            with self._locked(shared=False):
                contents = self.read()
                if contents is None:
                    return 0
                kept = [e for e in contents.entries if e.at >= keep_after]
                dropped = len(contents.entries) - len(kept)
                if not dropped:
                    return 0
                since = max(contents.since or keep_after, keep_after)
                text = _line({"ledger": VERSION, "since": since})
                text += "".join(_line(e.to_json()) for e in kept)
                tmp = self.path.with_name(f".{self.path.name}.compact")
                fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
                try:
                    _write_all(fd, text.encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, self.path)
                fsync_dir(self.path.parent)
                return dropped
        except OSError as exc:
            raise StorageError(
                f"cannot compact the effect ledger {self.path}: {exc.strerror or exc}"
            ) from None


def journal_has_effects(db_path: Path) -> bool:
    """Whether any effect step was ever started in the database (True when unsure).

    Effects start only after their intent is in the journal: a database without any has
    never started one, so a ledger created for it holds every effect from the beginning.
    """
    try:
        conn = sqlite3.connect(f"file:{quote(str(db_path))}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return True
    try:
        classes = {f"effect{i}": str(c) for i, c in enumerate(sorted(LEDGERED))}
        return bool(execute(conn, _ANY_EFFECT, classes).fetchone()[0])
    except sqlite3.Error as exc:
        return "no such table" not in str(exc)  # not even a schema yet: nothing ever ran
    finally:
        conn.close()


def parse(raw: bytes) -> Contents:
    """Read the ledger's bytes, skipping lines that cannot be parsed."""
    since: float | None = None
    entries: list[Entry] = []
    skipped = 0
    for number, line in enumerate(raw.split(b"\n")):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:  # a torn line (also: not UTF-8)
            skipped += 1
            continue
        if number == 0 and isinstance(data, dict) and "ledger" in data:
            with contextlib.suppress(TypeError, ValueError):
                since = float(data["since"])
            continue
        entry = Entry.from_json(data)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
    return Contents(since, entries, skipped)


def _arguments(input_: object) -> object:
    """A tool step's arguments (its input holds them beside the tool use's id)."""
    if isinstance(input_, dict) and "arguments" in input_:
        return input_["arguments"]
    return input_


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"


def _last_byte(fd: int, size: int) -> bytes:
    """The file's last byte (``os.pread`` exists on POSIX only; appends ignore the offset)."""
    os.lseek(fd, size - 1, os.SEEK_SET)
    return os.read(fd, 1)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - a regular file either writes or raises
            raise OSError(errno.EIO, "short write")
        view = view[n:]
