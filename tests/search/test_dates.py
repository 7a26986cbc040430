"""The words of a date filter, read in local time (a pure function)."""

from __future__ import annotations

from datetime import datetime

import pytest

from desktop_agent.client.search import date_range, day_span
from desktop_agent.domain.errors import InvalidInputError

NOW = datetime(2026, 11, 24, 15, 30).timestamp()


def _at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute).timestamp()


def test_named_days_are_local_calendar_days() -> None:
    assert day_span("today", NOW) == (_at(2026, 11, 24), _at(2026, 11, 25))
    assert day_span(" Yesterday ", NOW) == (_at(2026, 11, 23), _at(2026, 11, 24))
    assert day_span("last 7 days", NOW) == (_at(2026, 11, 18), _at(2026, 11, 25))
    assert day_span("last 1 day", NOW) == day_span("today", NOW)


def test_iso_dates_and_instants() -> None:
    assert day_span("2026-11-01", NOW) == (_at(2026, 11, 1), _at(2026, 11, 2))
    assert day_span("2026-11-01T09:30", NOW) == (_at(2026, 11, 1, 9, 30),) * 2


def test_ranges() -> None:
    assert date_range(NOW, on="2026-11-01..2026-11-20") == (_at(2026, 11, 1), _at(2026, 11, 21))
    assert date_range(NOW, on="2026-11-01..") == (_at(2026, 11, 1), None)
    assert date_range(NOW, on="yesterday") == (_at(2026, 11, 23), _at(2026, 11, 24))
    assert date_range(NOW, since="last 7 days") == (_at(2026, 11, 18), None)
    assert date_range(NOW, until="2026-11-20") == (None, _at(2026, 11, 21))
    assert date_range(NOW) == (None, None)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"since": "last week-ish"}, "is not a date"),
        ({"since": "2026-13-01"}, "is not a date"),
        ({"since": "last 0 days"}, "from 1 to"),
        ({"on": ".."}, "not a date range"),
        ({"on": "today", "since": "yesterday"}, "not both"),
        ({"since": "today", "until": "yesterday"}, "is not before the end"),
    ],
)
def test_bad_dates_say_what_is_wrong(kwargs: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        date_range(NOW, **kwargs)
    assert says in str(caught.value)
