"""Durable files beside the database: what a rename needs to survive a power loss.

Standard library only, like :mod:`~desktop_agent.persistence.backup`, which must work when
nothing else can open the database.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Flush ``folder``'s entries (a file just created or renamed in it) to disk.

    Best effort: a file system that cannot sync a directory has nothing more to flush.
    """
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
