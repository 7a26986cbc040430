"""Automatic backups of the SQLite database, and putting one back.

A backup is a complete, consistent copy made with SQLite's online backup API while the
worker goes on writing (WAL readers never block the writer). Backups are made

* on a schedule, by the worker (:func:`backup_if_due`, by default once a day), and
* before every schema migration of an existing database (:meth:`Database.migrate`),

into ``backups/`` beside the database: the folder is private (0700), each file 0600,
written under a temporary name, checked with ``PRAGMA quick_check``, flushed to disk and
renamed, so a backup that exists is whole. The newest :data:`KEEP` are kept.

A damaged database (``database disk image is malformed``, ``file is not a database``) is
reported with the offer to restore: :func:`restore` checks the backup, moves the damaged
file (and its ``-wal``/``-shm``) aside rather than deleting it, and copies the backup in
its place. What changed after the backup was made is not in it; the damaged file stays
for whoever wants to dig it out. The effects the runs started after the backup are not in
it either, but the effect ledger beside the database has them: before the copy is put in
place, :func:`~desktop_agent.persistence.restored.reconcile` holds every run whose effects
after the backup are unknown, so that none is repeated blindly. After each backup, the
ledger's lines older than the oldest backup kept are dropped (they cannot matter to a
restore of any of them: :meth:`~desktop_agent.persistence.ledger.EffectLedger.compact`).

Files are opened with the standard library's ``sqlite3`` only (the few queries are built
from the declared tables and rendered once: :mod:`~desktop_agent.persistence.compiled`), so
that a damaged database can be dealt with even when nothing else can open it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import select

from desktop_agent.domain.errors import StorageError
from desktop_agent.persistence.compiled import execute
from desktop_agent.persistence.files import fsync_dir
from desktop_agent.persistence.ledger import COMPACT_MARGIN_S, EffectLedger
from desktop_agent.persistence.restored import Reconciled, reconcile
from desktop_agent.persistence.tables import workers

log = logging.getLogger(__name__)

BACKUP_DIR = "backups"
KEEP = 5
"""Backups kept; older ones are deleted after each new one."""

EVERY_S = 24 * 3600.0
"""Age of the newest backup after which the worker makes another."""

_NAME = re.compile(r"^(?P<stem>.+)-(?P<stamp>\d{8}-\d{6}-\d{3})-(?P<reason>[a-z0-9-]+)\.db$")
_CORRUPT = ("malformed", "not a database", "disk image", "file is encrypted", "corrupt")


@dataclass(frozen=True)
class BackupInfo:
    """One backup file.

    Attributes:
        path: the file.
        created_at: when it was made (seconds since the epoch).
        size: bytes.
        reason: ``scheduled``, ``pre-migration``, ``manual`` or ``pre-restore``.
    """

    path: Path
    created_at: float
    size: int
    reason: str

    def describe(self) -> str:
        """One line: name, age, size and reason."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created_at))
        return f"{self.path.name} ({when}, {self.size / 1e6:.1f} MB, {self.reason})"


def backup_dir(db_path: Path) -> Path:
    """Where the backups of the database at ``db_path`` go."""
    return db_path.parent / BACKUP_DIR


def is_corruption(text: str) -> bool:
    """Whether an SQLite error message says the file is damaged."""
    low = text.lower()
    return any(word in low for word in _CORRUPT)


def restore_offer(db_path: Path) -> str:
    """The way back for a damaged database: the newest backup, if there is one."""
    latest = newest_backup(db_path)
    if latest is None:
        return "no automatic backup exists yet; restore the file from your own backups"
    return (
        f"`desktop-agent db restore` puts back the newest backup, "
        f"{latest.describe()}; what changed after it is not in it"
    )


def damaged_message(db_path: Path, detail: str) -> str:
    """What to tell the user about a damaged database, with the offer to restore."""
    return f"the database {db_path} is damaged ({detail}); {restore_offer(db_path)}"


