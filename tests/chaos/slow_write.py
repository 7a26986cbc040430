"""A test-only plugin for worker children: ``write_file`` that stalls at a chosen point.

Loaded through ``DESKTOP_AGENT_TEST_TOOLS=tests.chaos.slow_write:tools``. The tool is the
built-in :class:`~desktop_agent.tools.files.WriteFile` (same name, same version, same
code); only the first write whose content contains the text in :data:`CONTENT_ENV`
stalls, leaving a flag file with the process id in the folder named by :data:`FLAGS_ENV`:

- ``half`` (:data:`STALL_ENV`, the default): half-way through writing the temporary file.
  Only the file object that :func:`desktop_agent.tools.files._atomic_write` writes through
  is slowed down: it writes half the content, flushes it to disk, leaves ``half`` and
  stalls, so that the test can SIGKILL the process in the middle of the write.
- ``start``: when the tool is called, before it touches the file. It leaves ``stalled``
  and waits until the test creates ``go``.

Any later write (another worker repeating the step) runs at full speed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from desktop_agent.engine.ports import Tool, ToolContext, ToolResult
from desktop_agent.tools import files
from desktop_agent.tools.files import WriteArgs, WriteFile

CONTENT_ENV = "CHAOS_SLOW_WRITE"
"""Text in the content of the write that stalls (the first one only)."""

STALL_ENV = "CHAOS_STALL_AT"
"""Where the chosen write stalls: ``half`` (default) or ``start``."""

FLAGS_ENV = "CHAOS_FLAGS"
"""Folder for the flag files (``claimed``: a stalling write began; ``half``: half written)."""

STALL_S = 30.0
"""How long the stalled write waits to be killed before it finishes anyway."""

_slow = threading.local()


class _StallingFile:
    """A text file whose ``write`` stops half-way (see the module docstring)."""

    def __init__(self, inner: Any, flags: Path) -> None:
        self._inner = inner
        self._flags = flags

    def __enter__(self) -> _StallingFile:
        self._inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)

    def write(self, text: str) -> int:
        half = len(text) // 2
        self._inner.write(text[:half])
        self._inner.flush()
        os.fsync(self._inner.fileno())
        (self._flags / "half").write_text(str(os.getpid()), encoding="utf-8")
        deadline = time.monotonic() + STALL_S
        while time.monotonic() < deadline:  # the test kills the process in here
            time.sleep(0.01)
        return int(self._inner.write(text[half:])) + half

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _OsWithStallingFiles:
    """The ``os`` module as :mod:`desktop_agent.tools.files` sees it, with a slow fdopen."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fdopen(self, fd: int, *args: Any, **kwargs: Any) -> Any:
        f = os.fdopen(fd, *args, **kwargs)
        flags = getattr(_slow, "flags", None)
        return f if flags is None else _StallingFile(f, flags)


class StallingWriteFile(WriteFile):
    """``write_file`` whose first write of chosen content stalls half-way."""

    def call(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        """Write as the built-in does; stall inside the first write of the chosen content."""
        flags = Path(os.environ[FLAGS_ENV])
        wanted = os.environ.get(CONTENT_ENV, "")
        if wanted and wanted in args.content and _claim(flags / "claimed"):
            if os.environ.get(STALL_ENV, "half") == "start":
                _stall_until_go(flags)
            else:
                _slow.flags = flags
        try:
            return super().call(args, ctx)
        finally:
            _slow.flags = None


def _stall_until_go(flags: Path) -> None:
    """Say so, then wait for the test's go (at most :data:`STALL_S`)."""
    (flags / "stalled").write_text(str(os.getpid()), encoding="utf-8")
    deadline = time.monotonic() + STALL_S
    while not (flags / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _claim(path: Path) -> bool:
    """Create ``path`` if nobody did yet; whether this call created it."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def tools() -> list[Tool]:
    """The plugin's tools (and the slow file objects behind them)."""
    files.os = _OsWithStallingFiles()  # type: ignore[attr-defined,assignment]
    return [StallingWriteFile()]
