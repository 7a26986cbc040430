"""The watch on Claude Code's sessions: new and grown ones imported while the setting is on.

With ``claude_code_watch`` on, a worker imports what changed in Claude Code's sessions
folder every :data:`EVERY_S` seconds, as ``desktop-agent import claude-code`` would: the
first pass reads every session, each later one only those whose files changed since the
pass before (their times are read, nothing else). A pass runs in a short thread started
from the poll loop's housekeeping, one at a time. The setting is read again when the
settings file changes, so switching it in Settings needs no restart. Each worker watches
its own machine's folder; two workers on one machine import the same session safely (an
import that finds the journal moved reads it again).

Why the worker and not the app: it runs whenever the app does (the app keeps one alive)
and also without it, and it may reach the adapter, the journal and the prices, which is
all an import needs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from desktop_agent.agents import claude_code as cc
from desktop_agent.config import Settings, settings_path
from desktop_agent.domain import Usage
from desktop_agent.domain.errors import DesktopAgentError, KnownError
from desktop_agent.llm.pricing import model_info
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.imported_sessions import ImportedSessions

log = logging.getLogger(__name__)

EVERY_S = 30.0
"""Seconds between two passes."""

MARGIN_S = 5.0
"""A pass looks this far before the previous one began (a file written as it listed)."""


def price(model: str, usage: Usage, one_hour: int, at: float) -> float:
    """Dollars of one response at the prices of its day (as the client prices imports)."""
    day = datetime.fromtimestamp(at, UTC).date().isoformat()
    return model_info(model, on=day).cost(usage, cache_write_1h_tokens=one_hour)


class ClaudeCodeWatch:
    """Imports Claude Code's changed sessions when due (call :meth:`tick` from the poll loop).

    Args:
        db: the journal's database.
        settings: the settings the worker started with.
        db_path: the database file, whose settings file is read again when it changes
            (None: a server database; the starting settings hold).
        every_s: seconds between two passes.
    """

    def __init__(
        self, db: Database, settings: Settings, db_path: Path | None, every_s: float = EVERY_S
    ) -> None:
        self.journal = ImportedSessions(db)
        self.every_s = every_s
        self._on = settings.claude_code_watch
        self._path = settings_path(db_path) if db_path is not None else None
        self._db_path = db_path
        self._stamp: tuple[int, int, int] | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_at = 0.0
        self._since: float | None = None
        self.passes = 0
        """Passes finished so far (tests wait on it)."""

    def enabled(self) -> bool:
        """Whether the setting is on now (the file is read again when it changed)."""
        if self._path is None or self._db_path is None:
            return self._on
        try:
            st = self._path.stat()
        except OSError:
            return self._on
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._stamp = stamp
            with contextlib.suppress(KnownError):
                self._on = Settings.load(self._db_path).claude_code_watch
        return self._on

    def tick(self, now: float) -> None:
        """Start a pass in a thread when one is due, the setting on and none running."""
        with self._lock:
            running = self._thread is not None and self._thread.is_alive()
            if now < self._next_at or running:
                return
            self._next_at = now + self.every_s
        if not self.enabled():
            self._since = None  # switched on again later: a full pass first
            return
        thread = threading.Thread(target=self.run_pass, name="claude-code-watch", daemon=True)
        with self._lock:
            self._thread = thread
        thread.start()

    def run_pass(self) -> None:
        """Import what changed since the last pass (everything, the first time)."""
        started = time.time()
        try:
            if self._since is None:
                sessions = cc.find_sessions()
            else:
                sessions = cc.changed_sessions(self._since - MARGIN_S)
        except DesktopAgentError as exc:  # no SDK, no folder: said once a pass, in the log
            log.info("Claude Code's sessions are not watched: %s", exc)
            sessions = []
        for session in sessions:
            try:
                cc.import_session(session, self.journal, price)
            except (DesktopAgentError, OSError, ValueError) as exc:
                log.warning("Claude Code session %s not imported: %s", session.session_id, exc)
        self._since = started
        with self._lock:
            self.passes += 1

    def join(self, timeout: float = 5.0) -> None:
        """Wait for a pass in progress (at shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
