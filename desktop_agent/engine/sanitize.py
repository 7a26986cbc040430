"""Defences at the engine's edges: what a model answers and what a tool returns.

Three kinds of bad input reach the engine from outside, and each has one rule:

* **Lone surrogates** (code points U+D800 to U+DFFF on their own, which JSON escapes and
  undecodable bytes can turn into) cannot be encoded as UTF-8, so they can be neither stored
  nor sent back to the API. Every text that enters the journal from a model or a tool has
  them replaced by U+FFFD.
* **Deep nesting**: a value nested deeper than :data:`MAX_DEPTH` levels is cut there (the
  rest becomes :data:`CUT`), so that storing and copying it never exhausts the stack; tool
  arguments nested deeper than :data:`MAX_ARG_DEPTH` get an error result, not a call.
* **Malformed answers**: content blocks without their fields (a ``tool_use`` without an id
  or a name, a ``text`` without text, an answer that stops for a tool call but holds none)
  raise :class:`MalformedResponseError`. The model call is then recorded as failed, with
  that message, and nothing of the answer enters the conversation.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from desktop_agent.domain import JSON
from desktop_agent.domain.errors import PermanentError
from desktop_agent.engine.ports import ModelResponse, ToolResult

MAX_DEPTH = 64
"""Levels of nesting kept in any value from a model or a tool."""

MAX_ARG_DEPTH = 32
"""Tool arguments nested deeper than this are refused with an error result."""

CUT = "[cut: nested too deeply]"

_SURROGATE = re.compile("[\ud800-\udfff]")


class MalformedResponseError(PermanentError):
    """The model port returned an answer that does not have the shape of one."""

    code = "malformed_response"


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def clean(value: Any, depth: int = 0) -> JSON:
    """A JSON value safe to store: text cleaned, nesting cut at :data:`MAX_DEPTH`."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return CUT
        return {clean_text(str(k)): clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return CUT
        return [clean(v, depth + 1) for v in value]
    return clean_text(str(value))


def too_deep(value: Any, limit: int = MAX_ARG_DEPTH) -> bool:
    """Whether ``value`` nests containers more than ``limit`` levels deep."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        nxt: list[Any] = []
        for v in level:
            if isinstance(v, dict):
                nxt.extend(v.values())
            elif isinstance(v, list | tuple):
                nxt.extend(v)
        if not nxt:
            return False
        level = nxt
    return True


def _block(i: int) -> str:
    return f"the model's answer is malformed: content block {i}"


def check_response(response: ModelResponse) -> ModelResponse:
    """The answer with its text cleaned, or :class:`MalformedResponseError`."""
    content = response.content
    if not isinstance(content, list):
        raise MalformedResponseError("the model's answer is malformed: content is not a list")
    blocks: list[dict[str, JSON]] = []
    ids: set[str] = set()
    for i, block in enumerate(content, start=1):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise MalformedResponseError(f"{_block(i)} has no type")
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise MalformedResponseError(f"{_block(i)} (text) has no text")
        if kind == "tool_use":
            for name in ("id", "name"):
                if not isinstance(block.get(name), str) or not block[name]:
                    raise MalformedResponseError(f"{_block(i)} (tool_use) has no {name}")
            if block["id"] in ids:
                raise MalformedResponseError(f"{_block(i)} repeats tool_use id {block['id']!r}")
            ids.add(block["id"])
        cleaned = clean(block)
        assert isinstance(cleaned, dict)
        blocks.append(cleaned)
    if not isinstance(response.stop_reason, str):
        raise MalformedResponseError("the model's answer is malformed: it has no stop reason")
    if response.stop_reason == "tool_use" and not ids:
        raise MalformedResponseError(
            "the model's answer is malformed: it stops for a tool call but holds none "
            "(it may have been cut off)"
        )
    return dataclasses.replace(
        response, content=blocks, thinking=clean_text(str(response.thinking or ""))
    )


def clean_result(result: ToolResult) -> ToolResult:
    """A tool's result with its text cleaned (unchanged when nothing needed it)."""
    content = clean_text(str(result.content))
    data = clean(result.data)
    if content is result.content and data == result.data:
        return result
    return ToolResult(content, result.is_error, data)
