"""The main window by keyboard alone: panes, Return, Escape and the list of every key.

* **Tab** walks the controls and never changes the selected run (the app's tables leave
  on Tab instead of walking their cells: see :func:`desktop_agent.gui.tables.list_table`);
  the toolbar's buttons are not in the walk (their actions have shortcuts).
* **F6 / Shift+F6** jump between the panes: the list on the left (runs, approvals or the
  tab shown), the run's steps, the step's details.
* **Return** on a run opens its steps (the keyboard lands in the timeline, on its newest
  step); in the approvals inbox it reviews the selected call; in a search it opens the
  result. **Escape** closes a dialog or a window (search, compare, usage).
* **Help ▸ Keyboard shortcuts** (F1) lists every action of the menus with its keys,
  built from the menus themselves so that the list cannot drift from them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QModelIndex, QObject, Qt, Slot
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QListView,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.gui.actions import MENUS, SPECS, SUBMENUS, Actions

NAVIGATION: tuple[tuple[str, str], ...] = (
    ("Tab, Shift+Tab", "Next or previous control (the selected run stays selected)"),
    ("F6, Shift+F6", "Next or previous pane: the list, the run's steps, the step's details"),
    ("Up, Down, Page Up, Page Down, Home, End", "Move in a list"),
    ("Return", "Open the selected run's steps, approval or search result"),
    ("Ctrl+Return", "In an approval dialog: approve what the form holds"),
    ("Return, Shift+Return", "In Find in this run: next or previous match"),
    ("Down", "In Search all runs: from the words to the results"),
    ("Escape", "Close the dialog or window"),
    ("Menu key, Shift+F10", "The list's or the timeline's context menu"),
)
"""Keys that belong to no menu action, with what they do (shown in the shortcuts list)."""

EXTRA: tuple[tuple[str, tuple[str, ...]], ...] = (("Timeline", ("fork_step",)),)
"""Actions outside the menu bar (context menus), listed under their own heading."""


def plain(text: str) -> str:
    """A menu text without its mnemonic marks and trailing ellipsis (``&Edit && approve…``)."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…")


def mnemonic(text: str) -> str:
    """The letter a menu text underlines (``&View`` gives ``V``), or ""."""
    i = text.replace("&&", "__").find("&")
    return text[i + 1].upper() if 0 <= i < len(text) - 1 else ""


def native(keys: QKeySequence) -> str:
    """``keys`` as this platform writes them."""
    return keys.toString(QKeySequence.SequenceFormat.NativeText)


