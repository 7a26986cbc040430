"""What the new-run form asks for, and the words it offers (no Qt).

:class:`NewRunRequest` is what :class:`~desktop_agent.gui.dialogs.new_run.NewRunDialog`
emits (the arguments of ``Client.start_run``); the template dialogs wrap it in theirs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from desktop_agent.client.views import DEMO_NO_ECONOMY, ModelChoice, ToolInfo
from desktop_agent.domain import EffectClass


@dataclass(frozen=True)
class ServerToolsChoice:
    """Anthropic's server tools the analyst chose for a run (``Client.start_run`` options).

    Attributes:
        web_search: web search on or off (None: the setting decides).
        domains: the domains of the domain list, as typed.
        blocked: the list is of domains never to reach (else the only ones to reach).
        web_fetch: Anthropic's web fetch in the place of our ``web_fetch``.
        code_execution: Anthropic's code execution.
    """

    web_search: bool | None = None
    domains: tuple[str, ...] = ()
    blocked: bool = False
    web_fetch: bool = False
    code_execution: bool = False

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.start_run``."""
        return {
            "web_search": self.web_search,
            "search_domains": () if self.blocked else self.domains,
            "search_blocked_domains": self.domains if self.blocked else (),
            "server_web_fetch": self.web_fetch,
            "code_execution": self.code_execution,
        }


def domain_list(text: str) -> tuple[str, ...]:
    """The domains typed in a field (commas, spaces or new lines between them)."""
    return tuple(d for d in re.split(r"[\s,;]+", text.strip()) if d)


@dataclass(frozen=True)
class NewRunRequest:
    """What the analyst asked for; the arguments of ``Client.start_run``."""

    goal: str
    model: str
    workspace: str | None
    tools: tuple[str, ...]
    approval_overrides: dict[str, str] = field(default_factory=dict)
    max_cost_usd: float | None = None
    max_steps: int | None = None
    max_time_s: float | None = None
    max_tokens_budget: int | None = None
    forked_from: str | None = None
    """The run this one runs again ("Run again"), which then lists it."""
    effort: str = ""
    """``low`` … ``max``, or "" for the model's default."""
    thinking_budget: int = 0
    """Thinking on (above 0) or off."""
    economy: bool = False
    """Each model turn as a request of a Message Batch (half price, slower)."""
    attachments: tuple[str, ...] = ()
    """Files to copy into the workspace's ``attachments/`` (paths)."""
    server_tools: ServerToolsChoice = field(default_factory=ServerToolsChoice)
    """Web search and its domains, web fetch and code execution (Anthropic's)."""
    agent: str = ""
    """Who drives the run: "" (desktop-agent) or ``agent-sdk`` (a Claude Agent SDK session)."""


ECONOMY_TIP = (
    "Each model turn is sent as a request of a Message Batch and billed at half price. "
    "The run waits for every answer (most batches end within an hour, all within 24 "
    "hours), holding no thread: for work that can wait, such as a folder of documents."
)
ECONOMY_DEMO_TIP = DEMO_NO_ECONOMY

POLICIES = [
    ("rules", "Ask when a rule says so: overwrites and irreversible actions (recommended)"),
    ("changes", "Ask before every change: every write and every irreversible action"),
    ("all", "Ask before every tool call"),
]


def overrides_for(policy: str, tools: Sequence[ToolInfo], chosen: Sequence[str]) -> dict[str, str]:
    """Per-tool approval overrides for a policy preset."""
    out = {}
    for tool in tools:
        if tool.name not in chosen or tool.is_control:
            continue
        if policy == "all" or (policy == "changes" and tool.effect != EffectClass.READ_ONLY):
            out[tool.name] = "ask"
    return out


def model_item_text(choice: ModelChoice) -> str:
    """A model as the picker lists it: its name, its status when not active, its price."""
    if choice.is_demo:
        return f"{choice.label}  — demo, no API key needed"
    status = f" ({choice.lifecycle})" if choice.lifecycle != "active" else ""
    price = f"  · {choice.price}" if choice.price else ""
    return f"{choice.label}{status}{price}"


def tool_item_text(tool: ToolInfo) -> str:
    """A tool as the list offers it: its name, and who runs it or what it may change."""
    if tool.origin == "engine":
        what = "built into the agent"
    elif tool.origin == "provider":
        what = "run by Anthropic"
    else:
        what = (tool.effect or EffectClass.READ_ONLY).value.replace("_", " ")
    return f"{tool.name}  ({what})"


DEMO_MODEL_NOTE = (
    "The demo model is offline and simulated: it follows a fixed research script "
    "over the workspace files, and its costs are not real."
)


def model_note_text(choice: ModelChoice | None) -> str:
    """The note under the model picker: what ``choice`` costs (None or demo: the demo's)."""
    if choice is None or choice.is_demo:
        return DEMO_MODEL_NOTE
    lines = [f"Uses your Anthropic API key (Settings) and costs money: {choice.price}."]
    if not choice.efforts:
        lines.append("It has no effort setting.")
    return " ".join(lines)
