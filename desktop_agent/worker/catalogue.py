"""Keeps the worker's model catalogue current: read at start, daily, and after a 404.

The worker builds every request from the catalogue (``llm/catalogue.py``). At start it
uses what the database kept (or the shipped snapshot) and reads the API's answer in a
short-lived thread when a key is set; it reads it again once a day, and soon after the API
answers 404 naming a model (a model retired since the last reading). Each reading is
written to the database for the app and the CLI. A failed reading changes nothing: the
catalogue in use stays, and the next attempt comes after a pause. The key itself is looked
up in that thread (the OS keyring's first use loads all its backends), and a worker whose
first poll claimed runs starts the reading at its next poll (see ``Worker.tick``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.llm.catalogue import REFRESH_EVERY_S, SHARED, Catalogue, fetch_with_key
from desktop_agent.persistence.catalogue import load_models, save_models
from desktop_agent.persistence.db import Database

log = logging.getLogger(__name__)

RETRY_AFTER_S = 600.0
"""Pause after a failed reading, and the least time between two readings a 404 asks for."""


class CatalogueKeeper:
    """Reads the catalogue when due (call :meth:`tick` from the worker's poll loop).

    Args:
        db: where readings are kept.
        key_source: the API key now (None or "" when none is set: nothing is read).
        catalogue: the catalogue the model port builds requests from.
        fetch: reads the API's catalogue with a key (a seam for tests).
    """

    def __init__(
        self,
        db: Database,
        key_source: Callable[[], str | None],
        catalogue: Catalogue = SHARED,
        fetch: Callable[[str], list[dict[str, Any]]] = fetch_with_key,
    ) -> None:
        self.db = db
        self.key_source = key_source
        self.catalogue = catalogue
        self.fetch = fetch
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_at = 0.0
        self._asked = False
        self.readings = 0
        """Readings stored so far (tests wait on it)."""

    def load_stored(self) -> None:
        """Use the reading the database kept, if any (at start, before the first tick)."""
        try:
            models, read_at = load_models(self.db)
        except Exception as exc:  # a cache: the shipped catalogue serves
            # A database going away as the worker starts (a server restarting) raised
            # SQLAlchemy's own error here and ended the worker; its poll loop waits for
            # the database and retries, and this reading is made again at the next tick.
            log.warning("the stored model catalogue cannot be read: %s", exc)
            return
        if models:
            self.catalogue.replace(models, read_at=read_at, source="database")
            self._next_at = read_at + REFRESH_EVERY_S

    def unknown_model(self, model: str) -> None:
        """The API said it does not know ``model``: read the catalogue again soon."""
        log.info("the API does not know %s: the model catalogue will be read again", model)
        with self._lock:
            self._asked = True

    def tick(self, now: float) -> None:
        """Start a reading in a thread when one is due and none is running."""
        with self._lock:
            due = now >= self._next_at or self._asked
            running = self._thread is not None and self._thread.is_alive()
            if not due or running:
                return
            self._asked = False
            self._next_at = now + RETRY_AFTER_S
        # The key is looked up in the thread too: the OS keyring may be slow to answer
        # (its first use loads every backend: 0.1-0.3 s here; a locked one may prompt),
        # and the poll loop that called this claims runs right after.
        thread = threading.Thread(target=self._read, args=(now,), name="catalogue")
        thread.daemon = True
        with self._lock:
            self._thread = thread
        thread.start()

    def _read(self, now: float) -> None:
        try:
            key = (self.key_source() or "").strip()
        except Exception:  # a keyring that cannot be read means no key, not a crash
            key = ""
        if not key:
            return
        try:
            models = self.fetch(key)
        except DesktopAgentError as exc:
            log.warning("the model catalogue could not be read: %s", exc)
            return
        try:
            save_models(self.db, models, now)
        except Exception as exc:  # kept in memory; stored at the next reading
            log.warning("the model catalogue could not be stored: %s", exc)
        self.catalogue.replace(models, read_at=now, source="api")
        with self._lock:
            self._next_at = now + REFRESH_EVERY_S
            self.readings += 1
        log.info("model catalogue read: %d models", len(models))

    def join(self, timeout: float = 5.0) -> None:
        """Wait for a reading in progress (at shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
