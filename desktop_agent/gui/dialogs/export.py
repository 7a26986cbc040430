"""File > Export run…: pick a format and a file for the selected run; File > Import run….

The dialog only asks; the export itself runs off the GUI thread (the main window hands
:meth:`ExportDialog.choice` to the ``TaskRunner``) and the status bar says where the file
went, or what failed. The file name follows the format chosen until the analyst edits it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.export import SUFFIXES
from desktop_agent.domain import Run

FORMATS = (
    ("html", "Web page (.html): one file a colleague opens in a browser"),
    ("md", "Markdown (.md): for notes"),
    ("bundle", "Bundle (.tar.gz): the run and its files, for desktop-agent import"),
)


class ExportDialog(QDialog):
    """Asks for the format and the file of an export of ``run``.

    Args:
        run: the run to export.
        folder: where the file goes by default.
        parent: the main window.
    """

    def __init__(self, run: Run, folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export run")
        self.run = run
        self.format_box = QComboBox()
        for key, label in FORMATS:
            self.format_box.addItem(label, key)
        self.path_edit = QLineEdit(str(folder / f"{run.id}{SUFFIXES['html']}"))
        self.path_edit.setMinimumWidth(420)
        choose = QPushButton("Choose…")
        choose.clicked.connect(self._on_choose_clicked)
        row = QHBoxLayout()
        row.addWidget(self.path_edit, 1)
        row.addWidget(choose)
        form = QFormLayout()
        name = QLabel(run.title or run.goal)
        name.setTextFormat(Qt.TextFormat.PlainText)  # a goal's markup is shown, not applied
        form.addRow("Run", name)
        form.addRow("Format", self.format_box)
        form.addRow("File", row)
        note = QLabel("Nothing exported carries your API key or anything shaped like a key.")
        note.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.buttons)
        self.format_box.currentIndexChanged.connect(self._on_format_changed)

    def fmt(self) -> str:
        """The format chosen: ``html``, ``md`` or ``bundle``."""
        return str(self.format_box.currentData())

    def set_format(self, fmt: str) -> None:
        """Choose ``fmt`` (the file name's suffix follows)."""
        self.format_box.setCurrentIndex(self.format_box.findData(fmt))

    def path(self) -> Path:
        """The file chosen."""
        return Path(self.path_edit.text().strip()).expanduser()

    def set_path(self, path: Path) -> None:
        """Choose ``path`` as the file."""
        self.path_edit.setText(str(path))

    def choice(self) -> tuple[Path, str]:
        """The file and the format."""
        return self.path(), self.fmt()

    @Slot(int)
    def _on_format_changed(self, _index: int) -> None:
        current = self.path()
        for suffix in SUFFIXES.values():
            if current.name.endswith(suffix):
                stem = current.name.removesuffix(suffix)
                self.set_path(current.with_name(stem + SUFFIXES[self.fmt()]))
                return

    @Slot()
    def _on_choose_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export run to", str(self.path()))
        if path:
            self.set_path(Path(path))


def choose_bundle(parent: QWidget | None) -> Path | None:
    """Ask for a bundle to import (File > Import run…); None when the analyst cancels."""
    path, _ = QFileDialog.getOpenFileName(
        parent, "Import run", str(Path.home()), "Run bundle (*.tar.gz);;All files (*)"
    )
    return Path(path) if path else None
