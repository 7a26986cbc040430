"""The worker's clock, and the seam that moves it away from real time.

``DESKTOP_AGENT_CLOCK_OFFSET`` (seconds, may be negative) moves the worker's clock away
from real time. It exists for tests that kill a worker, let "hours pass" and start another:
a restarted worker with an offset sees the wake-ups, deadlines and schedule firings that
fell due in between. Never set it otherwise.

A module of its own so that the worker reads its clock at start without importing the
scheduler's wiring (:mod:`desktop_agent.worker.scheduling`), which comes a poll later.
"""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger(__name__)

CLOCK_OFFSET_ENV = "DESKTOP_AGENT_CLOCK_OFFSET"
"""Test seam: seconds added to the worker's clock (see the module docstring)."""


class OffsetClock:
    """Real time plus a fixed offset.

    Args:
        offset_s: seconds added to real time.
    """

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def now(self) -> float:
        """Seconds since the epoch, moved by the offset."""
        return time.time() + self.offset_s


def clock_from_env() -> OffsetClock:
    """The worker's clock: real time, moved by ``DESKTOP_AGENT_CLOCK_OFFSET`` if set."""
    raw = os.environ.get(CLOCK_OFFSET_ENV, "").strip()
    try:
        offset = float(raw) if raw else 0.0
    except ValueError:
        log.warning("%s=%r is not a number of seconds; ignored", CLOCK_OFFSET_ENV, raw)
        offset = 0.0
    return OffsetClock(offset)
