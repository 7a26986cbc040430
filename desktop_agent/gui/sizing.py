"""Window sizing helpers."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def keep_minimum_size(window: QWidget) -> None:
    """Fix a top-level window's minimum size to what its layout needs now.

    Without an explicit minimum, the layout updates the window's size limits whenever a
    label grows or a pane appears, which platforms handle with a round trip each time
    (and the offscreen platform with a warning).
    """
    window.setMinimumSize(window.minimumSizeHint())
