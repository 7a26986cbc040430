"""Confinement of file tools to the run's workspace.

Every path the model gives is resolved (symlinks followed, ``..`` collapsed) and must land
inside the workspace. Lexical checks catch absolute, drive-letter, UNC and home paths
before the file system is touched; the real path is then compared with the workspace
both by name and by identity (device and inode), so that a folder spelled with other
case on a case-insensitive file system is recognised for what it is, and a sibling
spelled alike (``ws`` vs ``WS`` on a case-sensitive one) is not mistaken for it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath

from desktop_agent.engine.ports import ToolInputError

MAX_PATH_CHARS = 4096
_DRIVE = re.compile(r"^[A-Za-z]:")


def confine(workspace: Path, rel: str) -> Path:
    """Resolve ``rel`` inside ``workspace``; refuse anything that leads outside.

    Absolute paths, drive letters (either case), UNC paths, ``~``, ``..`` that climbs
    out, and symlinks (of the file or of any parent folder) that point outside are all
    refused.

    Args:
        workspace: the run's workspace folder.
        rel: a path relative to it, as the model wrote it.

    Returns:
        The real path, inside the workspace.

    Raises:
        ToolInputError: the path is malformed or leads outside the workspace.
    """
    if not isinstance(rel, str) or "\x00" in rel:
        raise ToolInputError("path must be a string without NUL characters")
    if len(rel) > MAX_PATH_CHARS:
        raise ToolInputError(f"path is longer than {MAX_PATH_CHARS} characters")
    text = rel.strip() or "."
    slashed = text.replace("\\", "/")
    if (
        PurePosixPath(slashed).is_absolute()
        or PureWindowsPath(text).is_absolute()
        or PureWindowsPath(text).drive
        or _DRIVE.match(text)
    ):
        raise ToolInputError(f"{rel!r} is absolute: use a path relative to the workspace")
    if slashed.startswith("~"):
        raise ToolInputError(f"{rel!r} points outside the workspace")
    root = Path(os.path.realpath(workspace))
    try:
        real = Path(os.path.realpath(root / slashed))
    except (OSError, ValueError) as exc:
        raise ToolInputError(f"{rel!r} cannot be resolved: {exc}") from None
    if ".." in real.parts:  # left by a symlink loop: the kernel will not resolve it either
        raise ToolInputError(f"{rel!r} cannot be resolved (a symlink loop?)")
    inside = _inside(real, root)
    if inside is None:
        raise ToolInputError(f"{rel!r} leads outside the workspace")
    return inside


def _inside(real: Path, root: Path) -> Path | None:
    """``real`` expressed under ``root`` if it lies inside it, else None."""
    if _same_name(real, root) or _norm(real).is_relative_to(_norm(root)):
        return real
    try:
        root_id = _identity(root)
    except OSError:
        return None
    # The name differs but the folder may be the same (case-insensitive file systems):
    # ``real`` has no symlinks left, so an ancestor that *is* the workspace contains it.
    for ancestor in [real, *real.parents]:
        try:
            if _identity(ancestor) == root_id:
                return root / real.relative_to(ancestor)
        except OSError:
            continue
    return None


def _norm(path: Path) -> Path:
    return Path(os.path.normcase(path))


def _same_name(a: Path, b: Path) -> bool:
    return _norm(a) == _norm(b)


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def relative(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, with forward slashes.

    Raises:
        ValueError: ``path`` is not inside the workspace.
    """
    return path.resolve().relative_to(Path(os.path.realpath(workspace))).as_posix()
