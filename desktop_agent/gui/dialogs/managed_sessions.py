"""File ▸ Follow a Managed Agents session…: the sessions the API key can read; follow one.

The dialog lists the organization's Managed Agents sessions (newest first: title, status,
model, cost so far, the run that follows it, if any), read on the task runner, never on the
GUI thread. *Follow* queues the run that follows the selected session
(:meth:`desktop_agent.client.managed.ManagedSessions.follow`); a worker then shows its
events as steps, its tool confirmations in the approvals inbox, and interrupts it at the
run's budget. A session already followed cannot be followed again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QAction, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.managed import ManagedSessions, SessionRow
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import Run
from desktop_agent.domain.units import format_usd
from desktop_agent.gui.sizing import keep_minimum_size
from desktop_agent.gui.tables import list_table
from desktop_agent.gui.tasks import TaskRunner

COLUMNS = ("Session", "Status", "Model", "Cost", "Started", "Followed by")

INTRO = (
    "Sessions of Anthropic's hosted Managed Agents that your API key can read. A followed "
    "session is a run: its events are its steps, its tool confirmations wait in the "
    "approvals inbox, and pausing the run interrupts the session."
)


def row_cells(row: SessionRow) -> list[str]:
    """The cells of a session's row."""
    s = row.session
    cost = format_usd(s.cost_usd) if s.cost_usd is not None else "—"
    if s.budget_usd is not None:
        cost += f" of {format_usd(s.budget_usd)}"
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_at)) if s.created_at else ""
    followed = f"{row.run_id} ({row.run_status})" if row.run_id else ""
    return [s.name, s.status, s.model, cost, started, followed]


class ManagedSessionsDialog(QDialog):
    """The sessions, and the button that follows the selected one.

    Args:
        client: the database's client.
        tasks: where the reads and the follow run (off the GUI thread).
        sessions: the sessions' client (default: one with the analyst's key).
        parent: owner.

    Signals:
        followed: a run now follows a session (the :class:`Run`).
    """

    followed = Signal(object)

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        sessions: ManagedSessions | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.sessions = sessions or ManagedSessions(client)
        self.rows: list[SessionRow] = []
        self.setWindowTitle("Follow a Managed Agents session")
        intro = QLabel(INTRO, self)
        intro.setWordWrap(True)
        self.model = QStandardItemModel(0, len(COLUMNS), self)
        self.model.setHorizontalHeaderLabels(list(COLUMNS))
        self.table = list_table(self.model, self)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.state = QLabel("Reading the sessions…", self)
        self.state.setWordWrap(True)
        self.state.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.follow_button = QPushButton("&Follow", self)
        self.follow_button.setEnabled(False)
        self.refresh_button = QPushButton("&Refresh", self)
        self.buttons.addButton(self.follow_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.buttons.addButton(self.refresh_button, QDialogButtonBox.ButtonRole.ResetRole)
        self.buttons.rejected.connect(self.reject)
        self.follow_button.clicked.connect(self.follow_selected)
        self.refresh_button.clicked.connect(self.refresh)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.state)
        layout.addWidget(self.buttons)
        self.resize(860, 420)
        keep_minimum_size(self)

    # ------------------------------------------------------------------ reading

    @Slot()
    def refresh(self) -> None:
        """Read the sessions again (on the task runner)."""
        self.refresh_button.setEnabled(False)
        self.state.setText("Reading the sessions…")
        self.tasks.submit(self.sessions.sessions, self.show_rows, self.show_error)

    def show_rows(self, rows: list[SessionRow]) -> None:
        """Fill the table with ``rows`` (the selection kept on the same session)."""
        current = self.selected()
        self.rows = list(rows)
        self.model.removeRows(0, self.model.rowCount())
        for row in self.rows:
            items = [QStandardItem(text) for text in row_cells(row)]
            for item in items:
                item.setEditable(False)
            items[0].setToolTip(row.session.id)
            self.model.appendRow(items)
        for col in range(1, len(COLUMNS)):
            self.table.resizeColumnToContents(col)
        self.refresh_button.setEnabled(True)
        n = len(self.rows)
        self.state.setText(f"{n} session{'s' if n != 1 else ''}" if n else "No sessions.")
        keep = next((i for i, r in enumerate(self.rows) if current and r.session.id == current), 0)
        if self.rows:
            self.table.selectRow(keep)
        self._update_button()

    def show_error(self, exc: Exception) -> None:
        """Say why the sessions could not be read or followed."""
        self.refresh_button.setEnabled(True)
        self.state.setText(plain_error(exc))
        self._update_button()

    # ------------------------------------------------------------------ following

    def selected(self) -> str | None:
        """The id of the selected session (None: none)."""
        index = self.table.currentIndex()
        if not index.isValid() or index.row() >= len(self.rows):
            return None
        return self.rows[index.row()].session.id

    @Slot()
    def follow_selected(self) -> None:
        """Follow the selected session (on the task runner)."""
        session_id = self.selected()
        if session_id is None:
            return
        self.follow_button.setEnabled(False)
        self.state.setText(f"Following {session_id}…")
        self.tasks.submit(lambda: self.sessions.follow(session_id), self._followed, self.show_error)

    def _followed(self, run: Run) -> None:
        self.state.setText(f"Run {run.id} follows the session: a worker reads its events.")
        self.followed.emit(run)
        self.refresh()

    def _update_button(self) -> None:
        index = self.table.currentIndex()
        row = self.rows[index.row()] if index.isValid() and index.row() < len(self.rows) else None
        self.follow_button.setEnabled(row is not None and not row.followed)

    @Slot(QModelIndex, QModelIndex)
    def _on_current_row_changed(self, current: QModelIndex, previous: QModelIndex) -> None:
        self._update_button()

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        if self.follow_button.isEnabled():
            self.follow_selected()

    def done(self, result: int) -> None:
        """Close, and let the sessions' connections go (on the task runner)."""
        self.tasks.submit(self.sessions.close)
        super().done(result)


def add_follow_action(
    window: QMainWindow,
    client: Client,
    tasks: TaskRunner,
    on_followed: Callable[[Run], object],
) -> QAction:
    """Put *Follow a Managed Agents session…* in the File menu, after its first action.

    ``on_followed`` is told of each run the dialog creates (the window selects it).
    """
    action = QAction("Follow a &Managed Agents session…", window)
    tip = "List your organization's Managed Agents sessions and follow one as a run"
    action.setToolTip(tip)
    action.setStatusTip(tip)
    menu = window.menuBar().actions()[0].menu()
    if isinstance(menu, QMenu):
        actions = menu.actions()
        if len(actions) > 1:
            menu.insertAction(actions[1], action)
        else:
            menu.addAction(action)

    def open_dialog() -> None:
        dialog = ManagedSessionsDialog(client, tasks, parent=window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.followed.connect(on_followed)
        dialog.open()
        dialog.refresh()

    action.triggered.connect(open_dialog)
    return action
