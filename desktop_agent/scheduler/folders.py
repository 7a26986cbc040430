"""Listing a folder the way batches and folder watches see it."""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import time
from pathlib import Path

from desktop_agent.domain.scheduling import FileKey

log = logging.getLogger(__name__)


def folder_files(
    folder: Path, pattern: str = "*", *, settle_s: float = 0.0, by_time: bool = False
) -> list[FileKey]:
    """Regular, visible files directly in ``folder`` whose names match ``pattern``.

    Args:
        folder: the folder (not searched recursively; symlinks are skipped).
        pattern: a glob on the file name.
        settle_s: leave out files modified less than this many seconds ago (real time:
            file times are real); they may still be being written, a later scan sees them.
        by_time: oldest first instead of by name.

    Returns:
        The files; an empty list when the folder cannot be read (logged).
    """
    real_now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        log.warning("cannot list %s: %s", folder, exc.strerror)
        return []
    keys = []
    for entry in entries:
        if entry.name.startswith(".") or not fnmatch.fnmatch(entry.name, pattern):
            continue
        with contextlib.suppress(OSError):  # gone meanwhile
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if real_now - st.st_mtime < settle_s:
                continue
            keys.append(FileKey(str(Path(folder, entry.name)), st.st_size, st.st_mtime_ns))
    if by_time:
        return sorted(keys, key=lambda k: (k.mtime_ns, k.path))
    return sorted(keys, key=lambda k: k.path)
