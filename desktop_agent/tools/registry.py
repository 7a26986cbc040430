"""The tool registry: built-in tools plus third-party ones from entry points.

A third-party package offers tools by declaring entry points in the group
``desktop_agent.tools``; each entry point names a :class:`~desktop_agent.engine.ports.Tool`
class (instantiated without arguments) or instance::

    [project.entry-points."desktop_agent.tools"]
    crm_lookup = "acme_tools.crm:CrmLookup"

A plugin that fails to load, does not look like a tool, or takes the name of a built-in,
engine or server tool is skipped with a warning: it never stops the app.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from desktop_agent.domain import ApprovalPolicy, EffectClass
from desktop_agent.engine.builtin_tools import CONTROL_TOOL_VERSION, CONTROL_TOOLS, SERVER_TOOLS
from desktop_agent.engine.ports import Tool
from desktop_agent.tools.files import AppendNote, ListFiles, ReadFile, SearchFiles, WriteFile
from desktop_agent.tools.prechecks import CheckedHttpPost, CheckedSendEmail
from desktop_agent.tools.web import WebFetch

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "desktop_agent.tools"

CONTROL_TOOL_NAMES = tuple(CONTROL_TOOLS)
"""Tools the engine itself implements (plan, durable wait, question to the analyst)."""

SERVER_TOOL_NAMES = tuple(SERVER_TOOLS)
"""Tools the model provider runs (Anthropic's web search), offered when enabled."""

DEFAULT_TOOLS = (
    "list_files",
    "read_file",
    "search_files",
    "write_file",
    "append_note",
    "web_fetch",
    "update_plan",
    "wait",
    "ask_user",
)
"""Tools of a new run unless chosen otherwise (``web_search`` joins when enabled)."""


def default_tools(*, web_search: bool = False) -> tuple[str, ...]:
    """The default tool set, with the server-side web search when it is enabled."""
    return (*DEFAULT_TOOLS, "web_search") if web_search else DEFAULT_TOOLS


def builtin_tools() -> list[Tool]:
    """Fresh instances of the built-in tools.

    The unsafe ones come with pre-run checks that also cover how their requests are built
    (see :mod:`~desktop_agent.tools.prechecks`).
    """
    return [
        ListFiles(),
        ReadFile(),
        SearchFiles(),
        WriteFile(),
        AppendNote(),
        WebFetch(),
        CheckedHttpPost(),
        CheckedSendEmail(),
    ]


class ToolRegistry:
    """Tools by name.

    Args:
        tools: the tools to offer; defaults to the built-ins plus entry points.
        plugins: whether to load third-party tools (only with the default tools).
    """

    def __init__(self, tools: Iterable[Tool] | None = None, *, plugins: bool = True) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in builtin_tools() if tools is None else tools:
            self.add(tool)
        if plugins and tools is None:
            self._load_plugins()

    def add(self, tool: Tool) -> None:
        """Register ``tool`` (replacing one of the same name)."""
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        """Forget the tool called ``name`` (if any)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Names of all registered tools, engine and server tools included."""
        return sorted({*self._tools, *CONTROL_TOOL_NAMES, *SERVER_TOOL_NAMES})

    def version_of(self, name: str) -> str:
        """Version recorded in a run's definition."""
        if name in CONTROL_TOOL_NAMES:
            return CONTROL_TOOL_VERSION
        if name in SERVER_TOOL_NAMES:
            return str(SERVER_TOOLS[name]["type"])
        tool = self._tools.get(name)
        return tool.version if tool else "?"

    def _load_plugins(self) -> None:
        reserved = {*self._tools, *CONTROL_TOOL_NAMES, *SERVER_TOOL_NAMES}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
                tool = obj() if isinstance(obj, type) else obj
            except Exception:  # a broken plugin must not stop the app
                log.warning("could not load tool plugin %s", ep.name, exc_info=True)
                continue
            problem = _plugin_problem(tool)
            if problem is None and tool.name in reserved:
                problem = f"its name {tool.name!r} is taken by a built-in tool"
            if problem is not None:
                log.warning("tool plugin %s (%s) skipped: %s", ep.name, ep.value, problem)
                continue
            self.add(tool)
            reserved.add(tool.name)


def _plugin_problem(tool: Any) -> str | None:
    """Why ``tool`` cannot be offered to the model, or None."""
    for attr in ("name", "version", "description", "input_schema", "effect", "approval"):
        if not hasattr(tool, attr):
            return f"it has no {attr}"
    for method in ("run", "approval_reason", "validate", "probe"):
        if not callable(getattr(tool, method, None)):
            return f"it has no {method}() method"
    if not isinstance(tool.name, str) or not tool.name.replace("_", "").isalnum():
        return "its name must be letters, digits and underscores"
    if tool.effect not in set(EffectClass) or tool.approval not in set(ApprovalPolicy):
        return "its effect or approval policy is not one of the known values"
    schema = tool.input_schema
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return "its input_schema is not a JSON object schema"
    return None
