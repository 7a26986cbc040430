"""The SQLite store: configured on purpose, private, migrated, honest about bad files."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.views import RunsTracker
from desktop_agent.domain import AgentSpec, Budget, Run, RunStatus, StepKind, StepStatus
from desktop_agent.domain.errors import SchemaTooNewError, StorageError
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.store import SqlStore


def _pragma(db: Database, name: str) -> object:
    with db.read() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_new_database_is_migrated_private_and_durable(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "nested" / "agent.db"
    db = Database(DbSettings.for_path(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert _pragma(db, "journal_mode") == "wal"
        assert _pragma(db, "synchronous") == 2  # FULL
        assert _pragma(db, "foreign_keys") == 1
        assert _pragma(db, "busy_timeout") == 30000
        assert _pragma(db, "wal_autocheckpoint") == 200
        assert _pragma(db, "journal_size_limit") == 8 * 1024 * 1024
        with db.read() as conn:
            tables = {
                r[0]
                for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
            }
            version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        assert {"runs", "steps", "snapshots", "commands", "approvals", "workers"} <= tables
        assert version is not None
        with db.write() as conn:
            conn.exec_driver_sql("INSERT INTO workers VALUES ('w', 'h', 1, 0, 0, 0, NULL)")
        for suffix in ("-wal", "-shm"):
            side = Path(str(path) + suffix)
            if side.exists():
                assert stat.S_IMODE(side.stat().st_mode) & 0o077 == 0
    finally:
        db.dispose()


def test_normal_durability_is_a_setting(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "n.db", synchronous="NORMAL"))
    try:
        assert _pragma(db, "synchronous") == 1
    finally:
        db.dispose()
    with pytest.raises(StorageError, match="durability"):
        Database(DbSettings.for_path(tmp_path / "x.db", synchronous="SOMETIMES"))


def test_writers_begin_immediate(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "w.db"))
    try:
        with db.write() as conn:
            # Inside BEGIN IMMEDIATE the reserved lock is held before the first write:
            # a second writer connection cannot start.
            other = db.writer.raw_connection()
            try:
                other.execute("PRAGMA busy_timeout=50")
                with pytest.raises(Exception, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
            finally:
                other.close()
            conn.exec_driver_sql("SELECT 1")
    finally:
        db.dispose()


def test_database_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = Database(DbSettings.for_path(path))
    with db.write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    db.dispose()
    with pytest.raises(SchemaTooNewError, match="newer desktop-agent"):
        Database(DbSettings.for_path(path))


def test_corrupt_file_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError, match="not a desktop-agent database"):
        Database(DbSettings.for_path(path))


def test_impossible_location_gets_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError, match="cannot create the database"):
        Database(DbSettings.for_path(blocker / "sub" / "a.db"))


def test_a_run_adding_steps_moves_updated_at_once_a_second_and_the_token_every_step(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    db = Database(DbSettings.for_path(tmp_path / "t.db"))
    store = SqlStore(db, clock=lambda: now[0])
    try:
        spec = AgentSpec(model="claude-haiku-4-5", system_prompt="s", tools=())
        run = Run(
            id="r1",
            goal="g",
            status=RunStatus.RUNNING,
            spec=spec,
            workspace=str(tmp_path),
            budget=Budget(),
            created_at=now[0],
            updated_at=now[0],
            definition_hash=spec.definition_hash,
        )
        store.create_run(run)

        def intent(seq: int) -> StepIntent:
            return StepIntent(seq=seq, kind=StepKind.TOOL_CALL, name="t", input={"n": seq})

        tokens = [store.change_token()]
        seen = []
        store.commit("r1", intents=[intent(1)])
        for seq in range(1, 13):
            now[0] += 0.25
            outcome = StepOutcome(seq, StepStatus.COMPLETED, {"ok": seq}, cost_usd=0.01)
            store.commit("r1", outcome=outcome, intents=[intent(seq + 1)])
            got = store.get_run("r1")
            assert got.last_seq == seq + 1  # progress itself is exact at every commit
            assert got.cost_usd == pytest.approx(0.01 * seq)
            seen.append(got.updated_at)
            tokens.append(store.change_token())
        assert len(set(tokens)) == len(tokens)  # every commit shows in the change token
        # 13 commits over 3 s: updated_at moved at the first and then once a second.
        assert sorted(set(seen)) == [1000.0, 1001.0, 1002.0, 1003.0]
        # Anything else about the run moves it at once.
        now[0] += 0.25
        outcome = StepOutcome(13, StepStatus.COMPLETED, {"ok": 13})
        store.commit("r1", outcome=outcome, patch=RunPatch(status=RunStatus.COMPLETED))
        assert store.get_run("r1").updated_at == now[0]
    finally:
        db.dispose()


def test_the_run_list_shows_steps_added_between_moves_of_updated_at(client: Client) -> None:
    now = [5000.0]
    store = client.store
    store.now = lambda: now[0]
    run = client.start_run("Fast loop", model="claude-haiku-4-5")
    intent = StepIntent(seq=1, kind=StepKind.TOOL_CALL, name="t", input={})
    store.commit(run.id, intents=[intent], patch=RunPatch(status=RunStatus.RUNNING))
    tracker = RunsTracker(client)
    first = tracker.poll()
    assert first is not None and first.rows[0].run.last_seq == 1
    for seq in (1, 2):
        now[0] += 0.1  # within the second: updated_at stays where it was
        nxt = StepIntent(seq=seq + 1, kind=StepKind.TOOL_CALL, name="t", input={})
        store.commit(run.id, outcome=StepOutcome(seq, StepStatus.COMPLETED, {}), intents=[nxt])
        delta = tracker.poll()
        assert delta is not None, "the change token missed a new step"
        (row,) = delta.rows
        assert row.run.last_seq == seq + 1
        assert row.run.updated_at == 5000.0
    assert tracker.poll() is None  # and nothing else changed


def test_run_options_are_checked_by_name_even_from_untyped_callers(client: Client) -> None:
    options: dict[str, Any] = {"modle": "demo"}  # a typo, as an untyped caller may send
    with pytest.raises(TypeError, match=r"unexpected run option\(s\): modle"):
        client.start_run("Goal", **options)
    run = client.start_run("Goal", model="demo", max_steps=5, use_defaults=False)
    assert (run.spec.model, run.budget.max_steps, run.budget.max_cost_usd) == ("demo", 5, None)
