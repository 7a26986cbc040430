"""The New run dialog's attachments: files dropped on the dialog or chosen with a button.

:class:`AttachmentsField` lists the files (name, tooltip with the full path and size), with
*Attach files…* (a non-modal file chooser) and *Remove*. Files dragged from a file manager
onto any part of the dialog are added; other drags (text onto the goal) are left alone.
The list is emptied when the dialog closes; nothing is read or copied here: the paths go
in the request, and the client copies the files when the run is started (off the GUI
thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, Slot
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.domain import Run
from desktop_agent.domain.models import size_words
from desktop_agent.gui import resources

HINT = "Drop files on this dialog, or attach them: they are copied into the workspace."

_DRAGS = (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop)


def choose_folder(parent: QWidget, target: QLineEdit) -> None:
    """Open a folder chooser (non-modal) whose choice is written into ``target``."""
    dialog = QFileDialog(parent, "Workspace folder", target.text())
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    dialog.fileSelected.connect(target.setText)
    dialog.open()


def local_files(urls: Iterable[object]) -> list[str]:
    """The local files among dropped URLs (folders and remote URLs left out)."""
    out = []
    for url in urls:
        path = url.toLocalFile() if hasattr(url, "toLocalFile") else ""
        if path and os.path.isfile(path):
            out.append(path)
    return out


class AttachmentsField(QWidget):
    """The files to attach, and the drop target of the whole dialog.

    Args:
        dialog: the New run dialog: drops onto it or any of its fields are taken; the list
            is emptied when it closes.
        form: the form the field is added to, as its "Attachments" row.
    """

    def __init__(self, dialog: QDialog, form: QFormLayout) -> None:
        super().__init__(dialog)
        self.list = QListWidget(self)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setMaximumHeight(self.fontMetrics().height() * 5)
        self.list.setAccessibleName("Attached files")
        self.list.itemSelectionChanged.connect(self._on_list_item_selection_changed)
        self.hint = QLabel(HINT, self)
        self.hint.setWordWrap(True)
        self.hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.attach = QPushButton(resources.icon("folder"), "Attach files…", self)
        self.attach.clicked.connect(self._on_attach_clicked)
        self.remove = QPushButton(resources.icon("remove"), "Remove", self)
        self.remove.setToolTip("Leave the selected files out")
        self.remove.clicked.connect(self._on_remove_clicked)
        self._dragged: tuple[tuple[str, ...], list[str]] = ((), [])
        """The URLs of the drag under way, and the local files among them."""
        self.chooser: QFileDialog | None = None
        """The file chooser, while open."""
        buttons = QVBoxLayout()
        buttons.addWidget(self.attach)
        buttons.addWidget(self.remove)
        buttons.addStretch(1)
        left = QVBoxLayout()
        left.setContentsMargins(0, 0, 0, 0)
        left.addWidget(self.list)
        left.addWidget(self.hint)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addLayout(left, 1)
        row.addLayout(buttons)
        dialog.setAcceptDrops(True)
        dialog.installEventFilter(self)
        for child in dialog.findChildren(QWidget):
            if child.acceptDrops():  # the goal's and the workspace's editors
                child.installEventFilter(self)
        dialog.finished.connect(self._on_dialog_finished)
        form.addRow("Attachments", self)
        self._refresh()

    def paths(self) -> tuple[str, ...]:
        """The files listed, in order."""
        return tuple(
            str(self.list.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.list.count())
        )

    def add(self, paths: Sequence[str]) -> None:
        """List ``paths`` (each once)."""
        listed = set(self.paths())
        for path in paths:
            full = str(Path(path).absolute())
            if full in listed:
                continue
            listed.add(full)
            try:
                size = f" · {size_words(os.path.getsize(full))}"
            except OSError:
                size = ""
            item = QListWidgetItem(f"{Path(full).name}{size}")
            item.setData(Qt.ItemDataRole.UserRole, full)
            item.setToolTip(f"{full}{size}")
            self.list.addItem(item)
        self._refresh()

    def keep(self, run: Run) -> None:
        """List ``run``'s attachments ("Run again": kept where they are in its workspace)."""
        self.clear()
        self.add([str(Path(run.workspace) / a.path) for a in run.spec.attachments])

    def clear(self) -> None:
        """List nothing."""
        self.list.clear()
        self._refresh()

    def _refresh(self) -> None:
        has = self.list.count() > 0
        self.list.setVisible(has)
        self.hint.setVisible(not has)
        self.remove.setEnabled(bool(self.list.selectedItems()))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Take drags of local files onto the dialog; leave every other event alone."""
        if event.type() not in _DRAGS:
            return False
        assert isinstance(event, QDragEnterEvent | QDragMoveEvent | QDropEvent)
        mime = event.mimeData()
        urls = tuple(u.toString() for u in mime.urls()) if mime is not None else ()
        if urls != self._dragged[0]:  # looked at once per drag, not at every mouse move
            self._dragged = (urls, local_files(mime.urls()) if urls else [])
        files = self._dragged[1]
        if not files:
            return False
        event.setDropAction(Qt.DropAction.CopyAction)
        event.accept()
        if event.type() == QEvent.Type.Drop:
            self.add(files)
        return True

    @Slot()
    def _on_attach_clicked(self) -> None:
        chooser = QFileDialog(self.window(), "Attach files")
        chooser.setFileMode(QFileDialog.FileMode.ExistingFiles)
        chooser.filesSelected.connect(self._on_chooser_files_selected)
        chooser.finished.connect(self._on_chooser_finished)
        self.chooser = chooser
        chooser.open()

    @Slot(list)
    def _on_chooser_files_selected(self, files: list[str]) -> None:
        self.add(files)

    @Slot()
    def _on_chooser_finished(self) -> None:
        if self.chooser is not None:
            self.chooser.deleteLater()
        self.chooser = None

    @Slot()
    def _on_remove_clicked(self) -> None:
        for item in self.list.selectedItems():
            self.list.takeItem(self.list.row(item))
        self._refresh()

    @Slot()
    def _on_list_item_selection_changed(self) -> None:
        self._refresh()

    @Slot()
    def _on_dialog_finished(self) -> None:
        self.clear()
