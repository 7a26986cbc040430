"""Test configuration: Qt offscreen, a fresh SQLite file per test, fakes only where needed.

Qt aborts the whole process when it has no display and no platform plugin, so the
offscreen platform is chosen here, before any QApplication can exist.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["DESKTOP_AGENT_DEMO_DELAY"] = "0"
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("DESKTOP_AGENT_DB", None)
# Tests drive their own workers: a CLI decision must not start a background one by itself
# (tests of that behaviour remove this from their subprocesses' environment).
os.environ["DESKTOP_AGENT_AUTOSTART_WORKER"] = "0"
# The suite starts hundreds of interpreters (the CLI, workers, probes, benchmarks): each
# would compile the package from source again, and every pytest worker each test module,
# were bytecode never cached (PYTHONDONTWRITEBYTECODE, set in some environments). Cached
# bytecode is written atomically and checked against its source, so it is safe to share.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.engine.loop import EngineConfig, RunExecutor
from desktop_agent.engine.ports import ModelPort
from desktop_agent.llm.demo import DemoModel
from desktop_agent.persistence.store import SqlStore
from desktop_agent.tools.registry import ToolRegistry
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import FakeClock, MemoryKeyring
from tests.helpers.sqlite_template import migrated_database

sys.dont_write_bytecode = False  # this process too (the test modules, imported after)

# The hygiene checks (tests/hygiene/plugin.py): a test fails when it leaves a thread, a
# child process, a Qt window or a database open. pytester runs their own tests.
pytest_plugins = ["pytester", "tests.hygiene.plugin"]


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    """Every test gets an empty in-memory keyring; the real one is never touched."""
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A database file in a fresh data folder."""
    return tmp_path / "data" / "desktop-agent.db"


@pytest.fixture
def client(db_path: Path) -> Iterator[Client]:
    """A client on a fresh, migrated database (settings without default budgets).

    A new SQLite file is a copy of this process's migrated template
    (:func:`~tests.helpers.sqlite_template.migrated_database`), as opening an empty file
    would leave it; a folder pointed at a server (``database.url``) or a database already
    there is opened as it is.
    """
    if not db_path.exists() and not (db_path.parent / "database.url").exists():
        migrated_database(db_path)
    settings = Settings(default_max_cost_usd=None, default_max_steps=None)
    settings.save(db_path)
    c = Client(db_path, settings)
    yield c
    c.close()


@pytest.fixture
def store(client: Client) -> SqlStore:
    """The client's store."""
    return client.store


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with three small sources."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "alpha.md").write_text("# Alpha\nAlpha says the market grew 4% in 2025.\n")
    (ws / "beta.txt").write_text("Beta reports churn fell. More detail follows.\n")
    (ws / "gamma.md").write_text("Gamma: three vendors lead. Others trail far behind.\n")
    return ws


MakeExecutor = Callable[..., RunExecutor]


@pytest.fixture
def make_executor(client: Client) -> MakeExecutor:
    """Build an engine over the test database with chosen model, tools, clock and config."""

    def make(
        model: ModelPort | None = None,
        *,
        tools: ToolRegistry | None = None,
        clock: FakeClock | None = None,
        config: EngineConfig | None = None,
    ) -> RunExecutor:
        demo = DemoModel(delay=0.0)
        chosen = model or demo
        return build_executor(
            client.store,
            client.settings,
            clock=clock,
            tools=tools,
            model_for=lambda name: demo if name == "demo" and model is None else chosen,
            config=config or EngineConfig(settings=client.settings),
        )

    return make


def drain(
    store: SqlStore, executor: RunExecutor, *, clock: FakeClock | None = None, max_runs: int = 4
) -> Worker:
    """Run an in-thread worker until no run is runnable."""
    worker = Worker(
        store,
        executor,
        WorkerConfig(max_runs=max_runs, until_idle=True, poll_s=0.01),
        clock=clock,
    )
    worker.run()
    return worker


@pytest.fixture
def run_worker_thread(client: Client) -> Iterator[Callable[[RunExecutor], Worker]]:
    """Start a worker in a background thread (stopped at teardown)."""
    started: list[tuple[Worker, threading.Thread]] = []

    def start(executor: RunExecutor) -> Worker:
        worker = Worker(client.store, executor, WorkerConfig(max_runs=4, poll_s=0.02))
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(timeout=20)
