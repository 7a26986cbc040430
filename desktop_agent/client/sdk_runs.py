"""Runs that the Claude Agent SDK drives, as the client starts them (``agent="agent-sdk"``).

Such a run is a session of the Agent SDK (Claude Code's loop and tools) that a worker
executes and keeps in the journal (``worker/agent_sdk.py``): the run's model, effort,
budgets, per-tool approval policies (by Claude Code's tool names: ``Bash``, ``Write``, ...)
and system prompt (added to Claude Code's own) apply; desktop-agent's own tools do not.
"""

from __future__ import annotations

import dataclasses
import importlib.util

from desktop_agent.domain import DEMO_MODEL, AgentSpec
from desktop_agent.domain.agents import AgentKind, agent_kind
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.text import check_text

INSTALL_HINT = "pip install 'desktop-agent[agents]'"


def sdk_installed() -> bool:
    """Whether the Claude Agent SDK can be imported here."""
    return importlib.util.find_spec("claude_agent_sdk") is not None


def checked_agent(agent: str | None, model: str, *, economy: bool) -> str:
    """The agent a new run asks for: "" (desktop-agent's own loop) or ``agent-sdk``.

    Raises:
        InvalidInputError: an unknown kind, one that is not started from here, the SDK
            not installed, or an option the SDK's sessions do not take.
    """
    kind = agent_kind((agent or "").strip())
    if kind is AgentKind.DESKTOP:
        return ""
    if kind is not AgentKind.AGENT_SDK:
        raise InvalidInputError(
            f"{kind.label} runs are not started here: choose desktop-agent or "
            f"{AgentKind.AGENT_SDK.label} ({AgentKind.AGENT_SDK.value})"
        )
    if not sdk_installed():
        raise InvalidInputError(
            f"the {kind.label} is not installed here: {INSTALL_HINT} (it brings the "
            "Claude Code CLI it drives)"
        )
    if model == DEMO_MODEL:
        raise InvalidInputError(
            f"the demo model runs inside desktop-agent: a {kind.label} run needs a Claude model"
        )
    if economy:
        raise InvalidInputError(
            f"economy mode sends desktop-agent's own model turns in batches: a {kind.label} "
            "run streams its calls"
        )
    return kind.value


def sdk_spec(spec: AgentSpec, agent: str, system_prompt: str | None) -> AgentSpec:
    """``spec`` as the definition of a run ``agent`` drives (its own tools; our prompt's add-on)."""
    return dataclasses.replace(
        spec,
        agent=agent,
        tools=(),
        system_prompt=check_text(system_prompt or "", "the system prompt"),
        web_search=None,
        search_domains=(),
        search_blocked_domains=(),
    )
