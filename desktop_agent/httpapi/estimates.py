"""The body of ``POST /v1/runs/estimate``: ``POST /v1/runs``'s, plus what a forecast takes.

The run's options are read as ``POST /v1/runs`` reads them (the goal may be left out: a
forecast does not need it); ``economy`` (a boolean) asks for that mode's figures first,
``template`` names a schedule, watched folder or batch whose past runs to read, ``items``
and ``concurrency`` make it a forecast for that many runs, that many at a time.
"""

from __future__ import annotations

from typing import Any

from desktop_agent.httpapi.inputs import integer, optional_text, run_options

MAX_ITEMS = 100_000
"""The most items a forecast is for (a batch's largest)."""


def estimate_options(body: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`~desktop_agent.client.estimates.estimate_run`."""
    for ignored in ("goal", "workspace", "placement"):  # checked as POST /v1/runs does
        optional_text(body, ignored)
    return {
        **run_options(body),
        "template": optional_text(body, "template") or None,
        "items": integer(body, "items", 1, MAX_ITEMS) or 1,
        "concurrency": integer(body, "concurrency", 1, MAX_ITEMS),
    }
