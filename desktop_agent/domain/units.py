"""Parsing and formatting of durations and money, shared by CLI and GUI."""

from __future__ import annotations

import re

from desktop_agent.domain.errors import InvalidInputError

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_duration(text: str) -> float:
    """Parse ``90``, ``90s``, ``15m``, ``1h30m``, ``2d`` into seconds.

    Raises:
        InvalidInputError: the text is not a positive duration.
    """
    raw = text.strip().lower()
    if not raw:
        raise InvalidInputError("empty duration; use e.g. 30m, 2h, 1d")
    try:
        value = float(raw)
    except ValueError:
        pos = 0
        total = 0.0
        for match in _PART.finditer(raw.replace(" ", "")):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(raw.replace(" ", "")) or pos == 0:
            raise InvalidInputError(
                f"invalid duration {text!r}; use e.g. 90s, 30m, 2h, 1h30m, 1d"
            ) from None
        value = total
    if value <= 0 or value != value or value == float("inf"):
        raise InvalidInputError(f"invalid duration {text!r}: must be positive")
    return value


def format_duration(seconds: float) -> str:
    """Format seconds compactly: ``45s``, ``12m``, ``3h05m``, ``2d04h``."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def format_usd(amount: float) -> str:
    """Format dollars with precision that suits small model costs."""
    if amount < 0.01:
        return f"${amount:.4f}"
    if amount < 100:
        return f"${amount:.2f}"
    return f"${amount:,.0f}"
