"""Tags on runs and notes on steps, on every store implementation (SQLite and PostgreSQL).

Neither is part of the journal: the tests write them through ``persistence.tagging`` over
the store's own database and read them back through the store and the same module.
"""

from __future__ import annotations

import dataclasses

import pytest

from desktop_agent.domain import StepKind
from desktop_agent.domain.errors import InvalidInputError, NotFoundError
from desktop_agent.domain.tags import TAGS_PER_RUN
from desktop_agent.persistence import tagging
from desktop_agent.persistence.store import SqlStore
from tests.store.backends import StoreFactory
from tests.store.runs import T0, intent, new_run


def test_a_run_created_with_tags_reads_them_back_and_lists_by_all_of_them(
    store: SqlStore,
) -> None:
    base = new_run(store, "run-0")
    store.create_run(dataclasses.replace(base, id="run-1", tags=("q3", "urgent")))
    store.create_run(dataclasses.replace(base, id="run-2", tags=("q3",)))

    assert tagging.tags_of(store.db, ["run-0", "run-1", "run-2"]) == {
        "run-1": ("q3", "urgent"),
        "run-2": ("q3",),
    }
    listed = tagging.with_tags(store.db, store.list_runs())
    assert {r.id: r.tags for r in listed} == {
        "run-0": (),
        "run-1": ("q3", "urgent"),
        "run-2": ("q3",),
    }
    assert {r.id for r in store.list_runs(tags=["q3"])} == {"run-1", "run-2"}
    assert [r.id for r in store.list_runs(tags=["q3", "urgent"])] == ["run-1"]
    assert store.list_runs(tags=["urgent", "nope"]) == []


def test_changing_tags_moves_updated_at_only_when_something_changed(
    store_factory: StoreFactory,
) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    run = new_run(store)
    clock.advance(5.0)
    after = tagging.change_tags(store.db, run.id, ["b", "a"], [], clock.now())
    assert after == ("a", "b")
    assert store.get_run(run.id).updated_at == T0 + 5.0

    clock.advance(5.0)
    assert tagging.change_tags(store.db, run.id, ["a"], ["b"], clock.now()) == ("a",)
    assert store.get_run(run.id).updated_at == T0 + 10.0
    clock.advance(5.0)
    assert tagging.change_tags(store.db, run.id, ["a"], ["zzz"], clock.now()) == ("a",)
    assert store.get_run(run.id).updated_at == T0 + 10.0  # nothing changed


def test_too_many_tags_or_an_unknown_run_change_nothing(store: SqlStore) -> None:
    run = new_run(store)
    many = [f"t{i}" for i in range(TAGS_PER_RUN + 1)]
    with pytest.raises(InvalidInputError, match="at most"):
        tagging.change_tags(store.db, run.id, many, [], T0)
    assert tagging.tags_of(store.db, [run.id]) == {}
    with pytest.raises(NotFoundError):
        tagging.change_tags(store.db, "nowhere", ["a"], [], T0)


def test_notes_attach_to_existing_steps_in_order_and_move_updated_at(
    store_factory: StoreFactory,
) -> None:
    store, clock = store_factory.handle.store, store_factory.clock
    run = new_run(store)
    store.commit(run.id, intents=[intent(1, kind=StepKind.MODEL_CALL, name="demo"), intent(2)])
    clock.advance(3.0)
    second = tagging.add_note(store.db, run.id, 2, "stale source", clock.now())
    first = tagging.add_note(store.db, run.id, 1, "good plan", clock.now())
    again = tagging.add_note(store.db, run.id, 2, "checked again", clock.now())

    assert [(n.seq, n.text) for n in tagging.notes_of(store.db, run.id)] == [
        (1, "good plan"),
        (2, "stale source"),
        (2, "checked again"),
    ]
    assert second.id < first.id < again.id
    assert store.get_run(run.id).updated_at == T0 + 3.0
    with pytest.raises(NotFoundError, match="no step 3"):
        tagging.add_note(store.db, run.id, 3, "not yet", clock.now())
    with pytest.raises(NotFoundError):
        tagging.add_note(store.db, "nowhere", 1, "x", clock.now())
    assert len(tagging.notes_of(store.db, run.id)) == 3
