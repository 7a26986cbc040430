"""Which agent drives a run: desktop-agent's own loop, or another Claude agent it supervises.

A run's :class:`~desktop_agent.domain.models.AgentSpec` names its agent (``agent``) and, for
another agent, that agent's own session id (``session_id``). Runs of every kind share the
journal, so the run list, the timeline, search, usage, export and compare read them alike;
only the part that moves a run forward differs:

* ``desktop-agent``: the engine's run loop (``engine/loop.py``).
* ``claude-code``: a Claude Code session read from the folder Claude Code keeps on disk;
  imported read-only, never executed.
* ``agent-sdk``: a script or run template on the Claude Agent SDK, its session kept in the
  journal, executed by a worker.
* ``managed-agents``: a session of Anthropic's hosted Managed Agents, followed by a worker.
"""

from __future__ import annotations

from enum import StrEnum

from desktop_agent.domain.errors import InvalidInputError


class AgentKind(StrEnum):
    """The agent behind a run (stored in ``AgentSpec.agent``; "" is our own loop)."""

    DESKTOP = ""
    CLAUDE_CODE = "claude-code"
    AGENT_SDK = "agent-sdk"
    MANAGED = "managed-agents"

    @property
    def label(self) -> str:
        """The name an analyst reads."""
        return _LABELS[self]

    @property
    def foreign(self) -> bool:
        """Whether another agent, not the engine's loop, moves the run forward."""
        return self is not AgentKind.DESKTOP


_LABELS = {
    AgentKind.DESKTOP: "desktop-agent",
    AgentKind.CLAUDE_CODE: "Claude Code",
    AgentKind.AGENT_SDK: "Claude Agent SDK",
    AgentKind.MANAGED: "Managed Agents",
}


def agent_kind(value: str) -> AgentKind:
    """The kind stored as ``value``; an unknown value is refused with the known ones."""
    try:
        return AgentKind(value)
    except ValueError:
        known = ", ".join(k.value or "(empty: desktop-agent)" for k in AgentKind)
        raise InvalidInputError(f"unknown agent kind {value!r}; known: {known}") from None
