"""The run list room: the list and its filters, the selection, archived runs, tags.

The list shows the runs the poller reads; the archived and imported runs its filters
offer are read off the GUI thread when the analyst asks for them. Selecting a run shows
it in the detail room and makes the poller follow its steps; an archived run shows
read-only (no controls). A run opened from elsewhere (a search result, a notice, a new
run, a fork) is selected as soon as a poll lists it; a run brought back from its archive
is read anew (its old times would escape an incremental read).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.client.api import Client
from desktop_agent.client.archived import ArchivedListing, archived_runs
from desktop_agent.client.messages import plain_error
from desktop_agent.client.views import RunRow
from desktop_agent.domain import Run
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.models.runs import RunListModel
from desktop_agent.gui.run_tags import RunTagging
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.widgets.runlist import RunListPanel


class RunsRoom(QObject):
    """The run list, what is selected in it, and the runs to select once listed.

    Args:
        window: the main window.
        parent: the main window, as the owner of the widgets.

    Attributes:
        runs_model: the runs as last polled.
        run_list: the list (its table, search field and filters).
        tagging: the list's "Tags…" action.
        selected: the selected run as last polled (None: none, or an archived one).
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.client: Client = window.client
        self.tasks: TaskRunner = window.tasks
        self.runs_model = RunListModel(parent)
        self.run_list = RunListPanel(self.runs_model, parent)
        self.selected: RunRow | None = None
        self._pending_select: str | None = None
        table = self.run_list.table
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        for name in ("run_again", "compare", "export"):
            table.addAction(window.acts[name])
        self.tagging = RunTagging(self, self._on_tags_saved)
        self.run_list.run_selected.connect(self._on_run_list_run_selected)
        self.run_list.archived_wanted.connect(self.read_archived)

    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work (for :class:`RunTagging`)."""
        self.window.show_error(message)

    def _on_tags_saved(self, _change: object) -> None:
        self.window.poller.refresh()

    # ------------------------------------------------------------------ selection

    def select_run(self, run_id: str) -> bool:
        """Select a run in the list (showing the Runs tab)."""
        self.window.side.setCurrentWidget(self.run_list)
        return self.run_list.select_run(run_id)

    @Slot(str)
    def _on_run_list_run_selected(self, run_id: str) -> None:
        self.show_selected(run_id)

    def show_selected(self, run_id: str) -> None:
        """Show ``run_id`` (selected in the list) in the detail pane; "" for none."""
        w = self.window
        w.controls_room.update_compare()
        if self.runs_model.get(run_id) is None and self._show_archived_run(run_id):
            return
        row = self.runs_model.get(run_id) if run_id else None
        if row is not None and self.selected is not None and row.run.id == self.selected.run.id:
            return
        self.selected = row
        w.detail_room.show_run(row)
        w.poller.select_run(run_id or None)
        w.controls_room.update()

    def _show_archived_run(self, run_id: str) -> bool:
        """Show an archived run of the list (read-only: no controls); False if it is none."""
        found = self.run_list.archived_row(run_id) if run_id else None
        if found is None:
            return False
        self.selected = None
        self.window.detail_room.detail.show_archived(*found)
        self.window.poller.select_run(None)
        self.window.controls_room.update()
        return True

    @Slot(str)
    def show_approval_run(self, run_id: str) -> None:
        """An approval selected in the inbox shows its run (if listed)."""
        if run_id and self.runs_model.get(run_id) is not None:
            self.show_selected(run_id)

    def polled(self) -> None:
        """After a poll: the selected run's header shows its row as polled."""
        if self.selected is None:
            return
        row = self.runs_model.get(self.selected.run.id)
        if row is not None and row != self.selected:
            self.selected = row
            self.window.detail_room.detail.update_row(row)

    # ------------------------------------------------------------------ runs to select

    def select_when_listed(self, run_id: str) -> None:
        """Select ``run_id`` as soon as a poll lists it (a run just made or brought back)."""
        self._pending_select = run_id
        self.window.poller.refresh()
        QTimer.singleShot(0, self._select_pending)

    def _select_pending(self) -> None:
        if self._pending_select is None or self.window.is_shut_down:
            return
        if self.select_run(self._pending_select):
            self._pending_select = None
        else:  # the poll that lists the new run has not arrived yet
            QTimer.singleShot(100, self._select_pending)

    def open_step(self, run_id: str, seq: int, marks: object = ()) -> None:
        """Select ``run_id`` with step ``seq`` selected in its timeline (0: the run only).

        ``marks``: words to mark in the step's details (a search's).
        """
        self.window.bring_up()
        words = [str(m) for m in marks] if isinstance(marks, list | tuple) else []
        detail = self.window.detail_room
        detail.want_step(run_id, seq, words)
        if not self.select_run(run_id):  # not listed yet (just brought back): at the next poll
            self.select_when_listed(run_id)
        detail.show_wanted_step()

    # ------------------------------------------------------------------ archived runs

    @Slot()
    def read_archived(self) -> None:
        """Read the archived and imported runs off the GUI thread, for the list's filters."""
        client = self.client

        def read() -> list[ArchivedListing]:
            return archived_runs(client)

        def show(found: list[ArchivedListing]) -> None:
            imported = {a.run.id for a in found if a.imported}
            self.run_list.show_archived([RunRow(a.run) for a in found], imported)

        self.tasks.submit(read, show, lambda exc: self.show_error(plain_error(exc)))

    @Slot(str)
    def unarchive_shown(self, run_id: str) -> None:
        """Bring the archived run the detail pane shows back from its archive."""
        self.unarchive(run_id, 0)

    @Slot(str, int)
    def unarchive(self, run_id: str, seq: int) -> None:
        """Bring ``run_id`` back from its archive (off the GUI thread), then open it."""
        client = self.client

        def bring_back() -> Run:
            from desktop_agent.client.schedules import Scheduling

            return Scheduling(client).unarchive(run_id)

        def back(run: Run) -> None:
            self.window.statusBar().showMessage(f"Run {run.id} is back from its archive", 10_000)
            self.window.poller.reload_all()  # its old times: an incremental read would miss it
            self.open_step(run.id, seq)

        self.tasks.submit(bring_back, back, lambda exc: self.show_error(plain_error(exc)))
