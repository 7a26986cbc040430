"""A store keeps the journal segments of the runs it read last, not of every run it saw.

A worker or an app open for weeks reads tens of thousands of runs; each run's segments
(where its journal lives: a fork's parents' prefixes first) were kept forever, one entry
per run. Now the last ``LINEAGES_KEPT`` are, and a run read again after it left the cache
reads the same segments from the database.
"""

from __future__ import annotations

import pytest

from desktop_agent.client import forks
from desktop_agent.client.api import Client
from desktop_agent.persistence import store as store_module
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel


def test_segments_are_kept_for_the_runs_read_last_and_read_again_alike(
    client: Client, make_executor: MakeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "LINEAGES_KEPT", 3)
    parent = client.start_run("Parent", model="claude-haiku-4-5")
    plan = ("update_plan", {"items": [{"text": "look"}]})
    drain(client.store, make_executor(ScriptedModel([Reply("Plan.", [plan]), Reply("Done.")])))
    child = forks.fork(client, parent.id, 2)
    others = [client.start_run(f"Other {i}", model="claude-haiku-4-5") for i in range(4)]

    store = client.store
    first = store.journal_segments(child.id)
    assert [s.run_id for s in first] == [parent.id, child.id]  # the parent's prefix first
    for run in others:
        store.journal_segments(run.id)
    assert len(store._lineages) == 3  # the cache itself is what is tested
    assert child.id not in store._lineages
    assert store.journal_segments(child.id) == first  # read again from the database
    assert list(store._lineages)[-1] == child.id  # now the newest
