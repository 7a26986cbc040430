"""Runs: created once, read back whole, found by id or prefix, listed newest first."""

from __future__ import annotations

import pytest

from desktop_agent.domain import Budget, CommandKind, RunStatus
from desktop_agent.domain.errors import NotFoundError, StorageError
from desktop_agent.persistence.store import SqlStore
from tests.store.runs import SPEC, T0, new_run


def test_a_created_run_reads_back_as_it_was_written(store: SqlStore) -> None:
    budget = Budget(max_cost_usd=2.5, max_steps=40, max_time_s=600.0, max_tokens=90_000)
    run = new_run(store, "run-1", budget=budget)

    assert (run.id, run.goal, run.status) == ("run-1", "Summarise the sources", RunStatus.QUEUED)
    assert run.spec == SPEC and run.definition_hash == SPEC.definition_hash
    assert (run.workspace, run.budget) == ("/srv/agent/run-1", budget)
    assert (run.created_at, run.updated_at) == (T0, T0)
    assert (run.last_seq, run.cost_usd, run.usage.total, run.active_seconds) == (0, 0.0, 0, 0.0)
    assert (run.lease_owner, run.lease_expires_at, run.lease_epoch) == (None, None, 0)
    assert (run.wait_reason, run.wake_at, run.attention_seq) == (None, None, None)


def test_a_second_run_with_the_same_id_is_refused_and_the_first_kept(store: SqlStore) -> None:
    new_run(store, "run-1", goal="the first")
    with pytest.raises(StorageError, match="already exists"):
        new_run(store, "run-1", goal="the second")
    assert store.get_run("run-1").goal == "the first"
    assert [r.goal for r in store.list_runs()] == ["the first"]


def test_an_unknown_run_is_not_found_and_gets_no_command(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        store.get_run("nowhere")
    with pytest.raises(NotFoundError):
        store.find_run("nowhere")
    with pytest.raises(NotFoundError):
        store.add_command("nowhere", CommandKind.PAUSE)
    assert store.pending_command_kinds() == {}


def test_runs_are_found_by_unique_prefix_and_listed_newest_first(store: SqlStore) -> None:
    new_run(store, "abc-1", created_at=T0, goal="Market sizing")
    new_run(store, "abd-2", created_at=T0 + 1, goal="Churn review")
    new_run(store, "xyz-3", created_at=T0 + 2, goal="Vendor scan", status=RunStatus.COMPLETED)

    assert store.find_run("abd").id == "abd-2"
    assert store.find_run("abc-1").id == "abc-1"
    with pytest.raises(NotFoundError, match="several"):
        store.find_run("ab")
    assert [r.id for r in store.list_runs()] == ["xyz-3", "abd-2", "abc-1"]
    assert [r.id for r in store.list_runs([RunStatus.QUEUED])] == ["abd-2", "abc-1"]
    assert [r.id for r in store.list_runs(search="churn")] == ["abd-2"]
    assert [r.id for r in store.list_runs(limit=1)] == ["xyz-3"]
