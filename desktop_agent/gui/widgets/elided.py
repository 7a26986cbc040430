"""Text that fits its room: a label elided to its width and lines, a value cut to fit.

The run header's title and banner and the batch view's item title use :class:`ElidedLabel`;
the header's gauges fit their figures with :func:`fit_value`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """A label of at most ``lines`` lines that ends with "…" when its text does not fit.

    Args:
        parent: owner.
        lines: the most lines it takes (broken between words; the last one elided).
    """

    def __init__(self, parent: QWidget | None = None, *, lines: int = 1) -> None:
        super().__init__(parent)
        self._full = ""
        self.lines = lines
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_full_text(self, text: str) -> None:
        """Show ``text``, elided to the label's width."""
        self._full = text
        self.setToolTip(text)
        self._elide()

    def full_text(self) -> str:
        """The text before eliding."""
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Elide again for the new width."""
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(wrap_elided(QFontMetrics(self.font()), self._full, self.width(), self.lines))


def wrap_elided(fm: QFontMetrics, text: str, width: int, lines: int) -> str:
    """``text`` broken between words into at most ``lines`` lines of ``width``.

    What the last line cannot hold ends in "…".
    """
    words = text.split()
    out: list[str] = []
    while words and len(out) < lines - 1:
        line = words.pop(0)
        while words and fm.horizontalAdvance(f"{line} {words[0]}") <= width:
            line = f"{line} {words.pop(0)}"
        if fm.horizontalAdvance(line) > width:  # one word wider than the line: cut there
            words.insert(0, line)
            break
        out.append(line)
    if words or not out:
        out.append(fm.elidedText(" ".join(words), Qt.TextElideMode.ElideRight, width))
    return "\n".join(out)


def fit_value(fm: QFontMetrics, text: str, width: int) -> str:
    """``text`` in ``width``: shortened where words allow, then cut at its end.

    Never cut at its start: "…02 of $5.00" read as a figure that was not spent.
    """
    for candidate in (text, text.replace(" (simulated)", " sim.")):
        if fm.horizontalAdvance(candidate) <= width:
            return candidate
    return fm.elidedText(text.replace(" (simulated)", " sim."), Qt.TextElideMode.ElideRight, width)