def shortcut_rows(acts: Actions) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every menu action with its keys, menu by menu: ``[(menu, [(action, keys)])]``.

    An action without a shortcut of its own is reached through its menu's letters (e.g.
    ``Alt+V, P, L`` for View ▸ Palette ▸ Light); that path is what the list gives for it.
    """
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    for title, keys in (*MENUS, *EXTRA):
        rows: list[tuple[str, str]] = []
        path = [f"Alt+{mnemonic(title)}"] if mnemonic(title) else []
        for key in keys:
            if key is None:
                continue
            if key in SUBMENUS:
                sub_title, sub_keys = SUBMENUS[key]
                for sub_key in sub_keys:
                    text = SPECS[sub_key].text
                    own = native(acts[sub_key].shortcut())
                    letters = ", ".join([*path, mnemonic(sub_title), mnemonic(text)])
                    rows.append((f"{plain(sub_title)} ▸ {plain(text)}", own or letters))
                continue
            # The spec's text: the action's own may carry a count ("Approvals (3)").
            rows.append((plain(SPECS[key].text), native(acts[key].shortcut())))
        sections.append((plain(title), rows))
    return sections


def close_on_escape(window: QWidget) -> QShortcut:
    """Make Escape close ``window`` (a top-level widget that is not a dialog)."""
    shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), window)
    shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
    shortcut.activated.connect(window.close)
    return shortcut


class ShortcutsDialog(QDialog):
    """Help ▸ Keyboard shortcuts: the menus' actions with their keys, then the other keys.

    Args:
        acts: the main window's actions.
        parent: the main window.
    """

    def __init__(self, acts: Actions, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Action", "Keys"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(False)
        for title, rows in (*shortcut_rows(acts), ("Moving around", list(NAVIGATION))):
            section = QTreeWidgetItem(self.tree, [title, ""])
            font = section.font(0)
            font.setBold(True)
            section.setFont(0, font)
            section.setFlags(Qt.ItemFlag.ItemIsEnabled)
            for text, keys in rows:
                QTreeWidgetItem(section, [text, keys])
        self.tree.expandAll()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree, 1)
        layout.addWidget(buttons)
        self.resize(660, 720)

    def rows(self) -> list[tuple[str, str]]:
        """Every ``(action, keys)`` row shown, all sections in order."""
        found: list[tuple[str, str]] = []
        for i in range(self.tree.topLevelItemCount()):
            section = self.tree.topLevelItem(i)
            for j in range(section.childCount() if section is not None else 0):
                if section is not None and (row := section.child(j)) is not None:
                    found.append((row.text(0), row.text(1)))
        return found


class Keyboard(QObject):
    """The main window's keys that no single widget owns (see the module's docstring).

    Args:
        window: the main window (its shortcuts work anywhere in it).
        acts: its actions (``shortcuts`` opens the list).
        side: the tabs on the left (runs, approvals, schedules...).
        timeline: the selected run's steps.
        details: the step's details (the inspector).
        runs: the run list's table (Return there opens the run's steps).
    """

    def __init__(
        self,
        window: QWidget,
        acts: Actions,
        side: QTabWidget,
        timeline: QListView,
        details: QTabWidget,
        runs: QAbstractItemView,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.acts = acts
        self.side, self.timeline, self.details = side, timeline, details
        self.dialog: ShortcutsDialog | None = None
        panes: Sequence[Callable[[], QWidget]] = (self._side_pane, self._timeline, self._details)
        self.panes = panes
        for keys, step in (("F6", 1), ("Shift+F6", -1)):
            shortcut = QShortcut(QKeySequence(keys), window)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(self._mover(step))
        runs.activated.connect(self._on_runs_activated)
        acts["shortcuts"].triggered.connect(self.show_shortcuts)

    @Slot()
    def show_shortcuts(self) -> ShortcutsDialog:
        """Open Help ▸ Keyboard shortcuts (one dialog, raised if open)."""
        if self.dialog is None:
            self.dialog = ShortcutsDialog(self.acts, self.window)
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()
        return self.dialog

    def focus_pane(self, step: int) -> QWidget:
        """Move the keyboard ``step`` panes on (1: next, -1: previous); returns the pane."""
        widgets = [pane() for pane in self.panes]
        focus = QApplication.focusWidget()
        at = next(
            (
                i
                for i, w in enumerate(widgets)
                if focus is not None and (focus is w or w.isAncestorOf(focus))
            ),
            -1 if step > 0 else 0,
        )
        target = widgets[(at + step) % len(widgets)]
        target.setFocus(Qt.FocusReason.TabFocusReason)
        return target

    def open_steps(self) -> None:
        """Put the keyboard in the run's steps, on the current step (else the newest)."""
        model = self.timeline.model()
        if model is not None and not self.timeline.currentIndex().isValid():
            rows = model.rowCount()
            if rows:
                self.timeline.setCurrentIndex(model.index(rows - 1, 0))
        self.timeline.setFocus(Qt.FocusReason.OtherFocusReason)

    def _mover(self, step: int) -> Callable[[], None]:
        def move() -> None:
            self.focus_pane(step)

        return move

    def _side_pane(self) -> QWidget:
        """The list on the left: the shown tab's first list, else the tab itself."""
        page = self.side.currentWidget()
        for view in page.findChildren(QAbstractItemView):
            if view.isVisible() and view.focusPolicy() != Qt.FocusPolicy.NoFocus:
                return view
        return page

    def _timeline(self) -> QWidget:
        return self.timeline

    def _details(self) -> QWidget:
        return self.details.currentWidget() or self.details

    @Slot(QModelIndex)
    def _on_runs_activated(self, _index: QModelIndex) -> None:
        self.open_steps()
