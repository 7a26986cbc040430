"""Free C heap pages go back to the system (glibc): measured in a fresh process.

A process that frees most of what it allocated keeps it resident until ``malloc_trim``;
``release_free_memory`` makes the resident size fall by most of what was freed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from desktop_agent import memory

PROBE = textwrap.dedent(
    """
    import ctypes, json
    from desktop_agent.memory import release_free_memory

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    blocks = [libc.malloc(4000) for _ in range(40_000)]  # 160 MB in the main heap
    for i, block in enumerate(blocks):
        ctypes.memset(block, 1, 4000)  # resident
    for i, block in enumerate(blocks):
        if i % 100:  # every hundredth stays: the heap cannot shrink from its top
            libc.free(block)
    before = rss()
    released = release_free_memory()
    print(json.dumps({"before": before, "after": rss(), "released": released}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_pages_go_back_to_the_system() -> None:
    if memory._malloc_trim() is None:
        pytest.skip("not glibc")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    figures = json.loads(out.stdout)
    freed = 40_000 * 0.99 * 4000
    assert figures["released"] is True
    assert figures["before"] - figures["after"] > 0.5 * freed, figures


def test_elsewhere_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert memory.release_free_memory() is False
    finally:
        memory._malloc_trim.cache_clear()
