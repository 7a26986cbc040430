"""What an approved write would change: the file on disk against the proposed content.

An approval of ``write_file`` replaces a whole file; the analyst must see what is lost, not
only what is written. The file is read off the GUI thread (:func:`read_target`, a plain
function for the task pool) and capped, so a big file never freezes the window; the diff
itself is capped too and says where it was cut.
"""

from __future__ import annotations

import difflib
import html
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtGui import QPalette

from desktop_agent.domain import JSON, RunStatus
from desktop_agent.gui import theme

WRITE_TOOLS = frozenset({"write_file"})
"""Tools whose call replaces a whole file: ``path`` relative to the workspace, ``content``."""

READ_LIMIT = 512 * 1024
"""Bytes of the file on disk read for the diff; a bigger file is not diffed."""

DIFF_LINE_LIMIT = 400
"""Lines of diff shown; the rest is cut (and the view says so)."""


@dataclass(frozen=True)
class DiskFile:
    """The file an approved write would replace, as read from disk.

    Attributes:
        path: the path the call names (relative to the workspace).
        text: its content, or None when there is no such file (or it cannot be shown).
        problem: why the content cannot be shown (too big, not text, outside), or None.
    """

    path: str
    text: str | None
    problem: str | None = None


def written_file(tool: str, arguments: JSON) -> tuple[str, str] | None:
    """``(path, content)`` when a call of ``tool`` with ``arguments`` replaces a file."""
    if tool not in WRITE_TOOLS or not isinstance(arguments, Mapping):
        return None
    path, content = arguments.get("path"), arguments.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return None
    return path, content


def read_target(workspace: Path, rel: str, limit: int = READ_LIMIT) -> DiskFile:
    """Read ``rel`` in ``workspace`` for the diff (blocking: call it on the task pool).

    Only reads, and only inside the workspace: a path that leads outside is not shown (the
    tool's own check refuses it too).
    """
    root = Path(os.path.realpath(workspace))
    slashed = rel.replace("\\", "/").strip()
    if not slashed or Path(slashed).is_absolute() or slashed.startswith("~"):
        return DiskFile(rel, None, "the path is not relative to the workspace")
    real = Path(os.path.realpath(root / slashed))
    if not real.is_relative_to(root):
        return DiskFile(rel, None, "the path leads outside the workspace")
    try:
        if not real.exists():
            return DiskFile(rel, None)
        if not real.is_file():
            return DiskFile(rel, None, "it is a folder, not a file")
        size = real.stat().st_size
        if size > limit:
            return DiskFile(rel, None, f"the file is too big to compare ({size:,} bytes)")
        data = real.read_bytes()
    except OSError as exc:
        return DiskFile(rel, None, f"it cannot be read ({exc.strerror or 'unknown error'})")
    try:
        return DiskFile(rel, data.decode("utf-8"))
    except UnicodeDecodeError:
        return DiskFile(rel, None, "it is not UTF-8 text")


def file_diff_lines(
    disk: DiskFile, proposed: str, limit: int = DIFF_LINE_LIMIT
) -> tuple[list[str], bool]:
    """The unified diff of the file on disk against ``proposed``, and whether it was cut."""
    before = (disk.text or "").splitlines()
    after = proposed.splitlines()
    lines: list[str] = []
    diff = difflib.unified_diff(
        before, after, f"{disk.path} (on disk)", f"{disk.path} (proposed)", lineterm=""
    )
    for line in diff:
        if len(lines) == limit:
            return lines, True
        lines.append(line)
    return lines, False


