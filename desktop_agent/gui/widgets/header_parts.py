"""The run header's small widgets: a budget gauge, and the banner of a run that waits."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from desktop_agent.domain import RunStatus
from desktop_agent.gui import resources, theme
from desktop_agent.gui.widgets.elided import ElidedLabel, fit_value


class Gauge(QWidget):
    """A labelled bar: how much of a budget is used.

    Args:
        label: what is measured (``Cost``).
        parent: owner.
        note_line: keep a line under the bar for a note in small print (see
            :meth:`set_value`).
    """

    def __init__(self, label: str, parent: QWidget | None = None, note_line: bool = False) -> None:
        super().__init__(parent)
        self.label = label
        self.value_text = "—"
        self.fraction: float | None = None
        self.note = ""
        self.note_line = note_line
        self.explanation = ""
        """What the gauge counts, said first in its tooltip."""
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_value(self, text: str, fraction: float | None, note: str = "") -> None:
        """Show ``text``; ``fraction`` of the limit used (None: no limit); ``note`` below."""
        if (text, fraction, note) != (self.value_text, self.fraction, self.note):
            self.value_text, self.fraction, self.note = text, fraction, note
            tip = f"{self.label}: {text}" + (f" · {note}" if note else "")
            self.setToolTip(f"{self.explanation}\n{tip}" if self.explanation else tip)
            self.update()

    def _note_font(self) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 0.85)
        return font

    def _height(self) -> int:
        height = QFontMetrics(self.font()).height() + 14
        if self.note_line:
            height += QFontMetrics(self._note_font()).height() + 2
        return height

    def sizeHint(self) -> QSize:
        """Two lines of text and a bar."""
        fm = QFontMetrics(self.font())
        return QSize(fm.horizontalAdvance("Tokens  12.3k of 100.0k") + 8, self._height())

    def minimumSizeHint(self) -> QSize:
        """Narrow but readable."""
        fm = QFontMetrics(self.font())
        return QSize(fm.horizontalAdvance("Tokens 12.3k") + 8, self._height())

    def paintEvent(self, event: QPaintEvent) -> None:
        """Label and value on one line, the bar below."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        fm = QFontMetrics(self.font())
        w = self.width()
        text_rect = QRectF(0, 0, w, fm.height())
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        painter.setPen(muted)
        painter.drawText(
            text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.label
        )
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        label_w = fm.horizontalAdvance(self.label) + 8
        value = fit_value(fm, self.value_text, max(0, w - label_w))
        painter.drawText(
            text_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, value
        )
        bar = QRectF(0, fm.height() + 5, w, 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(pal.color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(bar, 3, 3)
        if self.fraction is not None:
            f = max(0.0, min(1.0, self.fraction))
            if f >= 0.9:
                color = theme.status_color(RunStatus.FAILED, pal)
            elif f >= 0.7:
                color = theme.warning_color(pal)
            else:
                color = pal.color(QPalette.ColorRole.Highlight)
            painter.setBrush(color)
            painter.drawRoundedRect(QRectF(bar.left(), bar.top(), bar.width() * f, 6), 3, 3)
        if self.note_line and self.note:
            font = self._note_font()
            painter.setFont(font)
            painter.setPen(muted)
            note_fm = QFontMetrics(font)
            note_rect = QRectF(0, bar.bottom() + 2, w, note_fm.height())
            note = note_fm.elidedText(self.note, Qt.TextElideMode.ElideRight, w)
            painter.drawText(
                note_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, note
            )
        painter.end()


class WaitBanner(QFrame):
    """A line across the header: the run waits for the analyst, and the button to act.

    Never a dialog of its own: the analyst opens one with the button when they choose to.

    Args:
        parent: owner.

    Signals:
        activated: the button was pressed.
    """

    activated = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("waitBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.icon = QLabel(self)
        self.icon.setPixmap(resources.icon("status-waiting").pixmap(QSize(18, 18)))
        self.text = ElidedLabel(self)
        self.button = QPushButton(self)
        self.button.clicked.connect(self.activated)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 3, 4, 3)
        row.addWidget(self.icon)
        row.addWidget(self.text, 1)
        row.addWidget(self.button)
        self.refresh_colors()
        self.hide()

    def show_wait(self, text: str, button: str, icon: str) -> None:
        """Say what the run waits for; ``button`` names what the analyst can do."""
        self.text.set_full_text(text)
        self.button.setText(button)
        self.button.setIcon(resources.icon(icon))
        self.show()

    def refresh_colors(self) -> None:
        """A warning tint over the window's colour, readable in light and dark palettes."""
        owner = self.parentWidget()
        pal = QPalette(owner.palette() if owner is not None else self.palette())
        base = pal.color(QPalette.ColorRole.Window)
        tint = theme.warning_color(pal)
        mixed = base.toRgb()
        mixed.setRgbF(
            base.redF() * 0.8 + tint.redF() * 0.2,
            base.greenF() * 0.8 + tint.greenF() * 0.2,
            base.blueF() * 0.8 + tint.blueF() * 0.2,
        )
        pal.setColor(QPalette.ColorRole.Window, mixed)
        self.setPalette(pal)
