"""An idle worker's poll that costs nothing: look again only when something could have changed.

A worker polls five times a second for runs to claim. When one poll found nothing, the
next finds nothing either unless (a) someone committed to the database since (a command,
an approval's decision, a new run, a released lease...), (b) time made a run claimable
(a wake time came, a lease ran out:
:meth:`~desktop_agent.persistence.workers.WorkerQueries.next_due`), or (c) the worker's
own view moved (a worker found dead, a run's rest over, a run finished here).
:class:`ClaimGate` lets the claim's query through only then.

(a) is SQLite's ``PRAGMA data_version`` on a read-only connection of the gate's own
(:class:`ChangeProbe`): it changes whenever any other connection, of this process or
another, commits to the file, and reading it reads no table. PostgreSQL has no such
value: there every poll runs the claim's query (an indexed read whose cost does not grow
with the runs that wait). Whatever the gate says, the query runs at least every
:data:`RECHECK_S`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Hashable
from pathlib import Path

RECHECK_S = 5.0
"""The claim's query runs at least this often, changes seen or not (a safety net)."""


class ChangeProbe:
    """Tells, for one read, whether anyone committed to a SQLite file since the last.

    Args:
        conn: a read-only connection of its own to the file.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @classmethod
    def open(cls, path: Path | None) -> ChangeProbe | None:
        """A probe of the SQLite file at ``path``; None without one (PostgreSQL) or on error."""
        if path is None or not path.is_file():
            return None
        try:
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
            )
            conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return cls(conn)

    def version(self) -> int | None:
        """A value that changes whenever another connection commits (None: unreadable)."""
        try:
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) if row else None

    def close(self) -> None:
        """Close the probe's connection."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()


class ClaimGate:
    """Decides whether a poll must run the claim's query, from what the last one found.

    Call :meth:`must_query` before the claim, then :meth:`claimed` or
    :meth:`found_nothing` after it.

    Args:
        probe: the database's change probe (None: every poll queries).
        recheck_s: the query runs at least this often (monotonic seconds).
    """

    def __init__(self, probe: ChangeProbe | None, recheck_s: float = RECHECK_S) -> None:
        self.probe = probe
        self.recheck_s = recheck_s
        self._mark: Hashable | None = None
        self._quiet: tuple[Hashable, float, float] | None = None
        self.skipped = 0
        """Polls that ran no claim's query (read-only; tests, figures)."""

    def must_query(self, view: Hashable, now: float) -> bool:
        """Whether this poll must run the claim's query.

        ``view`` is what the worker's own state adds to the query (dead workers, runs it
        holds or rests); ``now`` the worker's clock. The database's version is read before
        the query, so that a commit made while the query runs is seen by the next poll.
        """
        version = self.probe.version() if self.probe is not None else None
        self._mark = (version, view) if version is not None else None
        quiet = self._quiet
        if self._mark is not None and quiet is not None and quiet[0] == self._mark:
            _mark, until, since = quiet
            if now < until and time.monotonic() - since < self.recheck_s:
                self.skipped += 1
                return False
        self._quiet = None
        return True

    def claimed(self) -> None:
        """The query claimed runs: the next poll queries again."""
        self._quiet = None

    def found_nothing(self, next_due: Callable[[], float | None]) -> None:
        """The query found nothing: skip it until the database changes or time makes work.

        ``next_due`` is asked (one indexed read) only when a probe can tell changes.
        """
        if self._mark is None:
            return
        due = next_due()
        until = due if due is not None else float("inf")
        self._quiet = (self._mark, until, time.monotonic())

    def close(self) -> None:
        """Close the probe."""
        if self.probe is not None:
            self.probe.close()
