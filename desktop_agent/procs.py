"""Whether a recorded process is still the one that was recorded (worker liveness)."""

from __future__ import annotations

import psutil


def process_alive(pid: int, started_at: float, tolerance_s: float = 2.0) -> bool:
    """Whether process ``pid`` is alive and is the one started at ``started_at``.

    Comparing start times (within ``tolerance_s``) tells a reused pid from the original
    process; a start time of 0 means unknown, and only the pid is checked.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started_at == 0.0 or abs(proc.create_time() - started_at) < tolerance_s
    except psutil.Error:
        return False
