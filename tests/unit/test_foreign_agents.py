"""Runs that another Claude agent drives.

The spec names the agent, the worker hands the run to that agent's driver under its lease,
and a worker without one says so on the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import AgentSpec, Run, RunStatus
from desktop_agent.domain.agents import AgentKind, agent_kind
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.ports import CancelToken, LeaseGuard, RunPatch
from desktop_agent.persistence.store import SqlStore
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain


class RecordingDriver:
    """Ends each run it is given, under the lease it was given."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.seen: list[tuple[str, str, int | None]] = []

    def execute(self, run: Run, cancel: CancelToken, lease: LeaseGuard | None) -> RunStatus:
        self.seen.append((run.id, run.spec.session_id, lease.lease.epoch if lease else None))
        self.store.commit(
            run.id,
            patch=RunPatch(status=RunStatus.COMPLETED, status_message="followed to its end"),
            lease=lease.lease if lease else None,
        )
        return RunStatus.COMPLETED


def _foreign_run(client: Client, tmp_path: Path, agent: str, session: str) -> Run:
    run = Run(
        id=f"run-{agent}-{session}",
        goal="a session of another agent",
        status=RunStatus.QUEUED,
        spec=AgentSpec(model="claude-opus-4-7", system_prompt="", agent=agent, session_id=session),
        workspace=str(tmp_path),
        created_at=1.0,
        updated_at=1.0,
    )
    client.store.create_run(run)
    return run


def test_the_spec_keeps_the_agent_and_our_own_runs_keep_their_hash() -> None:
    own = AgentSpec(model="claude-opus-4-7", system_prompt="s")
    assert "agent" not in own.to_json() and "session_id" not in own.to_json()
    theirs = AgentSpec(
        model="claude-opus-4-7", system_prompt="s", agent="managed-agents", session_id="sesn_1"
    )
    back = AgentSpec.from_json(theirs.to_json())
    assert (back.agent, back.session_id) == ("managed-agents", "sesn_1")
    assert back.definition_hash != own.definition_hash
    assert AgentSpec.from_json(own.to_json()).definition_hash == own.definition_hash


def test_agent_kinds_have_labels_and_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    assert agent_kind("claude-code") is AgentKind.CLAUDE_CODE
    assert AgentKind.MANAGED.label == "Managed Agents" and AgentKind.MANAGED.foreign
    assert not AgentKind.DESKTOP.foreign
    with pytest.raises(InvalidInputError, match="claude-code"):
        agent_kind("gpt")


def test_a_worker_hands_a_foreign_run_to_its_driver_under_its_lease(
    client: Client, tmp_path: Path
) -> None:
    run = _foreign_run(client, tmp_path, "managed-agents", "sesn_42")
    driver = RecordingDriver(client.store)
    executor = build_executor(client.store, client.settings, foreign={"managed-agents": driver})
    drain(client.store, executor)
    assert [(rid, sid) for rid, sid, _ in driver.seen] == [(run.id, "sesn_42")]
    assert driver.seen[0][2] is not None  # fenced by the worker's lease
    done = client.store.get_run(run.id)
    assert done.status is RunStatus.COMPLETED
    assert done.status_message == "followed to its end"


def test_a_worker_without_a_driver_tells_the_analyst_and_runs_nothing(
    client: Client, tmp_path: Path
) -> None:
    run = _foreign_run(client, tmp_path, "agent-sdk", "s-1")
    executor = build_executor(client.store, client.settings, foreign={})
    drain(client.store, executor)
    parked = client.store.get_run(run.id)
    assert parked.status is RunStatus.NEEDS_ATTENTION
    assert "cannot drive Claude Agent SDK runs" in parked.status_message
    assert client.store.load_steps(run.id) == []
