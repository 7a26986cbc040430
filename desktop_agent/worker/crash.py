"""Crash points for the crash tests: ``DESKTOP_AGENT_CRASH_AT=point[:n]`` kills the worker.

The process sends itself SIGKILL the ``n``-th time (default 1) it reaches ``point``: no
cleanup, no flush, exactly like a power cut as far as the database is concerned.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

CRASH_ENV = "DESKTOP_AGENT_CRASH_AT"


def crash_hook_from_env() -> Callable[[str], None] | None:
    """The hook configured by the environment, or None."""
    spec = os.environ.get(CRASH_ENV, "").strip()
    if not spec:
        return None
    point, _, count = spec.partition(":")
    target = int(count) if count.isdigit() else 1
    seen = 0
    lock = threading.Lock()

    def hook(name: str) -> None:
        nonlocal seen
        if name != point:
            return
        with lock:
            seen += 1
            if seen == target:
                os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))  # Windows: SIGTERM

    return hook
