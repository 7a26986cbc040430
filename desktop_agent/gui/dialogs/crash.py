"""Shown at start when the previous session of the app ended abnormally."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.crashlog import PreviousCrash
from desktop_agent.gui import resources
from desktop_agent.gui.sizing import keep_minimum_size


class CrashReportDialog(QDialog):
    """What happened to the previous session, with its crash log when there is one.

    Args:
        crash: what the previous session left behind.
        parent: owner.
    """

    def __init__(self, crash: PreviousCrash, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("desktop-agent ended abnormally")
        self.crash = crash
        picture = QLabel(self)
        picture.setPixmap(resources.icon("status-failed").pixmap(32, 32))
        picture.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.text = QLabel(crash.describe(), self)
        self.text.setWordWrap(True)
        self.text.setMinimumWidth(420)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top = QHBoxLayout()
        top.addWidget(picture)
        top.addWidget(self.text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        self.log_view: QPlainTextEdit | None = None
        if crash.log_path is not None:
            self.log_view = QPlainTextEdit(crash.excerpt, self)
            self.log_view.setReadOnly(True)
            self.log_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
            self.log_view.setMinimumHeight(180)
            layout.addWidget(self.log_view, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.open_folder: QPushButton | None = None
        if crash.log_path is not None:
            self.open_folder = QPushButton("Open logs folder", self)
            buttons.addButton(self.open_folder, QDialogButtonBox.ButtonRole.ActionRole)
            self.open_folder.clicked.connect(self._on_open_folder_clicked)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(720, 420 if self.log_view is not None else 160)
        keep_minimum_size(self)

    @Slot()
    def _on_open_folder_clicked(self) -> None:
        if self.crash.log_path is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.crash.log_path.parent)))
