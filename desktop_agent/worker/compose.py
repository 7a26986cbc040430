"""Composition root of execution: store, models, tools and engine wired together."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from desktop_agent.config import Settings, settings_path
from desktop_agent.domain.errors import KnownError
from desktop_agent.engine.loop import EngineConfig, RunExecutor
from desktop_agent.engine.ports import Clock, ForeignAgent, ModelPort, SystemClock
from desktop_agent.llm.demo import DEMO_MODEL, DemoModel
from desktop_agent.persistence.batches import SqlBatchQueue
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.ledger import EffectLedger, journal_has_effects
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.usage import MonthSpend
from desktop_agent.tools.registry import ToolRegistry
from desktop_agent.worker.agents import foreign_agents
from desktop_agent.worker.crash import crash_hook_from_env

SNAPSHOT_EVERY_ENV = "DESKTOP_AGENT_SNAPSHOT_EVERY"
"""Test seam: steps between snapshots (default: the engine's), so crash tests reach one."""

TEST_TOOLS_ENV = "DESKTOP_AGENT_TEST_TOOLS"
"""Test seam: ``module:factory`` returning extra tools (replacing same-named built-ins).

The crash tests use it to give a worker child process an unsafe tool; never set it otherwise.
"""


class ModelFactory:
    """Gives the model port for a model id, creating clients lazily and once.

    Args:
        settings: the user's settings.
        on_unknown_model: told when the API answers 404 naming a model (the worker's
            catalogue keeper reads the catalogue again).
    """

    def __init__(
        self, settings: Settings, on_unknown_model: Callable[[str], None] | None = None
    ) -> None:
        self.settings = settings
        self.on_unknown_model = on_unknown_model
        self._cache: dict[str, ModelPort] = {}

    def __call__(self, model: str) -> ModelPort:
        """The port for ``model``."""
        if model == DEMO_MODEL:
            return self._cache.setdefault(DEMO_MODEL, DemoModel())
        if "claude" not in self._cache:
            self._cache["claude"] = self._claude()
        return self._cache["claude"]

    def _claude(self) -> ModelPort:
        try:
            from desktop_agent.llm.claude import ClaudeModel  # type: ignore[import-not-found,unused-ignore]
            from desktop_agent.secrets import KeyStore
        except ImportError as exc:  # pragma: no cover - the adapter ships with the package
            raise KnownError(f"the Claude adapter is unavailable: {exc}") from None
        port: ModelPort = ClaudeModel(
            key_source=KeyStore().get,
            settings=self.settings,
            on_unknown_model=self.on_unknown_model,
        )
        return port


def database_password(url: str) -> str | None:
    """A PostgreSQL server's password from the OS keyring (``secrets.database_password``).

    The keyring is imported here, when a server is opened: a worker on a SQLite file
    never loads it for this.
    """
    from desktop_agent.secrets import database_password as from_keyring

    return from_keyring(url)


def open_store(db_path: Path, settings: Settings | None = None) -> SqlStore:
    """Open (and migrate) the database at ``db_path``."""
    settings = settings or Settings.load(db_path)
    db = Database(DbSettings.for_path(db_path, settings.durability, database_password))
    return SqlStore(db)


def build_executor(
    store: SqlStore,
    settings: Settings,
    *,
    clock: Clock | None = None,
    tools: ToolRegistry | None = None,
    model_for: Callable[[str], ModelPort] | None = None,
    config: EngineConfig | None = None,
    foreign: Mapping[str, ForeignAgent] | None = None,
) -> RunExecutor:
    """The engine wired to real adapters.

    On SQLite, the effect ledger beside the database is created here if it does not exist
    yet (the store appends to it before every effect): from now on it covers every backup,
    including the one a worker makes when it starts; for a database that never started an
    effect, every backup ever made.
    """
    path = store.db.settings.sqlite_path
    if path is not None:
        ledger = EffectLedger.beside(path)
        if not ledger.path.exists():
            ledger.ensure(since=None if journal_has_effects(path) else 0.0)
    cfg = config or EngineConfig(
        crash_hook=crash_hook_from_env(),
        settings=settings,
        compaction_threshold=settings.compaction_threshold,
        snapshot_every=snapshot_every_from_env(),
    )
    if cfg.spend_cap is None:
        cfg = dataclasses.replace(cfg, spend_cap=MonthSpend(store.db, CapReader(settings, path)))
    if cfg.batch_queue is None:
        cfg = dataclasses.replace(cfg, batch_queue=SqlBatchQueue(store.db))
    return RunExecutor(
        store,
        model_for or ModelFactory(settings),
        tools or tools_from_env(),
        clock or SystemClock(),
        cfg,
        foreign if foreign is not None else foreign_agents(store, settings),
    )


class CapReader:
    """The monthly spend cap as the settings file says now (re-read when it changes).

    The analyst raises the cap in Settings while runs wait for it; the worker must see
    the new value without a restart. Without a file (a server database), the worker's
    settings hold.
    """

    def __init__(self, settings: Settings, db_path: Path | None) -> None:
        self._db_path = db_path
        self._path = settings_path(db_path) if db_path is not None else None
        self._cap = settings.monthly_spend_cap_usd
        self._stamp: tuple[int, int, int] | None = None

    def __call__(self) -> float | None:
        """The cap in dollars (None: none)."""
        if self._path is None or self._db_path is None:
            return self._cap
        try:
            st = self._path.stat()
        except OSError:
            return self._cap
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._stamp = stamp
            # A cap that cannot be read keeps the last good one (the app saves none).
            with contextlib.suppress(KnownError):
                settings = Settings.load(self._db_path)
                if not settings.replaced("monthly_spend_cap_usd"):
                    self._cap = settings.monthly_spend_cap_usd
        return self._cap


def snapshot_every_from_env() -> int:
    """``DESKTOP_AGENT_SNAPSHOT_EVERY`` when set to a positive integer, else the default."""
    raw = os.environ.get(SNAPSHOT_EVERY_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else EngineConfig.snapshot_every


def tools_from_env() -> ToolRegistry:
    """The default registry, plus the tools named by ``DESKTOP_AGENT_TEST_TOOLS`` if set."""
    registry = ToolRegistry()
    spec = os.environ.get(TEST_TOOLS_ENV, "").strip()
    if spec:
        module, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise KnownError(f"{TEST_TOOLS_ENV}={spec!r} cannot be loaded: {exc}") from None
        for tool in factory():
            registry.add(tool)
    return registry
