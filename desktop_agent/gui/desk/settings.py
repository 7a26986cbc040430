"""The settings room: the settings dialog, the API key, and View ▸ Palette.

The dialog saves the settings file and the key off the GUI thread (see
:class:`~desktop_agent.gui.dialogs.settings.SettingsDialog`); once saved, the client uses
the new settings, and runs that waited for a key are resumed (a write, off-thread). The
palette applies at once and is saved in the background
(:class:`~desktop_agent.gui.palette.PaletteChooser`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

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
