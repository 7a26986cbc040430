"""Due times of schedules, computed from the database's times and a given clock time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from desktop_agent.domain import AgentSpec
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.scheduling import RunTemplate, Schedule
from desktop_agent.scheduler.timing import crontab_weekdays, due_firings, next_due, parse_crontab

T0 = datetime(2027, 1, 15, 8, 0, tzinfo=UTC).timestamp()  # a Friday
HOUR = 3600.0


def _schedule(**kw: object) -> Schedule:
    template = RunTemplate("goal", AgentSpec(model="demo", system_prompt=""))
    return Schedule(id="sch-1", name="s", template=template, created_at=T0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("*", "*"),
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("5-7", "fri,sat,sun"),
        ("0,6", "sat,sun"),
        ("*/2", "tue,thu,sat,sun"),
        ("mon-fri", "mon,tue,wed,thu,fri"),
        ("0-6", "*"),
    ],
)
def test_crontab_weekdays_count_from_sunday(field: str, names: str) -> None:
    assert crontab_weekdays(field) == names


def test_weekday_numbers_mean_what_crontab_means() -> None:
    # "1" is Monday in crontab; APScheduler 3 alone would read it as Tuesday.
    trigger = parse_crontab("0 9 * * 1", "UTC")
    nxt = trigger.get_next_fire_time(None, datetime.fromtimestamp(T0, UTC))
    assert nxt is not None and nxt.strftime("%a %H:%M") == "Mon 09:00"


def test_bad_expressions_are_refused_in_one_line() -> None:
    with pytest.raises(InvalidInputError) as exc:
        parse_crontab("0 9 * * 5-1")
    assert "runs backwards" in str(exc.value) and "\n" not in str(exc.value)


def test_interval_firings_count_from_creation_and_coalesce() -> None:
    s = _schedule(every_s=HOUR)
    assert next_due(s) == T0 + HOUR
    assert due_firings(s, T0 + HOUR - 1) == (0, None)
    assert due_firings(s, T0 + HOUR) == (1, T0 + HOUR)
    assert due_firings(s, T0 + 3.5 * HOUR) == (3, T0 + 3 * HOUR)
    handled = _schedule(every_s=HOUR, last_fire_at=T0 + 3 * HOUR)
    assert next_due(handled) == T0 + 4 * HOUR


def test_cron_firings_coalesce_to_the_latest_missed_one() -> None:
    s = _schedule(cron="0 * * * *", timezone="UTC")
    assert next_due(s) == T0  # created on the hour: that hour fires
    count, latest = due_firings(s, T0 + 5.5 * HOUR)
    assert (count, latest) == (6, T0 + 5 * HOUR)
    handled = _schedule(cron="0 * * * *", timezone="UTC", last_fire_at=T0 + 5 * HOUR)
    assert next_due(handled) == T0 + 6 * HOUR
