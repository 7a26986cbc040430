"""Where a run may execute: any worker, the workers of one machine, or a named pool.

A run's workspace is a folder on some machine; a worker elsewhere cannot read it. So a run
carries a *placement* and a worker claims only runs it may serve: ``any`` (every worker),
``host:NAME`` (workers on machine ``NAME``) or ``pool:NAME`` (workers started with that
pool, e.g. the machines that mount a shared folder).
"""

from __future__ import annotations

import re

from desktop_agent.domain.errors import InvalidInputError

ANY = "any"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def parse_placement(text: str) -> str:
    """``text`` as a placement (``any``, ``host:NAME``, ``pool:NAME``), checked.

    Raises:
        InvalidInputError: anything else, with what is accepted.
    """
    value = text.strip()
    if value == ANY:
        return ANY
    kind, _, name = value.partition(":")
    if kind in ("host", "pool") and _NAME.match(name):
        return f"{kind}:{name}"
    raise InvalidInputError(
        f"placement {text!r} must be any, host:NAME or pool:NAME "
        "(letters, digits, dots, dashes and underscores)"
    )


def serves(placement: str, host: str, pools: tuple[str, ...] | list[str]) -> bool:
    """Whether a worker on ``host`` with ``pools`` may claim a run placed at ``placement``."""
    return placement in (ANY, f"host:{host}", *(f"pool:{p}" for p in pools))


def describe(placement: str) -> str:
    """Words for the analyst: ``any worker``, ``workers on host X``, ``workers of pool Y``."""
    kind, _, name = placement.partition(":")
    if kind == "host":
        return f"workers on {name}"
    if kind == "pool":
        return f"workers of the pool {name}"
    return "any worker"
