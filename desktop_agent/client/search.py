"""Search over everything runs recorded: the filters' words, read into times and values.

The engine of search is :mod:`desktop_agent.persistence.search` (the index, the query
syntax, the read model); :meth:`Client.search <desktop_agent.client.api.Client.search>`
catches the index up and asks it. This module reads what an analyst types for a date
(``yesterday``, ``last 7 days``, ``2026-11-01``, ``2026-11-01..2026-11-20``) into times,
in local time, so the CLI and the app's search field mean the same thing by the same
words.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.search import SearchFilters, SearchHit, fts_query

__all__ = ["SearchFilters", "SearchHit", "date_range", "day_span", "fts_query"]

_LAST_DAYS = re.compile(r"(?:last|past)\s+(\d+)\s+days?")

DATE_FORMS = "today, yesterday, 'last 7 days', 2026-11-01 or 2026-11-01T09:30"
"""What a date may be, for error messages."""


def _midnight(day: date) -> float:
    return datetime.combine(day, time()).timestamp()  # local time


def day_span(text: str, now: float) -> tuple[float, float]:
    """The span of time ``text`` names, as (start, end) seconds, end excluded.

    ``today`` and ``yesterday`` are those local calendar days; ``last N days`` is today
    and the N - 1 days before it; an ISO date is that whole local day; an ISO date and
    time is that instant (start == end).

    Raises:
        InvalidInputError: ``text`` is none of these.
    """
    words = " ".join(text.lower().split())
    today = datetime.fromtimestamp(now).date()
    if words in ("today", "yesterday"):
        day = today if words == "today" else today - timedelta(days=1)
        return _midnight(day), _midnight(day + timedelta(days=1))
    if words in ("last week", "this week"):
        words = "last 7 days"
    last = _LAST_DAYS.fullmatch(words)
    if last:
        days = int(last.group(1))
        if not 1 <= days <= 36_500:
            raise InvalidInputError(f"{text!r}: the number of days must be from 1 to 36500")
        return _midnight(today - timedelta(days=days - 1)), _midnight(today + timedelta(days=1))
    try:
        if len(words) == 10:
            day = date.fromisoformat(words)
            return _midnight(day), _midnight(day + timedelta(days=1))
        instant = datetime.fromisoformat(words.upper()).timestamp()
    except ValueError:
        raise InvalidInputError(f"{text!r} is not a date; use {DATE_FORMS}") from None
    return instant, instant


def date_range(
    now: float, *, since: str | None = None, until: str | None = None, on: str | None = None
) -> tuple[float | None, float | None]:
    """The (start, end) of the steps wanted; ``None`` is open.

    Args:
        now: the current time (``today`` and ``yesterday`` are relative to it).
        since: from the start of this date on.
        until: up to the end of this date (an instant: up to it).
        on: this date only, or ``A..B`` from the start of A to the end of B (either side
            may be left open: ``2026-11-01..``).

    Raises:
        InvalidInputError: a date cannot be read, ``on`` is given with ``since`` or
            ``until``, or the start is after the end.
    """
    if on is not None and (since is not None or until is not None):
        raise InvalidInputError("give either --date or --since/--until, not both")
    if on is not None:
        since, _, rest = on.partition("..")
        until = rest if ".." in on else since
        since, until = since.strip() or None, until.strip() or None
        if since is None and until is None:
            raise InvalidInputError(f"{on!r} is not a date range; use 2026-11-01..2026-11-20")
    start = day_span(since, now)[0] if since else None
    end = day_span(until, now)[1] if until else None
    if start is not None and end is not None and start >= end:
        raise InvalidInputError(f"the start {since!r} is not before the end {until!r}")
    return start, end
