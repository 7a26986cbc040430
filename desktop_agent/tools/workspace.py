"""Confinement of file tools to the run's workspace."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from desktop_agent.engine.ports import ToolInputError


def confine(workspace: Path, rel: str) -> Path:
    """Resolve ``rel`` inside ``workspace``; refuse anything that leads outside.

    Absolute paths, drive letters, ``..`` that climbs out, and symlinks that point outside
    are all refused, whatever their case.

    Raises:
        ToolInputError: the path leaves the workspace.
    """
    if not isinstance(rel, str) or "\x00" in rel:
        raise ToolInputError("path must be a string without NUL characters")
    text = rel.strip() or "."
    if (
        PurePosixPath(text).is_absolute()
        or PureWindowsPath(text).is_absolute()
        or (len(text) > 1 and text[1] == ":")
    ):
        raise ToolInputError(f"{rel!r} is absolute: use a path relative to the workspace")
    if text.startswith("~"):
        raise ToolInputError(f"{rel!r} points outside the workspace")
    root = workspace.resolve()
    candidate = (root / text.replace("\\", "/")).resolve()
    if candidate != root and not candidate.is_relative_to(root):
        raise ToolInputError(f"{rel!r} leads outside the workspace")
    # A symlink anywhere on the way was followed by resolve(); check the real target too.
    real = Path(os.path.realpath(candidate))
    if real != root and not real.is_relative_to(root):
        raise ToolInputError(f"{rel!r} leads outside the workspace through a link")
    return candidate


def relative(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, with forward slashes."""
    return path.resolve().relative_to(workspace.resolve()).as_posix()
