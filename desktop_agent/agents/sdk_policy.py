"""The analyst's approval rules applied to the tools of a Claude Agent SDK session.

An Agent SDK session uses Claude Code's tools (``Bash``, ``Write``, ``Read``, ...), not
desktop-agent's. The rules are the ones our own runs follow (``engine/control.py``): a
per-tool policy chosen for the run (``AgentSpec.approval_overrides``: ``ask`` asks every
time, ``never`` refuses the tool, ``always`` leaves it to the defaults), then the settings:
with ``ask_unsafe``, every call that acts on the world waits for the analyst; with
``ask_overwrite``, a write over a file that holds something else does. Which of Claude
Code's tools only read is :data:`READ_ONLY_TOOLS`, which write files :data:`WRITE_TOOLS`
(the same content twice is the same file: idempotent); any other tool (``Bash``, an MCP
server's, or one a later Claude Code adds) counts as acting on the world, so a new tool is
asked about rather than let through.

:class:`SdkTools` gives the engine's approval code (``engine/commands.py`` applying an
approve, edit or reject) a :class:`~desktop_agent.engine.ports.Tool` for each of those
names: their arguments are Claude Code's to check, so an edit need only be a JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.domain.settings import Settings
from desktop_agent.engine.ports import ToolContext, ToolResult

READ_ONLY_TOOLS = frozenset(
    {
        "Read",
        "Glob",
        "Grep",
        "LS",
        "NotebookRead",
        "WebSearch",
        "WebFetch",
        "ToolSearch",
        "TodoWrite",
        "TodoRead",
        "ListAgents",
        "CronList",
        "BashOutput",
        "TaskOutput",
        "Task",
        "Agent",
        "Skill",
    }
)
"""Claude Code's tools that change nothing outside the session (a sub-agent's own tool
calls, ``Task``/``Agent``, go through the same rules one by one)."""

WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools that write a file of the workspace."""

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rules say about one call: ``allow``, ``ask`` the analyst, or ``deny``.

    Attributes:
        verdict: the decision.
        rule: why (shown with the approval in the inbox, or to the model with a denial).
    """

    verdict: Verdict
    rule: str = ""


def effect_of(name: str) -> EffectClass:
    """How a call of Claude Code's tool ``name`` may be repeated after a crash."""
    if name in READ_ONLY_TOOLS:
        return EffectClass.READ_ONLY
    if name in WRITE_TOOLS:
        return EffectClass.IDEMPOTENT
    return EffectClass.UNSAFE


def decide(
    name: str,
    arguments: Mapping[str, object],
    overrides: Mapping[str, str],
    settings: Settings,
    cwd: Path,
) -> Decision:
    """The analyst's rules for one call, in a run with these per-tool policies.

    ``overrides`` name Claude Code's tools; ``*`` stands for every tool not named.
    """
    policy = overrides.get(name, overrides.get("*"))
    if policy == ApprovalPolicy.NEVER:
        return Decision("deny", f"{name} is disabled by the analyst's policy")
    if policy == ApprovalPolicy.ASK:
        return Decision("ask", f"the policy for {name} is to ask")
    effect = effect_of(name)
    if effect == EffectClass.UNSAFE and settings.ask_unsafe:
        return Decision("ask", f"{name} acts on the outside world and cannot be undone")
    if effect == EffectClass.IDEMPOTENT and settings.ask_overwrite:
        changed = _overwritten(name, arguments, cwd)
        if changed is not None:
            return Decision("ask", f"{name} changes {changed}, which already holds content")
    return Decision("allow")


def _overwritten(name: str, arguments: Mapping[str, object], cwd: Path) -> str | None:
    """The existing file a write would change (a ``Write`` of the same content changes none)."""
    raw = arguments.get("file_path") or arguments.get("notebook_path")
    if not isinstance(raw, str) or not raw:
        return None
    path = Path(raw) if Path(raw).is_absolute() else cwd / raw
    try:
        if not path.is_file():
            return None
        if name == "Write" and path.read_text(encoding="utf-8") == arguments.get("content"):
            return None
    except (OSError, UnicodeDecodeError):
        pass  # unreadable: a change it may be
    return str(raw)


@dataclass(frozen=True)
class SdkTool:
    """One of Claude Code's tools as the engine's approval code sees it (never run here)."""

    name: str
    version: str = "claude-code"
    description: str = "A tool of Claude Code, run by the Agent SDK session."

    @property
    def input_schema(self) -> Mapping[str, JSON]:
        """Any JSON object: Claude Code checks the arguments itself."""
        return {"type": "object"}

    @property
    def effect(self) -> EffectClass:
        """See :func:`effect_of`."""
        return effect_of(self.name)

    @property
    def approval(self) -> ApprovalPolicy:
        """The defaults decide (see :func:`decide`)."""
        return ApprovalPolicy.ALWAYS

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Never called: the session runs its tools."""
        raise NotImplementedError(f"{self.name} runs inside the Agent SDK session")

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """No reason of its own."""
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Nothing to check here."""
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """Unknown."""
        return None


class SdkTools:
    """Looks Claude Code's tools up by name: every name is one (see :class:`SdkTool`)."""

    def get(self, name: str) -> SdkTool:
        """The tool called ``name``."""
        return SdkTool(name)
