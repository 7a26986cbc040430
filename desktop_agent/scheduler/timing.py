"""When schedules fire: crontab parsing, APScheduler triggers, and due times on our clock.

Due times are computed here from what the database holds (creation time, last handled
firing) and a time given by the caller's clock, never from APScheduler's idea of now: the
scheduler's jobs only decide *when to look*; what is due is decided again, from the
database, when they fire.

Crontab expressions use the classic five fields ``minute hour day-of-month month
day-of-week`` with the classic weekday numbers (0 or 7 is Sunday). APScheduler 3.x counts
weekdays from Monday, so day-of-week numbers are translated to names before it sees them.
When both day-of-month and day-of-week are restricted, a day must match both (APScheduler's
reading; classic cron fires when either matches).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.scheduling import DAY_ABBREVIATIONS, Schedule, cron_weekdays

CRON_HELP = "five fields 'minute hour day-of-month month day-of-week', e.g. '0 9 * * 1-5'"


MAX_CATCH_UP = 10_000
"""Missed firings counted one by one at most; beyond that a firing handles 'now'."""


def crontab_weekdays(field: str) -> str:
    """Translate a classic crontab day-of-week field into APScheduler's day names.

    Args:
        field: e.g. ``*``, ``1-5``, ``0,6``, ``*/2``, ``mon-fri``.

    Returns:
        ``*`` or a comma-separated list of day names, Monday first.

    Raises:
        ValueError: the field is not a valid day-of-week field.
    """
    days = cron_weekdays(field)
    if len(days) == 7:
        return "*"
    order = [1, 2, 3, 4, 5, 6, 0]
    return ",".join(DAY_ABBREVIATIONS[d] for d in order if d in days)


def parse_crontab(expr: str, timezone: str = "") -> CronTrigger:
    """A trigger for a classic crontab expression.

    Args:
        expr: ``minute hour day-of-month month day-of-week``.
        timezone: IANA zone name; empty for the local zone.

    Raises:
        InvalidInputError: a one-line explanation of what is wrong.
    """
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidInputError(
            f"invalid cron expression {expr!r}: {len(fields)} field(s), expected {CRON_HELP}"
        )
    try:
        fields[4] = crontab_weekdays(fields[4])
        trigger = CronTrigger.from_crontab(" ".join(fields), timezone=timezone or None)
    except (ValueError, LookupError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "it cannot be read"
        raise InvalidInputError(
            f"invalid cron expression {expr!r}: {reason}; expected {CRON_HELP}"
        ) from None
    now = datetime.now(UTC)
    if trigger.get_next_fire_time(None, now) is None:
        raise InvalidInputError(f"cron expression {expr!r} never fires (no such date)")
    return trigger


def check_timezone(name: str) -> None:
    """Refuse a time zone name APScheduler cannot use.

    Raises:
        InvalidInputError: the zone is unknown.
    """
    if not name:
        return
    try:
        CronTrigger(hour="0", timezone=name)
    except (ValueError, LookupError):
        raise InvalidInputError(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Paris or UTC"
        ) from None


def trigger_for(schedule: Schedule) -> CronTrigger | IntervalTrigger:
    """The APScheduler trigger of a schedule (an interval counts from its creation)."""
    if schedule.cron is not None:
        return parse_crontab(schedule.cron, schedule.timezone)
    every = _interval(schedule)
    start = datetime.fromtimestamp(schedule.created_at + every, tz=UTC)
    return IntervalTrigger(seconds=every, start_date=start, timezone=UTC)


def _interval(schedule: Schedule) -> float:
    if schedule.every_s is None or schedule.every_s <= 0:
        raise InvalidInputError(
            f"schedule {schedule.id} has neither a cron expression nor an interval"
        )
    return schedule.every_s


def _cron_next(trigger: CronTrigger, after: float | None, created_at: float) -> float | None:
    tz: tzinfo = trigger.timezone
    if after is None:
        nxt = trigger.get_next_fire_time(None, datetime.fromtimestamp(created_at, tz=tz))
    else:
        prev = datetime.fromtimestamp(after, tz=tz)
        nxt = trigger.get_next_fire_time(prev, prev)
    return nxt.timestamp() if nxt is not None else None


def next_due(schedule: Schedule) -> float | None:
    """The first firing not handled yet (may lie in the past), or None if there is none."""
    if schedule.cron is not None:
        return _cron_next(
            parse_crontab(schedule.cron, schedule.timezone),
            schedule.last_fire_at,
            schedule.created_at,
        )
    every = _interval(schedule)
    if schedule.last_fire_at is None:
        return schedule.created_at + every
    return schedule.last_fire_at + every


def due_firings(schedule: Schedule, now: float) -> tuple[int, float | None]:
    """How many firings are due at ``now``, and the latest of them.

    A firing handles all of them at once (they are coalesced into one run): the latest
    becomes the schedule's ``last_fire_at``.

    Returns:
        ``(0, None)`` when nothing is due yet.
    """
    first = next_due(schedule)
    if first is None or first > now:
        return 0, None
    if schedule.cron is None:
        every = _interval(schedule)
        extra = math.floor((now - first) / every)
        return extra + 1, first + extra * every
    trigger = parse_crontab(schedule.cron, schedule.timezone)
    count, latest = 1, first
    while count < MAX_CATCH_UP:
        nxt = _cron_next(trigger, latest, schedule.created_at)
        if nxt is None or nxt > now:
            return count, latest
        count, latest = count + 1, nxt
    return count, now
