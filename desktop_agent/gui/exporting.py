"""Export a run and import a bundle, in the app: the dialogs, and the work off the GUI thread.

*File ▸ Export run…* writes the selected run as a web page, Markdown or a bundle
(:func:`desktop_agent.client.export.export_to`); *File ▸ Import run…* brings a bundle in as
a read-only archived run (:func:`desktop_agent.client.export.import_bundle`). Both run on
the task pool and report in the status bar, or say why they could not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.client.api import Client
from desktop_agent.client.export import Imported
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import Run
from desktop_agent.gui.dialogs.export import ExportDialog, choose_bundle
from desktop_agent.gui.tasks import TaskRunner


class Exporting(QObject):
    """The window's export and import.

    Args:
        client: the app's client.
        tasks: the task runner.
        window: the main window (its status bar tells what was done).
        selected: the run selected now (None: none).
        show_error: how the window tells a failure.
    """

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        window: QMainWindow,
        selected: Callable[[], Run | None],
        show_error: Callable[[str], None],
    ) -> None:
        super().__init__(window)
        self.client, self.tasks, self.window = client, tasks, window
        self.selected, self.show_error = selected, show_error
        self.dialog: ExportDialog | None = None

    @Slot()
    def ask_export(self) -> None:
        """The export dialog for the selected run (nothing without one)."""
        run = self.selected()
        if run is None:
            return
        dialog = ExportDialog(run, Path.home(), self.window)
        self.dialog = dialog
        dialog.accepted.connect(lambda: self.export_run(dialog.run.id, *dialog.choice()))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def export_run(self, run_id: str, path: Path, fmt: str) -> None:
        """Write the run as ``fmt`` (html, md or bundle) to ``path``, off the GUI thread."""
        client = self.client

        def write() -> tuple[int, str]:
            from desktop_agent.client.export import export_to

            _run, size, note = export_to(client, run_id, fmt, path)
            return size, note

        def written(result: tuple[int, str]) -> None:
            size, note = result
            tail = f"; {note}" if note else ""
            self.window.statusBar().showMessage(
                f"Exported to {path} ({size:,} bytes){tail}", 10_000
            )

        def failed(exc: Exception) -> None:
            self.show_error(f"Could not export the run: {plain_error(exc)}")

        self.tasks.submit(write, written, failed)

    @Slot()
    def ask_import(self) -> None:
        """Choose a bundle and bring it in."""
        path = choose_bundle(self.window)
        if path is not None:
            self.import_bundle(path)

    def import_bundle(self, path: Path) -> None:
        """Bring the bundle at ``path`` in as a read-only archived run, off the GUI thread."""
        client = self.client

        def bring() -> Imported:
            from desktop_agent.client.export import import_bundle

            return import_bundle(client, path)

        def brought(done: Imported) -> None:
            self.window.statusBar().showMessage(
                f"Imported run {done.run_id}, read-only among the archived runs "
                f"(Search all runs finds it; its files are in {done.files_dir})",
                15_000,
            )

        def failed(exc: Exception) -> None:
            self.show_error(f"Could not import the run: {plain_error(exc)}")

        self.tasks.submit(bring, brought, failed)