def list_backups(db_path: Path) -> list[BackupInfo]:
    """The backups of the database at ``db_path``, newest first."""
    folder = backup_dir(db_path)
    if not folder.is_dir():
        return []
    out = []
    for path in folder.iterdir():
        m = _NAME.match(path.name)
        if not m or m["stem"] != db_path.stem or not path.is_file():
            continue
        try:
            made = time.mktime(time.strptime(m["stamp"][:15], "%Y%m%d-%H%M%S"))
            made += int(m["stamp"][16:]) / 1000
            size = path.stat().st_size
        except (ValueError, OSError):
            continue
        out.append(BackupInfo(path, made, size, m["reason"]))
    return sorted(out, key=lambda b: (b.created_at, b.path.name), reverse=True)


def newest_backup(db_path: Path) -> BackupInfo | None:
    """The most recent backup, if any."""
    backups = list_backups(db_path)
    return backups[0] if backups else None


def _private_dir(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_file(path: Path) -> str:
    """``ok`` when ``path`` is a sound SQLite database, else what is wrong with it."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        result = "; ".join(str(r[0]) for r in rows[:3])
        return "ok" if result == "ok" else result
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()


def make_backup(
    db_path: Path,
    *,
    reason: str = "manual",
    keep: int = KEEP,
    clock: Callable[[], float] = time.time,
) -> BackupInfo:
    """Copy the database with the online backup API into its backup folder.

    Raises:
        StorageError: the database cannot be read, is damaged (a damaged copy is not a
            backup), or the copy cannot be written.
    """
    if not db_path.is_file():
        raise StorageError(f"no database at {db_path} to back up")
    folder = backup_dir(db_path)
    now = clock()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    final = folder / f"{db_path.stem}-{stamp}-{reason}.db"
    tmp = folder / f".{final.name}.tmp"
    try:
        _private_dir(folder)
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write a backup into {folder}: {exc.strerror}") from None
    try:
        src = sqlite3.connect(db_path, timeout=30)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
                problem = dst.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                dst.close()
        finally:
            src.close()
        if problem != "ok":
            raise StorageError(damaged_message(db_path, str(problem)))
        _fsync_file(tmp)
        os.replace(tmp, final)
        fsync_dir(folder)
    except sqlite3.Error as exc:
        text = str(exc)
        if is_corruption(text):
            raise StorageError(damaged_message(db_path, text)) from None
        raise StorageError(f"cannot back up {db_path}: {text}") from None
    except OSError as exc:
        raise StorageError(f"cannot write a backup into {folder}: {exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    prune(db_path, keep)
    compact_ledger(db_path)
    return BackupInfo(final, now, final.stat().st_size, reason)


def compact_ledger(db_path: Path) -> int:
    """Drop the effect ledger's lines older than the oldest backup kept; returns how many.

    Such a line's intent was committed before that backup was taken, so every backup kept
    holds its step: none of them can be missing it (see :mod:`~desktop_agent.persistence.
    ledger`). A day's margin is kept. A failure only leaves the ledger longer: it is logged.
    """
    backups = list_backups(db_path)
    if not backups:
        return 0
    try:
        return EffectLedger.beside(db_path).compact(backups[-1].created_at - COMPACT_MARGIN_S)
    except StorageError as exc:
        log.warning("effect ledger not compacted: %s", exc)
        return 0


def prune(db_path: Path, keep: int = KEEP) -> list[Path]:
    """Delete all but the newest ``keep`` backups; returns the deleted files."""
    gone = []
    for info in list_backups(db_path)[max(1, keep) :]:
        with contextlib.suppress(OSError):
            info.path.unlink()
            gone.append(info.path)
    return gone


def backup_if_due(
    db_path: Path,
    *,
    every_s: float = EVERY_S,
    keep: int = KEEP,
    clock: Callable[[], float] = time.time,
) -> BackupInfo | None:
    """Make a scheduled backup when the newest one is older than ``every_s``."""
    latest = newest_backup(db_path)
    now = clock()
    if latest is not None and now - latest.created_at < every_s:
        return None
    try:
        size = sum(p.stat().st_size for p in (db_path, Path(f"{db_path}-wal")) if p.exists())
        free = shutil.disk_usage(db_path.parent).free
    except OSError:
        size = free = 0
    if free < 2 * size + (1 << 20):
        # A copy would take space the journal itself needs.
        raise StorageError(
            f"no scheduled backup: {free / 1e6:.1f} MB free beside a {size / 1e6:.1f} MB database"
        )
    return make_backup(db_path, reason="scheduled", keep=keep, clock=clock)


@dataclass(frozen=True)
class Restored:
    """What :func:`restore` did.

    Attributes:
        backup: the backup put in place.
        damaged: where the replaced database now is (None if there was none).
        reconciled: the runs held because effects may have happened after the backup.
    """

    backup: BackupInfo
    damaged: Path | None
    reconciled: Reconciled


def restore(
    db_path: Path, backup: Path | None = None, *, clock: Callable[[], float] = time.time
) -> Restored:
    """Put a backup (by default the newest sound one) in place of the database.

    The copy is first reconciled with the effect ledger (runs whose effects after the
    backup are unknown are held for the analyst), then put in place: a restore that fails
    leaves the database as it was. The current file and its ``-wal``/``-shm`` are renamed
    ``*.damaged-STAMP``, never deleted. The ledger is left as it is. Nothing must have the
    database open (no worker, no app).

    Raises:
        StorageError: no usable backup, or the files cannot be moved.
    """
    candidates = list_backups(db_path)
    if backup is not None:
        path = backup if backup.is_absolute() or backup.exists() else backup_dir(db_path) / backup
        chosen = [b for b in candidates if b.path.resolve() == path.resolve()]
        if not chosen:
            if not path.is_file():
                raise StorageError(f"no backup {backup}; `desktop-agent db backups` lists them")
            st = path.stat()
            chosen = [BackupInfo(path, st.st_mtime, st.st_size, "given")]
        candidates = chosen
    if not candidates:
        raise StorageError(f"no automatic backup of {db_path} exists")
    problems = []
    for info in candidates:
        verdict = check_file(info.path)
        if verdict == "ok":
            break
        problems.append(f"{info.path.name}: {verdict}")
    else:
        raise StorageError("no sound backup to restore (" + "; ".join(problems) + ")")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    damaged: Path | None = None
    try:
        tmp = db_path.with_name(f".{db_path.name}.restoring")
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out, info.path.open("rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        # A file given by hand: the time it stands for is read from it, not its mtime.
        made = None if info.reason == "given" else info.created_at
        reconciled = reconcile(tmp, EffectLedger.beside(db_path), made, clock())
        _fsync_file(tmp)
        for suffix in ("", "-wal", "-shm"):
            current = Path(f"{db_path}{suffix}")
            if current.exists():
                aside = current.with_name(f"{current.name}.damaged-{stamp}")
                os.replace(current, aside)
                if suffix == "":
                    damaged = aside
        os.replace(tmp, db_path)
        os.chmod(db_path, 0o600)
        fsync_dir(db_path.parent)
    except OSError as exc:
        raise StorageError(f"cannot restore {db_path}: {exc.strerror}: {exc.filename}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()  # gone when it was put in place
    return Restored(info, damaged, reconciled)


_RUNNING_WORKERS = select(workers.c.host, workers.c.pid, workers.c.proc_started_at).where(
    workers.c.stopped_at.is_(None)
)


def recorded_workers(db_path: Path) -> list[tuple[str, int, float]]:
    """Workers the database lists as running: host, pid and the process's start time.

    Read-only and best effort, without opening the database the usual way (it may be the
    damaged one a restore replaces): nothing when the file is missing or unreadable.
    """
    if not db_path.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{quote(str(db_path))}?mode=ro", uri=True, timeout=2)
        try:
            rows = execute(conn, _RUNNING_WORKERS, {}).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []  # damaged beyond reading: nothing to ask
    return [(str(host), int(pid), float(started)) for host, pid, started in rows]
