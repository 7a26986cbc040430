"""A note in the status bar: an icon and a line of text (links allowed), hidden while empty.

The scheduling views show stuck runs and the low-disk warning with it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from desktop_agent.gui import resources


class StatusNote(QWidget):
    """An icon and a line of text for the status bar, hidden while empty.

    Args:
        icon: icon name.
        parent: owner.

    Signals:
        link_activated: a link in the text was clicked (its target).
    """

    link_activated = Signal(str)

    def __init__(self, icon: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.icon = QLabel(self)
        self.icon.setPixmap(resources.icon(icon).pixmap(14, 14))
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.linkActivated.connect(self.link_activated)
        self.label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 8, 0)
        layout.setSpacing(4)
        layout.addWidget(self.icon)
        layout.addWidget(self.label)
        self._html = ""
        self.hide()

    def show_text(self, html: str, tooltip: str = "") -> None:
        """Show ``html`` (empty: hide); ``{link}`` in it is the palette's link color."""
        self._html = html
        link = self.palette().color(QPalette.ColorRole.Link).name()
        self.label.setText(html.replace("{link}", link))
        self.setToolTip(tooltip)
        self.setVisible(bool(html))

    def changeEvent(self, event: QEvent) -> None:
        """Links take the new palette's color."""
        if event.type() == QEvent.Type.PaletteChange and self._html:
            self.show_text(self._html, self.toolTip())
        super().changeEvent(event)

    def text(self) -> str:
        """The text shown, without markup."""
        return self.label.text() if self.isVisible() else ""
