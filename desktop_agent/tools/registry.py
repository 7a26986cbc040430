"""The tool registry: built-in tools plus third-party ones from entry points."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import entry_points

from desktop_agent.engine.ports import Tool
from desktop_agent.tools.files import AppendNote, ListFiles, ReadFile, SearchFiles, WriteFile

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "desktop_agent.tools"

CONTROL_TOOL_NAMES = ("update_plan", "wait", "ask_user")
"""Tools the engine itself implements (plan, durable wait, question to the analyst)."""

DEFAULT_TOOLS = (
    "list_files",
    "read_file",
    "search_files",
    "write_file",
    "append_note",
    "update_plan",
    "wait",
    "ask_user",
)


def builtin_tools() -> list[Tool]:
    """Fresh instances of the built-in tools."""
    return [ListFiles(), ReadFile(), SearchFiles(), WriteFile(), AppendNote()]


class ToolRegistry:
    """Tools by name.

    Args:
        tools: the tools to offer; defaults to the built-ins plus entry points.
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

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Names of all registered tools, control tools included."""
        return sorted({*self._tools, *CONTROL_TOOL_NAMES})

    def version_of(self, name: str) -> str:
        """Version recorded in a run's definition."""
        if name in CONTROL_TOOL_NAMES:
            return "engine-1"
        tool = self._tools.get(name)
        return tool.version if tool else "?"

    def _load_plugins(self) -> None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
                tool = obj() if isinstance(obj, type) else obj
                self.add(tool)
            except Exception:  # a broken plugin must not stop the app
                log.warning("could not load tool plugin %s", ep.name, exc_info=True)
