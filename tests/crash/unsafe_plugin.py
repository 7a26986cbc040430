"""A test-only tool plugin for worker child processes: ``append_note`` made unsafe.

Loaded by the worker through ``DESKTOP_AGENT_TEST_TOOLS=tests.crash.unsafe_plugin:tools``
(see :mod:`desktop_agent.worker.compose`). It appends blindly, without looking at what the
file already ends with, so executing it twice would write the note twice: exactly the kind
of effect the engine must never repeat on its own after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping

from desktop_agent.domain import JSON, EffectClass
from desktop_agent.engine.ports import Tool, ToolContext, ToolResult
from desktop_agent.tools.base import result
from desktop_agent.tools.files import AppendArgs, AppendNote
from desktop_agent.tools.workspace import confine


class UnsafeAppendNote(AppendNote):
    """Appends without checking: a repeat duplicates the note."""

    version = "test-unsafe-1"
    effect = EffectClass.UNSAFE

    def call(self, args: AppendArgs, ctx: ToolContext) -> ToolResult:
        path = confine(ctx.workspace, args.path)
        text = args.text if args.text.endswith("\n") else args.text + "\n"
        with path.open("a", encoding="utf-8") as f:
            f.write(text)
        return result(f"appended {len(text)} characters to {args.path}")

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        parsed = self.parse(args)
        path = confine(ctx.workspace, parsed.path)
        return path.is_file() and parsed.text.strip() in path.read_text(encoding="utf-8")


def tools() -> list[Tool]:
    """The plugin's tools."""
    return [UnsafeAppendNote()]
