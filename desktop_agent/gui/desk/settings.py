"""The settings room: the settings dialog, the API key, and View ▸ Palette.

The dialog saves the settings file and the key off the GUI thread (see
:class:`~desktop_agent.gui.dialogs.settings.SettingsDialog`); once saved, the client uses
the new settings, and runs that waited for a key are resumed (a write, off-thread). The
palette applies at once and is saved in the background
(:class:`~desktop_agent.gui.palette.PaletteChooser`).

A settings file with problems (not JSON, values that do not fit) was kept aside when it
was read (:meth:`desktop_agent.config.Settings.load`); the room says so once the window
is up, with a button to the dialog that writes a valid file.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QMainWindow, QMessageBox

from desktop_agent.config import PALETTES, Settings
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.settings import SettingsDialog
from desktop_agent.gui.palette import PaletteChooser


class SettingsRoom(QObject):
    """Settings, the key and the palette.

    Args:
        window: the main window.
        parent: the main window, as the dialog's parent.

    Attributes:
        palette_chooser: the View ▸ Palette actions.
        settings_dialog: the settings dialog opened last.
        problems_box: the message about a settings file with problems (None: none shown).
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.palette_chooser = PaletteChooser(
            {c: window.acts[f"palette_{c}"] for c in PALETTES},
            window.client,
            window.tasks.submit,
            parent,
        )
        self.settings_dialog: SettingsDialog | None = None
        window.acts["settings"].triggered.connect(self._on_settings_triggered)
        self.palette_chooser.saved.connect(self._on_palette_chooser_saved)
        self.palette_chooser.failed.connect(self._on_palette_chooser_failed)
        self.problems_box: QMessageBox | None = None
        if window.client.settings.problems:
            QTimer.singleShot(0, self.show_problems)

    def show_problems(self) -> QMessageBox:
        """Tell the analyst what was wrong in the settings file, and lead to the dialog."""
        settings = self.window.client.settings
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Settings file with problems",
            "The settings file could not be used as it was: the values below are at "
            "their defaults until you save the settings.",
            QMessageBox.StandardButton.Close,
            self.parent_window,
        )
        box.setDetailedText(settings.problem_report())
        box.setInformativeText(
            "\n".join(settings.problems[:5])
            + ("\n…" if len(settings.problems) > 5 else "")
            + (f"\n\nThe file as it was is kept at {settings.kept_at}." if settings.kept_at else "")
        )
        open_button = box.addButton("Open Settings…", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(open_button)
        open_button.clicked.connect(self._on_open_settings_from_problems)
        self.problems_box = box
        box.open()
        return box

    @Slot()
    def _on_open_settings_from_problems(self) -> None:
        self.open_settings()

    @Slot()
    def _on_settings_triggered(self) -> None:
        self.open_settings()

    def open_settings(self) -> SettingsDialog:
        """Open the settings dialog."""
        w = self.window
        dialog = SettingsDialog(
            w.client.settings,
            Path(w.client.db_path),
            w.new_run_room.offered_models(),
            w.tasks.submit,
            w.keys,
            self.parent_window,
        )
        dialog.show_notice_channel(w.alerts_room.notifier.channel.value)
        dialog.saved.connect(self._on_settings_dialog_saved)
        dialog.key_saved.connect(self._on_settings_dialog_key_saved)
        self.settings_dialog = dialog
        dialog.open()
        return dialog

    @Slot(object)
    def _on_settings_dialog_saved(self, settings: Settings) -> None:
        self.window.client.settings = settings
        self.window.statusBar().showMessage("Settings saved", 5000)

    @Slot(str)
    def _on_settings_dialog_key_saved(self, _where: str) -> None:
        def resumed(n: int) -> None:
            if n:
                message = f"Resuming {n} run(s) that waited for a key"
                self.window.statusBar().showMessage(message, 6000)

        self.window.tasks.submit(self.window.client.resume_runs_waiting_for_key, resumed)

    @Slot(str)
    def _on_palette_chooser_saved(self, message: str) -> None:
        self.window.statusBar().showMessage(message, 5000)

    @Slot(str)
    def _on_palette_chooser_failed(self, message: str) -> None:
        self.window.show_error(message)
