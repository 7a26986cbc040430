"""The drivers of runs that other Claude agents drive, one per ``AgentSpec.agent`` kind.

``build_executor`` hands them to the engine's ``RunExecutor``: a claimed run whose spec
names another agent is moved forward by its driver (a ``ForeignAgent``), under the same
lease, fencing and hibernation as our own runs. Claude Code sessions are imported
read-only and never executed: their driver applies a decision on an approval one asked
for, and declines any other command sent to one.
"""

from __future__ import annotations

from desktop_agent.agents.claude_code_hooks import ReadOnlySession
from desktop_agent.config import Settings
from desktop_agent.domain.agents import AgentKind
from desktop_agent.engine.ports import ForeignAgent
from desktop_agent.persistence.imported_sessions import ImportedSessions
from desktop_agent.persistence.store import SqlStore
from desktop_agent.worker.agent_sdk import agent_sdk_driver
from desktop_agent.worker.managed import managed_driver


def foreign_agents(store: SqlStore, settings: Settings) -> dict[str, ForeignAgent]:
    """The drivers this worker has, by agent kind."""
    # Claude Code sessions are imported, never executed: their driver applies decisions.
    sessions = ImportedSessions(store.db)
    drivers: dict[str, ForeignAgent] = {
        AgentKind.CLAUDE_CODE.value: ReadOnlySession(store, sessions.decide)
    }
    # Managed Agents sessions are read with the analyst's key, read when a session is:
    # without one, a followed run waits for a key as the engine's runs do.
    drivers[AgentKind.MANAGED.value] = managed_driver(store, settings)
    # Agent SDK runs: sessions kept in the journal's database, resumed by any worker.
    drivers[AgentKind.AGENT_SDK.value] = agent_sdk_driver(store, settings)
    return drivers
