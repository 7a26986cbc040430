"""The body of ``POST /v1/runs/estimate``: ``POST /v1/runs``'s, plus what a forecast takes.

The run's options are read as ``POST /v1/runs`` reads them (the goal may be left out: a
forecast does not need it); ``economy`` (a boolean) asks for that mode's figures first,
``template`` names a schedule, watched folder or batch whose past runs to read, ``items``
and ``concurrency`` make it a forecast for that many runs, that many at a time.
"""

from __future__ import annotations

from typing import Any

from desktop_agent.client.views import thinking_budget_for
from desktop_agent.domain.catalogue import EFFORT_LEVELS
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration
from desktop_agent.httpapi.inputs import MAX_INT, integer, number, optional_text

MAX_ITEMS = 100_000
"""The most items a forecast is for (a batch's largest)."""


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInputError(f"{key!r} must be true or false")
    return value


def estimate_options(body: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`~desktop_agent.client.estimates.estimate_run`."""
    for ignored in ("goal", "workspace", "placement"):  # checked as POST /v1/runs does
        optional_text(body, ignored)
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
        "thinking_budget": thinking_budget_for(_flag(body, "thinking")),
        "economy": _flag(body, "economy"),
        "template": optional_text(body, "template") or None,
        "items": integer(body, "items", 1, MAX_ITEMS) or 1,
        "concurrency": integer(body, "concurrency", 1, MAX_ITEMS),
    }