def file_diff_html(disk: DiskFile, proposed: str, palette: QPalette) -> str:
    """What writing ``proposed`` does to the file, as HTML coloured for ``palette``."""
    name = html.escape(disk.path)
    size = f"{len(proposed.encode()):,} bytes"
    if disk.problem is not None:
        return (
            f"<p><b>{name}</b>: the file on disk cannot be compared: "
            f"{html.escape(disk.problem)}. Approving replaces it with {size}.</p>"
        )
    if disk.text is None:
        head = f"<p><b>{name}</b> — new file: approving creates it ({size}).</p>"
        return head + lines_html([f"+{line}" for line in proposed.splitlines()], palette)
    if disk.text == proposed:
        return f"<p><b>{name}</b>: the file on disk already has this content.</p>"
    lines, cut = file_diff_lines(disk, proposed)
    head = f"<p><b>{name}</b> — overwrites the file on disk; lines it removes and adds:</p>"
    tail = f"<p><i>The diff is cut after {len(lines)} lines.</i></p>" if cut else ""
    return head + lines_html(lines, palette) + tail


def lines_html(lines: list[str], palette: QPalette) -> str:
    """Unified-diff ``lines`` as HTML: removed and added lines coloured for ``palette``.

    A run of removed lines followed by as many added ones is read as the same lines
    rewritten: each pair shows the words that changed marked inside the line (struck out
    where removed, underlined where added), so a paragraph edited by one word reads as
    prose, not as two blocks to compare by eye.
    """
    added = theme.status_color(RunStatus.COMPLETED, palette).name()
    removed = theme.status_color(RunStatus.FAILED, palette).name()
    head = palette.color(QPalette.ColorRole.Link).name()
    shown = lines[:DIFF_LINE_LIMIT]
    rows = []
    i = 0
    while i < len(shown):
        line = shown[i]
        if line.startswith(("+++", "---", "@@")):
            rows.append(f"<div style='color:{head}; font-weight:bold'>{html.escape(line)}</div>")
            i += 1
            continue
        if line.startswith("-"):
            minus = _run_of(shown, i, "-")
            plus = _run_of(shown, i + len(minus), "+")
            if len(plus) == len(minus):
                for old, new in zip(minus, plus, strict=True):
                    left, right = word_diff(old[1:], new[1:])
                    rows.append(f"<div style='color:{removed}'>-{left}</div>")
                    rows.append(f"<div style='color:{added}'>+{right}</div>")
                i += len(minus) + len(plus)
                continue
            rows += [f"<div style='color:{removed}'>{html.escape(m)}</div>" for m in minus]
            i += len(minus)
            continue
        if line.startswith("+"):
            rows.append(f"<div style='color:{added}'>{html.escape(line)}</div>")
        else:
            rows.append(f"<div>{html.escape(line) or '&nbsp;'}</div>")
        i += 1
    if len(lines) > DIFF_LINE_LIMIT:
        rows.append(f"<div><i>… cut after {DIFF_LINE_LIMIT} lines</i></div>")
    body = "".join(rows)
    return f"<div style='font-family: monospace; white-space: pre-wrap'>{body}</div>"


def _run_of(lines: list[str], start: int, mark: str) -> list[str]:
    """The lines from ``start`` on that begin with ``mark`` (not a file header)."""
    out = []
    for line in lines[start:]:
        if not line.startswith(mark) or line.startswith(("+++", "---")):
            break
        out.append(line)
    return out


def word_diff(old: str, new: str) -> tuple[str, str]:
    """``old`` and ``new`` as HTML with the words that differ marked.

    Removed words are struck out in ``old``, added words bold and underlined in ``new``;
    what the two share is plain. Words keep the spaces that follow them.
    """
    a, b = _words(old), _words(new)
    left: list[str] = []
    right: list[str] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        was, now = html.escape("".join(a[i1:i2])), html.escape("".join(b[j1:j2]))
        if op == "equal":
            left.append(was)
            right.append(now)
            continue
        if was:
            left.append(f"<s>{was}</s>")
        if now:
            right.append(f"<b><u>{now}</u></b>")
    return "".join(left), "".join(right)


def _words(text: str) -> list[str]:
    """``text`` cut into words, each with the spaces after it (joined back, the text)."""
    return re.findall(r"\S+\s*|\s+", text)
