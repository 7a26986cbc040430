"""Light, dark or the system's palette: applied at start and from View ▸ Palette.

The choice is the ``palette`` setting. Light and dark use the Fusion style, whose drawing
follows the palette everywhere (a native style may keep its own colors). The system choice
gives the desktop its say back: the style the app started with and the platform's palette,
which also follows the desktop when it switches between light and dark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QPalette
from PySide6.QtWidgets import QApplication

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.config import PALETTES, Settings
from desktop_agent.gui import theme

log = logging.getLogger(__name__)

LABELS = {"system": "System", "light": "Light", "dark": "Dark"}

Submit = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[Exception], None]], None]

_platform_style: str | None = None
"""The style the app had before any palette was chosen (the system choice returns to it)."""


def apply_palette(choice: str) -> None:
    """Give the application the palette ``choice`` (``system``, ``light`` or ``dark``).

    Widgets get a palette-change event, on which the window re-tints its icons.
    """
    global _platform_style
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    if _platform_style is None:
        _platform_style = app.style().name()
    style = "fusion" if choice in ("light", "dark") else _platform_style
    if app.style().name().lower() != style.lower():
        app.setStyle(style)
    if choice == "dark":
        app.setPalette(theme.dark_palette())
    elif choice == "light":
        app.setPalette(theme.light_palette())
    else:  # an empty palette sets nothing: the platform's colors, and its later changes
        app.setPalette(QPalette())


class PaletteChooser(QObject):
    """The exclusive View ▸ Palette actions: apply the choice at once, then save it.

    Args:
        actions: the System, Light and Dark actions, by choice.
        client: the client (its settings are replaced once the file is saved).
        submit: runs a function off the GUI thread (``TaskRunner.submit``).
        parent: owner.

    Signals:
        saved: the choice is applied and saved (a status message).
        failed: the choice is applied, but saving it failed (a message to show).
    """

    saved = Signal(str)
    failed = Signal(str)

    def __init__(
        self, actions: dict[str, QAction], client: Client, submit: Submit, parent: QObject
    ) -> None:
        super().__init__(parent)
        self.actions = actions
        self.client = client
        self._submit = submit
        self._group = QActionGroup(self)
        self._group.setExclusive(True)
        for choice in PALETTES:
            action = actions[choice]
            action.setCheckable(True)
            action.setData(choice)
            self._group.addAction(action)
        self.show_choice(client.settings.palette)
        self._group.triggered.connect(self._on_group_triggered)

    def show_choice(self, choice: str) -> None:
        """Check the action of ``choice`` (without applying or saving anything)."""
        self.actions.get(choice, self.actions["system"]).setChecked(True)

    @Slot(QAction)
    def _on_group_triggered(self, action: QAction) -> None:
        self.choose(str(action.data()))

    def choose(self, choice: str) -> None:
        """Apply ``choice`` now and save it in the settings in the background."""
        apply_palette(choice)
        self.show_choice(choice)
        new = self.client.settings.model_copy(update={"palette": choice})
        path = Path(self.client.db_path)

        def save() -> Settings:
            new.save(path)
            return new

        self._submit(save, self._on_saved, self._on_save_failed)

    def _on_saved(self, settings: Settings) -> None:
        self.client.settings = settings
        self.saved.emit(f"Palette: {LABELS[settings.palette]} (saved)")

    def _on_save_failed(self, exc: Exception) -> None:
        log.warning("could not save the palette setting: %s", exc)
        was = LABELS.get(self.client.settings.palette, "System")
        self.failed.emit(
            f"The palette changed, but it could not be saved ({_why(exc)}); "
            f"the next start uses {was}."
        )


def _why(exc: Exception) -> str:
    """Why saving failed, in words ("permission denied: /path"), not an errno."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror.lower()}{where}"
    return plain_error(exc)
