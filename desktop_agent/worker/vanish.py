"""A worker whose SQLite database file was deleted or replaced: save what it can, say so.

The worker finds out at a poll (:class:`~desktop_agent.persistence.identity.FileWatch`);
by then it has stopped claiming and its runs stop before their next model call or effect
(:meth:`desktop_agent.worker.worker.Worker.tick`). What is left is done here, outside the
database, which is no longer the user's:

* a copy of the database as the worker still sees it (the deleted file stays readable
  through the descriptors the process holds open): every run's journal up to its last
  committed step, a desktop-agent database that ``--db`` opens;
* a note in the data folder, ``database-vanished-<time>-<pid>.txt``: first the message, in
  plain words, then the runs the worker held (id, goal, last step). The app and the CLI
  show its first line (:func:`desktop_agent.persistence.identity.vanish_notice`) until the
  user deletes it.

PostgreSQL has no file: a worker on a server never gets here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from desktop_agent.domain import Run
from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.persistence import backup
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.identity import FileWatch, Vanished, notice_name
from desktop_agent.persistence.store import SqlStore

log = logging.getLogger(__name__)

CODE = "database_vanished"
"""The error code of a worker that stopped because its database file vanished."""


def copy_path(db_path: Path, stamp: str) -> Path:
    """Where the copy of a vanished database made at ``stamp`` goes (beside it)."""
    return db_path.with_name(f"{db_path.stem}.recovered-{stamp}{db_path.suffix or '.db'}")


def save_what_is_left(
    watch: FileWatch,
    found: Vanished,
    held: Sequence[str],
    read_run: Callable[[str], Run | None],
) -> str:
    """Copy the database, write the note, and return the message (one line).

    Args:
        watch: the watch that found the file gone (its connection reads the old file).
        found: ``deleted`` or ``replaced``.
        held: the runs the worker held when it found out.
        read_run: the run as the worker still reads it (its open connections), or None;
            used when no copy could be made.
    """
    path = watch.path
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    copy = copy_path(path, stamp)
    note = path.parent / notice_name(stamp)
    problem = ""
    try:
        watch.rescue(copy)
    except (sqlite3.Error, OSError) as exc:
        problem = str(exc) or type(exc).__name__
        log.error("could not copy the vanished database to %s: %s", copy, problem)
    lines = _held_lines(held, copy if not problem else None, read_run)
    what = "deleted" if found == "deleted" else "replaced by another file"
    message = (
        f"the database file {path} was {what} while this worker was running; it stopped "
        f"claiming runs and stopped the {len(held)} run(s) it held before their next model "
        "call or effect. "
    )
    if problem:
        message += (
            f"No copy of the journal could be made ({problem}): what was written since the "
            f"last backup is lost; {backup.restore_offer(path)}. "
        )
    else:
        message += (
            f"A copy of the database as the worker last saw it, with every run's journal up "
            f"to its last saved step, is at {copy}. "
        )
    message += f"The runs it held are listed in {note}. What to do: stop the app and workers"
    if not problem:
        message += (
            f"; to go on with the copy, move it to {path} (replacing whatever is there now), "
            f"or open it with `desktop-agent --db {copy}`"
        )
    message += f"; delete {note} to stop this warning."
    body = [message, "", f"Runs this worker held ({len(held)}):", *lines]
    if not held:
        body.append("- none")
    if found == "replaced":
        body += [
            "",
            f"Another file is at {path} now: a file moved into place, or a new database "
            "another program made after the old one was deleted. The worker did not touch it.",
        ]
    try:
        note.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(body) + "\n")
    except OSError as exc:
        log.error("could not write %s: %s", note, exc.strerror or exc)
        log.error("runs this worker held: %s", "; ".join(lines) or "none")
    return message


def _held_lines(
    held: Sequence[str], copy: Path | None, read_run: Callable[[str], Run | None]
) -> list[str]:
    """One line per held run: id, goal, status and last step, from the copy if there is one."""
    store: SqlStore | None = None
    if copy is not None:
        try:
            store = SqlStore(Database(DbSettings.for_path(copy), migrate=False))
        except DesktopAgentError as exc:
            log.error("could not read the copy %s: %s", copy, exc)
    try:
        return [_describe(run_id, store, read_run) for run_id in held]
    finally:
        if store is not None:
            store.db.dispose()


def _describe(run_id: str, store: SqlStore | None, read_run: Callable[[str], Run | None]) -> str:
    run: Run | None = None
    last = ""
    if store is not None:
        with contextlib.suppress(DesktopAgentError):
            run = store.get_run(run_id)
            steps = store.load_steps(run_id, from_seq=run.last_seq, limit=1)
            if steps:
                step = steps[0]
                name = f" {step.name}" if step.name else ""
                last = f" ({step.kind}{name}, {step.status})"
    if run is None:
        run = read_run(run_id)
    if run is None:
        return f"- run {run_id}: its goal and steps could not be read"
    return (
        f"- run {run_id}: goal {run.goal!r}; status {run.status}; "
        f"last saved step {run.last_seq}{last}"
    )
