"""Reading and checking what a request brings: every bad input is a 4xx, never a 500.

The body is read as a stream and refused past :data:`MAX_BODY_BYTES` (413) or when it does
not arrive within :data:`BODY_TIMEOUT_S` (408); JSON deeper than :data:`MAX_DEPTH` is
refused before it is parsed (400). Integers are bounded (:data:`MAX_INT`), strings must be
valid Unicode, and each field's type is checked with an error naming it. Unknown fields
are ignored, as they always were.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from desktop_agent.client.views import thinking_budget_for
from desktop_agent.domain.catalogue import EFFORT_LEVELS
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration

MAX_BODY_BYTES = 1024 * 1024
"""The largest body taken (1 MiB); a longer one is refused with 413 as soon as it is seen."""

MAX_DEPTH = 32
"""How deeply arrays and objects may nest in a body."""

BODY_TIMEOUT_S = 30.0
"""How long a body may take to arrive, all of it; a slower one is refused with 408."""

MAX_INT = 2**53
"""The largest integer taken anywhere (steps, seqs, tokens): exact in a double and in SQL."""

_DIGITS = re.compile(r"[0-9]{1,20}")


class BodyTooLargeError(Exception):
    """The body is longer than the limit (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than the limit of {limit} bytes")


class BodyTooSlowError(Exception):
    """The body did not arrive in time (408)."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"the body did not arrive within {limit_s:g} seconds")


async def read_body(
    request: Request, limit: int | None = None, timeout_s: float | None = None
) -> bytes:
    """The body, read as it comes, stopping at ``limit`` bytes or after ``timeout_s``.

    ``limit`` and ``timeout_s`` are :data:`MAX_BODY_BYTES` and :data:`BODY_TIMEOUT_S`
    unless given.

    Raises:
        BodyTooLargeError: the declared length or the bytes received pass ``limit``.
        BodyTooSlowError: the body took longer than ``timeout_s``.
    """
    limit = MAX_BODY_BYTES if limit is None else limit
    timeout_s = BODY_TIMEOUT_S if timeout_s is None else timeout_s
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and len(declared) < 20 and int(declared) > limit:
        raise BodyTooLargeError(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLargeError(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTooSlowError(timeout_s) from None
    return b"".join(chunks)


def json_depth_ok(raw: bytes, max_depth: int = MAX_DEPTH) -> bool:
    """Whether no array or object in ``raw`` nests deeper than ``max_depth`` (no recursion).

    Brackets inside strings are skipped; the text need not be valid JSON (the parser
    says so afterwards).
    """
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                return False
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return True


def _check_text(value: Any) -> None:
    """Refuse strings (anywhere in ``value``) that are not valid Unicode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidInputError(
                    "the body has a string that is not valid Unicode (a lone surrogate)"
                ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_object(raw: bytes) -> dict[str, Any]:
    """A JSON object from ``raw`` (empty: ``{}``), with its depth and strings checked."""
    if not raw.strip():
        return {}
    if not json_depth_ok(raw):
        raise InvalidInputError(f"the body nests deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidInputError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidInputError("the body must be a JSON object")
    _check_text(data)
    return data


def query_int(query: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    """The integer query parameter ``key`` (``default`` when absent), from ``low`` to ``high``."""
    text = query.get(key)
    if text is None:
        return default
    if not _DIGITS.fullmatch(text.strip()) or not low <= int(text) <= high:
        raise InvalidInputError(f"{key!r} must be an integer from {low} to {high}")
    return int(text)


def text(body: dict[str, Any], key: str) -> str:
    """``key``: a non-empty string (required)."""
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{key!r} is required: a non-empty string")
    return value


def optional_text(body: dict[str, Any], key: str) -> str | None:
    """``key``: a string, or absent or null."""
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{key!r} must be a string")
    return value


def number(
    body: dict[str, Any], key: str, low: float = -MAX_INT, high: float = MAX_INT
) -> float | None:
    """``key``: a finite number from ``low`` to ``high``, or absent or null."""
    value = body.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or not low <= value <= high
    ):
        raise InvalidInputError(f"{key!r} must be a number from {low:g} to {high:g}")
    return float(value)


def integer(body: dict[str, Any], key: str, low: int = 0, high: int = MAX_INT) -> int | None:
    """``key``: a whole number from ``low`` to ``high`` (``5.0`` is taken), or absent or null."""
    value = body.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
        or not low <= value <= high
    ):
        raise InvalidInputError(f"{key!r} must be a whole number from {low} to {high}")
    return int(value)


def flag(body: dict[str, Any], key: str) -> bool:
    """A boolean field: true or false (absent or null: false)."""
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInputError(f"{key!r} must be true or false")
    return value


def run_options(body: dict[str, Any]) -> dict[str, Any]:
    """A run's options in a body, checked, as ``Client.start_run``'s keyword arguments.

    One reading for ``POST /v1/runs`` and ``POST /v1/runs/estimate``: model, tools,
    budgets, effort (absent, null or "": the model's default), thinking, economy and the
    server tools (:func:`server_tool_options`).
    """
    max_time = body.get("max_time")
    if max_time is not None and (
        isinstance(max_time, bool) or not isinstance(max_time, str | int | float)
    ):
        raise InvalidInputError("'max_time' must be a duration such as 30m or 2h")
    max_time_s = parse_duration(str(max_time)) if max_time else None
    if max_time_s is not None and max_time_s > MAX_INT:
        raise InvalidInputError("'max_time' is too long")
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, str) for t in tools)
    ):
        raise InvalidInputError("'tools' must be a list of tool names")
    effort = body.get("effort")
    if effort is not None and not isinstance(effort, str):
        raise InvalidInputError(f"'effort' must be one of {', '.join(EFFORT_LEVELS)}")
    return {
        "model": optional_text(body, "model"),
        "tools": tools,
        "max_cost_usd": number(body, "max_cost_usd", 0.0),
        "max_steps": integer(body, "max_steps") or None,
        "max_time_s": max_time_s,
        "effort": effort or "",
        "thinking_budget": thinking_budget_for(flag(body, "thinking")),
        "economy": flag(body, "economy"),
        **server_tool_options(body),
    }


def server_tool_options(body: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's server tools for the run, checked.

    Web search (true, false, or absent or null for the setting), its domain lists (lists
    of domains), web fetch and code execution.
    """
    search = body.get("web_search")
    if search is not None and not isinstance(search, bool):
        raise InvalidInputError("'web_search' must be true, false or null")
    lists = {}
    for key in ("search_domains", "search_blocked_domains"):
        value = body.get(key) or []
        if not (isinstance(value, list) and all(isinstance(d, str) for d in value)):
            raise InvalidInputError(f"{key!r} must be a list of domains such as example.com")
        lists[key] = value
    return {
        "web_search": search,
        **lists,
        "server_web_fetch": flag(body, "server_web_fetch"),
        "code_execution": flag(body, "code_execution"),
    }
