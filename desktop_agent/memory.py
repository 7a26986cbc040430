"""Give the C heap's free pages back to the system: for processes that live for weeks.

glibc's ``malloc`` keeps memory that was freed inside its heaps (one per thread that
allocated) for reuse, and returns to the system only what lies at the top of the main
heap. In a process that runs for days with threads that come and go (a task pool, SQLite,
Qt), the free memory left between live blocks grows, and the resident size grows with it
though nothing leaks: the desktop app's soak saw its heap in use stay flat while the free
part grew by about 4 MB an hour. ``malloc_trim(0)`` returns every whole free page of every
heap (``madvise``), in about a millisecond; the app calls it every few minutes
(``gui/mainwindow.py``). Elsewhere than glibc (macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable

TRIM_EVERY_S = 300
"""How often a long-lived process gives its free heap pages back."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system; whether any memory was released."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
