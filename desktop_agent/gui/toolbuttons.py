"""Toolbar buttons that follow an action without being its widget.

A ``QToolButton`` that shows an action (what ``QToolBar.addAction`` makes, or
``setDefaultAction``) keeps 144 bytes of C heap every time the action changes: its text,
icon, enabled state or tip (PySide6-Essentials 6.11.3; a ``QAction`` in a menu or on no
widget keeps nothing). The main window changes its toolbar's actions at every change of
the pending approvals' count and of the selected run's state, so a window left open for
days grew by megabytes an hour. :class:`ActionButton` copies the action's look onto a
plain button instead (no leak: measured in ``tests/gui/test_toolbar_buttons.py``), and a
click triggers the action, so the action stays the one place its state lives (menus and
shortcuts keep using it directly).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QToolBar, QToolButton, QWidget


class ActionButton(QToolButton):
    """A tool button that mirrors ``action`` (text, icon, tips, enabled, checked, visible).

    Args:
        action: the action shown and triggered.
        parent: the button's parent widget.
    """

    def __init__(self, action: QAction, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.action = action
        self.setAutoRaise(True)
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.clicked.connect(self._on_clicked)
        action.changed.connect(self.sync)
        self.sync()

    def sync(self) -> None:
        """Copy the action's look and state (each setter does nothing when unchanged)."""
        a = self.action
        self.setText(a.iconText().replace("&", "&&"))  # shown as is: no mnemonic
        self.setIcon(a.icon())
        self.setToolTip(a.toolTip())
        self.setStatusTip(a.statusTip())
        self.setEnabled(a.isEnabled())
        self.setCheckable(a.isCheckable())
        self.setChecked(a.isChecked())

    def _on_clicked(self) -> None:
        # A checkable action flips itself when triggered; the button's own flip was
        # undone by sync() through the action's changed signal.
        self.action.trigger()


def add_button(toolbar: QToolBar, action: QAction) -> ActionButton:
    """Put a button for ``action`` on ``toolbar``, styled as the toolbar's own buttons.

    The button hides and shows with the action, and follows the toolbar's button style and
    icon size.
    """
    button = ActionButton(action, toolbar)
    button.setToolButtonStyle(toolbar.toolButtonStyle())
    button.setIconSize(toolbar.iconSize())
    toolbar.toolButtonStyleChanged.connect(button.setToolButtonStyle)
    toolbar.iconSizeChanged.connect(button.setIconSize)
    holder = toolbar.addWidget(button)
    holder.setVisible(action.isVisible())
    action.visibleChanged.connect(lambda: holder.setVisible(action.isVisible()))
    return button


def button_for(toolbar: QToolBar, action: QAction) -> ActionButton | None:
    """The button :func:`add_button` put on ``toolbar`` for ``action``, if any."""
    for button in toolbar.findChildren(ActionButton):
        if button.action is action:
            return button
    return None
