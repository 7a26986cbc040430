"""The run detail room: the selected run's pane, its steps as polled, and what it reads.

The pane (:class:`~desktop_agent.gui.widgets.run_detail.RunDetailPane`: the header, the
timeline, the inspector and the time axis) merges the steps the poller reads. What the
header shows beside the run (its forks and inherited cost, its forecast, its place in a
Message Batch) is read off the GUI thread when a run is shown. A step asked for before its
run's steps were read (a search result) is selected once they arrive. The timeline's
context menu offers Fork from this step and a note on the step. A source cited by the
selected step, clicked in the inspector, selects the step that read it (once loaded).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMainWindow

from desktop_agent.client import forks as client_forks
from desktop_agent.client.api import Client
from desktop_agent.client.economy import batch_wait
from desktop_agent.client.forecast import run_forecast
from desktop_agent.client.views import RunRow
from desktop_agent.domain import Run
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.models.steps import StepTimelineModel
from desktop_agent.gui.poller import StepsBatch
from desktop_agent.gui.step_notes import StepNoting
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.widgets.run_detail import RunDetailPane


class DetailRoom(QObject):
    """The selected run's pane and the reads that fill its header.

    Args:
        window: the main window.
        parent: the main window, as the owner of the widgets.

    Attributes:
        steps_model: the shown run's steps.
        detail: the pane.
        noting: the timeline's "Note on this step…" action.
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.client: Client = window.client
        self.tasks: TaskRunner = window.tasks
        self.steps_model = StepTimelineModel(parent)
        self.detail = RunDetailPane(self.steps_model, window.acts["follow"], parent)
        self.detail.use_reads(self.client, self.tasks)  # the Report tab's reads
        self._wanted: tuple[str, int] | None = None
        """A step to select once its run's steps are loaded: (run, seq)."""
        self._marks: list[str] = []
        """Words to mark in that step's details."""
        timeline = self.detail.timeline
        timeline.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        timeline.addAction(window.acts["fork_step"])
        self.noting = StepNoting(self, self._on_note_written)
        self.detail.header.run_link_activated.connect(self._on_header_run_link_activated)
        self.detail.open_workspace_requested.connect(self._on_detail_open_workspace_requested)
        self.detail.batch_wait_wanted.connect(self.read_batch_wait)
        self.detail.inspector.source_requested.connect(self._on_inspector_source_requested)

    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work (for :class:`StepNoting`)."""
        self.window.show_error(message)

    def _on_note_written(self, _note: object) -> None:
        self.window.poller.refresh()

    @Slot(str)
    def _on_header_run_link_activated(self, run_id: str) -> None:
        self.window.select_run(run_id)

    @Slot(int)
    def _on_inspector_source_requested(self, seq: int) -> None:
        if self.detail.select_step(seq):
            return
        run_id = self.steps_model.run_id
        if run_id is not None:  # its steps are still being read: select it when they are
            self.want_step(run_id, seq, [])

    @Slot(str)
    def _on_detail_open_workspace_requested(self, path: str) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    # ------------------------------------------------------------------ the shown run

    def show_run(self, row: RunRow | None) -> None:
        """Switch the pane to ``row`` (None: no run); its steps come with the next poll."""
        self.detail.show_run(row)
        self.read_forks(row)

    def read_forks(self, row: RunRow | None) -> None:
        """The run's forks, inherited cost and forecast in its header (read off-thread)."""
        if row is None:
            return
        client, run = self.client, row.run

        def read() -> tuple[list[Run], float]:
            return client.forks_of(run.id), client_forks.inherited_cost(client, run)

        def show(found: tuple[list[Run], float]) -> None:
            self.detail.header.show_forks(run.id, *found)

        self.tasks.submit(read, show, lambda exc: None)
        self.tasks.submit(
            lambda: run_forecast(client, run.id),
            lambda kept: self.detail.header.show_forecast(run.id, kept),
            lambda exc: None,
        )

    @Slot(str)
    def read_batch_wait(self, run_id: str) -> None:
        """Where a run waiting in a Message Batch has its turn, for its header (off-thread)."""
        client = self.client
        self.tasks.submit(
            lambda: batch_wait(client, run_id),
            lambda wait: self.detail.header.show_batch_wait(run_id, wait),
            lambda exc: None,
        )

    def steps_loaded(self, batch: StepsBatch) -> None:
        """Merge the steps the poller read, then select a step asked for, if they hold it."""
        self.detail.apply(batch)
        self.show_wanted_step()

    # ------------------------------------------------------------------ a step asked for

    def want_step(self, run_id: str, seq: int, marks: list[str]) -> None:
        """Select step ``seq`` of ``run_id`` once shown and loaded (0: none), marking ``marks``."""
        self._wanted = (run_id, seq) if seq else None
        self._marks = marks

    def show_wanted_step(self) -> None:
        """Select the step asked for, if its run is shown and the step loaded."""
        selected = self.window.runs_room.selected
        if self._wanted is None or selected is None:
            return
        run_id, seq = self._wanted
        if selected.run.id != run_id or self.steps_model.run_id != run_id:
            return
        row = self.steps_model.row_of(seq)
        if row < 0:
            return  # not loaded yet
        index = self.steps_model.index(row)
        self.detail.timeline.setCurrentIndex(index)
        self.detail.timeline.scrollTo(index)
        self.detail.inspector.mark(self._marks)
        self._wanted = None
