"""The monthly spend cap as the analyst handles it: what it holds, raising it, resuming.

A run the cap stops waits with a ``budget`` step named ``monthly``; extending the run's own
budget cannot lift it. What lifts it is a higher cap (or none), then a resume of the runs
it held: :func:`report` says what the month spent, the cap and the runs held, and
:func:`set_cap` and :func:`resume_held` do the rest, for the app's *Raise the cap…* dialog
and for ``desktop-agent usage --cap USD|off`` and ``--resume-held``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus, WaitReason
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.usage import MonthSpend

if TYPE_CHECKING:
    from desktop_agent.client.api import Client

MAX_CAP_USD = 1_000_000.0
"""A cap above this is a typing slip, not a limit."""


@dataclass(frozen=True)
class CapReport:
    """This month against the cap, and the runs the cap holds.

    Attributes:
        spent_usd: what runs spent since the start of this calendar month (local time),
            simulated demo dollars left out.
        cap_usd: the cap (None: none is set).
        held: the runs that wait for the cap, oldest first.
    """

    spent_usd: float
    cap_usd: float | None
    held: tuple[Run, ...]


def held_runs(client: Client) -> list[Run]:
    """The runs waiting because the monthly cap was reached, oldest first."""
    waiting = client._store.list_runs([RunStatus.WAITING], limit=100_000)
    budget = [r for r in waiting if r.wait_reason == WaitReason.BUDGET]
    return sorted(
        (r for r in budget if client.waits_for_monthly_cap(r)), key=lambda r: r.created_at
    )


def report(client: Client, now: float | None = None) -> CapReport:
    """What the month spent, the cap (as the settings file says now) and the runs held."""
    cap = Settings.load(client.db_path).monthly_spend_cap_usd
    spent = MonthSpend(client._store.db, lambda: cap).month_spent_usd(
        time.time() if now is None else now
    )
    return CapReport(spent, cap, tuple(held_runs(client)))


def parse_cap(text: str) -> float | None:
    """``"off"`` (or ``"none"``) is no cap; else dollars, such as ``50`` or ``$12.50``."""
    value = text.strip().lower()
    if value in ("off", "none"):
        return None
    try:
        usd = float(value.removeprefix("$").replace(",", ""))
    except ValueError:
        raise InvalidInputError(
            f"the cap must be an amount in dollars (such as 50 or 12.50) or 'off', not {text!r}"
        ) from None
    return check_cap(usd)


def check_cap(usd: float | None) -> float | None:
    """``usd`` if it is a usable cap (None: no cap); else a clear error."""
    if usd is None:
        return None
    if not math.isfinite(usd) or usd <= 0:
        raise InvalidInputError("the cap must be a positive amount of dollars, or off")
    if usd > MAX_CAP_USD:
        raise InvalidInputError(f"a cap above ${MAX_CAP_USD:,.0f} a month is not a limit")
    return round(usd, 2)


def set_cap(client: Client, usd: float | None) -> Settings:
    """Set the monthly cap (None: no cap) in the settings file; workers read it at once."""
    cap = check_cap(usd)
    settings = Settings.load(client.db_path)
    settings.monthly_spend_cap_usd = cap
    settings.save(client.db_path)
    client.settings = settings
    return settings


def resume_held(client: Client) -> list[Run]:
    """Resume every run the cap holds (each goes on if the cap leaves room, else waits)."""
    runs = held_runs(client)
    for run in runs:
        client.resume(run.id)
    return runs
