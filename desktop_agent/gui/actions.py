"""The main window's actions: icons, shortcuts and tooltips in one place."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenuBar, QToolBar, QWidget

from desktop_agent.gui import resources
from desktop_agent.gui.controls import Control
from desktop_agent.gui.toolbuttons import add_button


@dataclass(frozen=True)
class ActionSpec:
    """How an action looks."""

    text: str
    icon: str
    shortcut: str
    tip: str


SPECS: dict[str, ActionSpec] = {
    "new_run": ActionSpec("&New run…", "new-run", "Ctrl+N", "Start a new run"),
    Control.PAUSE: ActionSpec("&Pause", "pause", "Ctrl+P", "Pause at the next step boundary"),
    Control.RESUME: ActionSpec(
        "&Resume", "resume", "Ctrl+R", "Resume a paused run (or wake a waiting one)"
    ),
    Control.RETRY: ActionSpec(
        "Re&try", "retry", "Ctrl+Shift+R", "Retry the failed run from the failed step"
    ),
    Control.CANCEL: ActionSpec(
        "&Cancel run…", "cancel", "Ctrl+Shift+X", "Cancel the run (asks first)"
    ),
    Control.STOP: ActionSpec(
        "&Stop with report…", "stop", "Ctrl+Shift+S", "Stop gracefully and write a partial report"
    ),
    Control.STEER: ActionSpec("S&teer…", "steer", "Ctrl+T", "Send the agent a note"),
    Control.APPROVE: ActionSpec(
        "&Approve…", "approve", "Ctrl+Shift+A", "Show the run's pending call to approve it"
    ),
    Control.EDIT: ActionSpec(
        "&Edit && approve…", "edit", "Ctrl+Shift+E", "Review, edit and approve the pending call"
    ),
    Control.REJECT: ActionSpec(
        "Re&ject…", "reject", "Ctrl+Shift+J", "Reject the pending call with a reason"
    ),
    Control.ANSWER: ActionSpec("A&nswer…", "answer", "Ctrl+Shift+N", "Answer the agent's question"),
    Control.EXTEND_BUDGET: ActionSpec(
        "Extend &budget…", "budget", "Ctrl+B", "Raise the run's limits"
    ),
    Control.RESOLVE: ActionSpec(
        "&Decide…", "resolve", "Ctrl+D", "Decide about a step left in doubt"
    ),
    "inbox": ActionSpec("Approvals &inbox", "inbox", "Ctrl+I", "Pending approvals across runs"),
    "settings": ActionSpec("&Settings…", "settings", "Ctrl+,", "API key, defaults, notifications"),
    "refresh": ActionSpec("Re&fresh", "refresh", "F5", "Read the database again now"),
    "find": ActionSpec("&Find runs", "", "Ctrl+F", "Search the run list"),
    "run_again": ActionSpec(
        "Run a&gain…", "new-run", "Ctrl+G", "Start a new run as the selected one was started"
    ),
    "fork_step": ActionSpec(
        "Fork from this step…", "", "Ctrl+Shift+F", "A new run that shares the steps up to this one"
    ),
    "search_all": ActionSpec(
        "Search &all runs…", "", "Ctrl+K", "Find steps, goals and approvals in every run"
    ),
    "export": ActionSpec(
        "&Export run…", "", "Ctrl+E", "Save the selected run as a web page, Markdown or a bundle"
    ),
    "import": ActionSpec(
        "&Import run…", "", "Ctrl+O", "Bring in a run exported as a bundle elsewhere, read-only"
    ),
    "usage": ActionSpec("&Usage…", "", "Ctrl+U", "What all runs spent, per day, model, schedule"),
    "shortcuts": ActionSpec(
        "&Keyboard shortcuts", "", "F1", "Every key the app answers to, menu by menu"
    ),
    "compare": ActionSpec(
        "&Compare runs", "", "Ctrl+Shift+D", "Compare the two selected runs step by step"
    ),
    "follow": ActionSpec(
        "&Follow newest step", "follow", "Ctrl+End", "Keep the newest step in view"
    ),
    "show": ActionSpec("&Show window", "app", "", "Show the main window"),
    "palette_system": ActionSpec("&System", "", "", "Use the desktop's colors"),
    "palette_light": ActionSpec("&Light", "", "", "Use light colors"),
    "palette_dark": ActionSpec("&Dark", "", "", "Use dark colors"),
    "close": ActionSpec("&Close window", "window-close", "Ctrl+W", "Close the window; runs go on"),
    "quit": ActionSpec(
        "&Quit everything…", "quit", "Ctrl+Q", "Quit the app and stop the worker it started"
    ),
}


RUN_CONTROLS = (
    Control.PAUSE,
    Control.RESUME,
    Control.RETRY,
    Control.CANCEL,
    Control.STOP,
    Control.STEER,
    Control.ANSWER,
    Control.EXTEND_BUDGET,
    Control.RESOLVE,
)
APPROVAL_CONTROLS = (Control.APPROVE, Control.EDIT, Control.REJECT)

TOOLBAR: tuple[str | None, ...] = (
    "new_run",
    None,
    Control.PAUSE,
    Control.RESUME,
    Control.RETRY,
    Control.CANCEL,
    Control.STEER,
    None,
    Control.APPROVE,
    Control.EDIT,
    Control.REJECT,
    None,
    "inbox",
    "settings",
)
MENUS: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    ("&File", ("new_run", "run_again", "export", "import", "settings", None, "close", "quit")),
    ("&Run", RUN_CONTROLS),
    ("&Approvals", (*APPROVAL_CONTROLS, None, "inbox")),
    (
        "&View",
        ("find", "search_all", "follow", "refresh", None, "compare", "usage", None, "palette"),
    ),
    ("&Help", ("shortcuts",)),
)
SUBMENUS: dict[str, tuple[str, tuple[str, ...]]] = {
    "palette": ("&Palette", ("palette_system", "palette_light", "palette_dark")),
}
"""Keys in :data:`MENUS` that open a submenu: its title and actions."""


class Actions:
    """All actions of the main window, by key.

    Args:
        parent: the widget owning the actions (their shortcuts work in its window).
    """

    def __init__(self, parent: QWidget) -> None:
        self.by_key: dict[str, QAction] = {}
        for key, spec in SPECS.items():
            action = QAction(spec.text, parent)
            if spec.shortcut:
                action.setShortcut(QKeySequence(spec.shortcut))
                keys = QKeySequence(spec.shortcut)
                native = keys.toString(QKeySequence.SequenceFormat.NativeText)
                action.setToolTip(f"{spec.tip} ({native})")
            else:
                action.setToolTip(spec.tip)
            action.setStatusTip(spec.tip)
            self.by_key[str(key)] = action
        self.by_key["follow"].setCheckable(True)
        self.by_key["follow"].setChecked(True)
        self.refresh_icons()

    def __getitem__(self, key: str) -> QAction:
        return self.by_key[str(key)]

    def refresh_icons(self) -> None:
        """Re-tint the icons (after the palette changed between light and dark)."""
        for key, spec in SPECS.items():
            if spec.icon:
                self.by_key[str(key)].setIcon(resources.icon(spec.icon))

    def fill_toolbar(self, toolbar: QToolBar) -> None:
        """Put the run controls on ``toolbar`` (as buttons that follow their actions)."""
        for key in TOOLBAR:
            if key is None:
                toolbar.addSeparator()
            else:
                # Out of the Tab walk, as a toolbar's own buttons are: each action has keys.
                add_button(toolbar, self[key]).setFocusPolicy(Qt.FocusPolicy.NoFocus)

    def fill_menus(self, menus: QMenuBar) -> None:
        """Build the menu bar."""
        for title, keys in MENUS:
            menu = menus.addMenu(title)
            for key in keys:
                if key is None:
                    menu.addSeparator()
                elif key in SUBMENUS:
                    sub_title, sub_keys = SUBMENUS[key]
                    sub = menu.addMenu(sub_title)
                    for sub_key in sub_keys:
                        sub.addAction(self[sub_key])
                else:
                    menu.addAction(self[key])
