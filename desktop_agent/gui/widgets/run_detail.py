"""The selected run: header, live timeline, streaming model output, inspector, charts, report.

The Report tab (:mod:`desktop_agent.gui.widgets.report_view`) is read off the GUI thread,
on the window's task runner, when it is shown and again after new steps while it stays
shown; a click on a reference selects the step that read the source.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import QItemSelection, QModelIndex, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.stepkinds import model_text, tool_uses
from desktop_agent.client.views import RunRow, StepEntry
from desktop_agent.domain import Approval, RunEvent, RunStatus, StepKind
from desktop_agent.gui import resources, theme
from desktop_agent.gui.models.steps import StepTimelineModel
from desktop_agent.gui.poller import StepsBatch
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.toolbuttons import ActionButton
from desktop_agent.gui.widgets.charts import ChartsPanel
from desktop_agent.gui.widgets.header import RunHeader
from desktop_agent.gui.widgets.inspector import StepInspector
from desktop_agent.gui.widgets.report_view import ReportLoader, ReportView
from desktop_agent.gui.widgets.timeaxis import TimeAxisPanel
from desktop_agent.gui.widgets.timeline import TimelineView

_LIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING})
"""Statuses of a run that works or will by itself: its open steps are going, not in doubt."""


class RunDetailPane(QWidget):
    """Everything about one run, kept live from polled step batches.

    Args:
        model: the timeline model (owned by the window, read by the poller).
        follow: the "follow newest step" action.
        parent: owner.

    Signals:
        open_workspace_requested: the analyst clicked the workspace link (its path).
        approval_step_activated: the analyst double-clicked an approval step (run id, seq).
        review_requested: the header's banner asked to review an approval (the Approval).
        control_requested: the header's banner asked for a control (Answer, Extend budget).
    """

    open_workspace_requested = Signal(str)
    approval_step_activated = Signal(str, int)
    review_requested = Signal(object)
    control_requested = Signal(object)
    batch_wait_wanted = Signal(str)
    unarchive_requested = Signal(str)
    """The archived run shown asked to be brought back (its id)."""

    def __init__(
        self, model: StepTimelineModel, follow: QAction, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.model = model
        self.row: RunRow | None = None
        self.header = RunHeader(self)
        self.header.open_workspace_requested.connect(self.open_workspace_requested)
        self.header.review_requested.connect(self.review_requested)
        self.header.control_requested.connect(self.control_requested)
        self.header.batch_wait_wanted.connect(self.batch_wait_wanted)
        self.events_label = QLabel(self)
        """The run's events (e.g. what a worker that lost its lease did), when it has any."""
        self.events_label.setTextFormat(Qt.TextFormat.PlainText)
        self.events_label.setWordWrap(True)
        self.events_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.events_label.hide()
        self.timeline = TimelineView(self)
        self.timeline.setModel(model)
        self.follow_button = ActionButton(follow, self)  # no leak per change: toolbuttons.py
        self.follow_button.setAutoRaise(False)
        self.follow_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        follow.toggled.connect(self.timeline.set_following)
        self.timeline.follow_changed.connect(follow.setChecked)
        self.timeline_label = QLabel(self)
        self.find_field = QLineEdit(self)
        self.find_field.setPlaceholderText(
            "Find in this run (Return: next, Shift+Return: previous)"
        )
        self.find_field.setClearButtonEnabled(True)
        self.find_field.returnPressed.connect(self._on_find_return_pressed)
        self.find_field.textChanged.connect(self._on_find_text_changed)
        previous = QShortcut(QKeySequence("Shift+Return"), self.find_field)
        previous.setContext(Qt.ShortcutContext.WidgetShortcut)
        previous.activated.connect(self._on_find_previous_activated)
        self.find_status = QLabel(self)
        bar = QHBoxLayout()
        bar.addWidget(self.timeline_label, 1)
        bar.addWidget(self.find_field, 1)
        bar.addWidget(self.find_status)
        bar.addWidget(self.follow_button)
        self.stream_label = QLabel(self)
        self.stream = QPlainTextEdit(self)
        self.stream.setReadOnly(True)
        self.stream.setMaximumHeight(self.fontMetrics().height() * 6)
        self.stream_label.hide()
        self.stream.hide()
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addLayout(bar)
        # The time axis sits under the list, not in a tab: a bar clicked there selects its
        # row in the list and shows the step in the inspector, all three in sight at once.
        # The axis is wide and short (a lane a line), as the list's column is.
        self.timeaxis = TimeAxisPanel(self)
        self.timeaxis.view.step_clicked.connect(self._on_timeaxis_step_clicked)
        self.list_split = QSplitter(Qt.Orientation.Vertical, left)
        self.list_split.addWidget(self.timeline)
        self.list_split.addWidget(self.timeaxis)
        self.list_split.setStretchFactor(0, 3)
        self.list_split.setStretchFactor(1, 2)
        self.list_split.setSizes([420, 280])
        ll.addWidget(self.list_split, 1)
        ll.addWidget(self.stream_label)
        ll.addWidget(self.stream)
        self.inspector = StepInspector(self)
        self.charts = ChartsPanel(self)
        self.inspector.addTab(self.charts, resources.icon("chart"), "Charts")
        self.report_view = ReportView(self)
        self.report_view.step_requested.connect(self.select_step)
        self.inspector.addTab(self.report_view, resources.icon("edit"), "Report")
        self.report_loader: ReportLoader | None = None
        """Reads the report off the GUI thread (:meth:`use_reads`, else the window's)."""
        self._report_stale = True
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(self.inspector)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([700, 520])
        self.body_split = split
        """The steps beside the step's details."""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 0, 6, 4)
        layout.addWidget(self.header)
        layout.addWidget(self._archived_bar())
        layout.addWidget(self.events_label)
        layout.addWidget(split, 1)
        self.timeline.selectionModel().selectionChanged.connect(self._on_timeline_selection_changed)
        self.inspector.currentChanged.connect(self._on_inspector_current_changed)
        self.timeline.doubleClicked.connect(self._on_timeline_double_clicked)
        self._charts_timer = QTimer(self)
        self._charts_timer.setSingleShot(True)
        self._charts_timer.setInterval(500)
        self._charts_timer.timeout.connect(self._on_charts_timer_timeout)
        self._report_timer = QTimer(self)
        self._report_timer.setSingleShot(True)
        self._report_timer.setInterval(500)
        self._report_timer.timeout.connect(self._on_report_timer_timeout)
        self.show_run(None)

    def _archived_bar(self) -> QWidget:
        """What an archived or imported run shows instead of its steps (hidden otherwise)."""
        self.archived_bar = QWidget(self)
        self.archived_label = QLabel(self.archived_bar)
        self.archived_label.setWordWrap(True)
        self.archived_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.unarchive_button = QPushButton("Unarchive", self.archived_bar)
        self.unarchive_button.clicked.connect(self._on_unarchive_button_clicked)
        bar = QHBoxLayout(self.archived_bar)
        bar.setContentsMargins(0, 4, 0, 4)
        bar.addWidget(self.archived_label, 1)
        bar.addWidget(self.unarchive_button)
        self.archived_bar.hide()
        return self.archived_bar

    def show_archived(self, row: RunRow, imported: bool) -> None:
        """An archived (or imported) run: its header, read-only, and how to read its steps."""
        self.show_run(row)
        run_id = row.run.id
        read = f"read them with `desktop-agent show {run_id} --full`"
        if imported:
            text = (
                f"Imported run, read-only: it was brought in from another installation and "
                f"never runs here. Its steps are in its archive file, not the database: {read}."
            )
        else:
            text = (
                f"Archived run: its steps are in an archive file, not the database: {read}, "
                "or Unarchive it to bring it back into the run list."
            )
        self.archived_label.setText(text)
        self.unarchive_button.setVisible(not imported)
        self.archived_bar.show()
        self.timeline_label.setText("<b>Timeline</b> (in the archive)")
        self._report_stale = False
        self.report_view.show_report(run_id, None, f"In the archive: {read}.")

    @Slot()
    def _on_unarchive_button_clicked(self) -> None:
        if self.row is not None:
            self.unarchive_requested.emit(self.row.run.id)

    def show_run(self, row: RunRow | None) -> None:
        """Switch to another run (or none); its steps arrive with the next batch."""
        self.archived_bar.hide()
        self.row = row
        self.header.show_row(row)
        self.model.reset(row.run.id if row else None)
        self.timeline.set_following(True)
        self.inspector.show_entry(None)
        self._show_stream()
        self.show_events(())
        self.charts.set_entries(())
        self.timeaxis.view.set_entries((), live=self._live())
        self.timeline_label.setText(
            "<b>Timeline</b>" if row else "<b>Timeline</b> (no run selected)"
        )
        self._report_stale = True
        self.report_view.show_report(
            row.run.id if row else None, None, "Reading the report…" if row else ""
        )
        self._report_timer.stop()
        if self.inspector.currentWidget() is self.report_view:
            self.load_report()

    def update_row(self, row: RunRow) -> None:
        """The selected run changed (status, totals, plan)."""
        if row != self.row:
            self.row = row
            self.header.show_row(row)
            self._show_stream()  # the panel goes when the run stops working
            self.timeaxis.view.set_live(self._live())

    def show_pending(self, approvals: Sequence[Approval]) -> None:
        """The shown run's approvals that wait for the analyst (the header's banner)."""
        self.header.show_pending(approvals)

    def apply(self, batch: StepsBatch) -> None:
        """Merge steps read by the poller."""
        if self.row is None or batch.run_id != self.row.run.id:
            return
        if batch.from_seq == 1 and self.model.rowCount():
            self.model.reset(batch.run_id, batch.entries)
            self.timeaxis.view.set_entries(batch.entries, live=self._live(), keep_range=True)
        else:
            self.model.merge(batch.entries)
            self.timeaxis.view.update_entries(batch.entries)
        self.model.set_notes(batch.notes)
        self.show_events(batch.events)
        self._show_stream()
        current = self.current_entry()
        if current is not None:
            self.inspector.show_entry(current, self.thought_of, self.model.notes(current.seq))
        if self.inspector.currentWidget() is self.charts:
            self._charts_timer.start()
        if batch.entries:
            self._report_stale = True
            if self.inspector.currentWidget() is self.report_view:
                self._report_timer.start()

    def show_events(self, events: Sequence[RunEvent]) -> None:
        """Show the run's events above the timeline (hidden when it has none)."""
        lines = [
            f"⚠ {time.strftime('%H:%M:%S', time.localtime(e.created_at))}  {e.message}"
            for e in events
        ]
        text = "\n".join(lines)
        if text != self.events_label.text():
            # Something happened outside the journal: shown in the warning colour, so that
            # it is not read as one more line of the run's header.
            color = theme.warning_color(self.palette()).name()
            self.events_label.setStyleSheet(f"QLabel {{ color: {color}; }}")
            self.events_label.setText(text)
        self.events_label.setVisible(bool(lines))

    def tick(self) -> None:
        """Once a second: the time worked, and the running time of open steps."""
        self.header.tick()
        self.timeaxis.view.tick()
        if self.model.has_open():
            self.timeline.viewport().update()

    def stop(self) -> None:
        """Stop timers (the window is closing)."""
        self._charts_timer.stop()
        self._report_timer.stop()

    def _live(self) -> bool:
        """Whether the shown run works (its open steps grow; else they are in doubt)."""
        return self.row is not None and self.row.run.status in _LIVE

    def select_step(self, seq: int) -> bool:
        """Select step ``seq`` in the list (and so in the inspector); False if unknown."""
        row = self.model.row_of(seq)
        if row < 0:
            return False
        index = self.model.index(row)
        self.timeline.setCurrentIndex(index)
        self.timeline.scrollTo(index)
        return True

    @Slot(int)
    def _on_timeaxis_step_clicked(self, seq: int) -> None:
        self.select_step(seq)

    def current_entry(self) -> StepEntry | None:
        """The step selected in the timeline."""
        rows = self.timeline.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.entry(rows[0].row())

    def thought_of(self, entry: StepEntry) -> str:
        """The text of the model call that asked for a tool call."""
        use_id = (entry.input() or {}).get("tool_use_id")
        row = self.model.row_of(entry.seq)
        for i in range(row - 1, max(-1, row - 60), -1):
            other = self.model.entry(i)
            if other.kind != StepKind.MODEL_CALL:
                continue
            output = other.output()
            if any(u.get("id") == use_id for u in tool_uses(output)):
                return model_text(output)
        return ""

    def _show_stream(self) -> None:
        entry = self.model.streaming()
        if entry is None:
            running = self.row is not None and self.row.run.status == RunStatus.RUNNING
            if running and self.stream.isVisible():
                # Between two calls of a working run the panel stays, with the last text:
                # showing and hiding it around every call re-laid out and repainted the
                # whole pane several times a second.
                self.stream_label.setText("<b>Model output</b> (the last call is done)")
                return
            self.stream_label.hide()
            self.stream.hide()
            self.stream.clear()
            return
        self.stream_label.setText(
            f"<b>Model output, streaming</b> (step {entry.seq}, attempt {entry.attempt})"
        )
        text = entry.partial_text or "waiting for the first words…"
        old = self.stream.toPlainText()
        if old and text.startswith(old):
            self.stream.moveCursor(self.stream.textCursor().MoveOperation.End)
            self.stream.insertPlainText(text[len(old) :])
        elif text != old:
            self.stream.setPlainText(text)
        bar = self.stream.verticalScrollBar()
        bar.setValue(bar.maximum())
        self.stream_label.show()
        self.stream.show()

    @Slot(QItemSelection, QItemSelection)
    def _on_timeline_selection_changed(self, _sel: QItemSelection, _desel: QItemSelection) -> None:
        current = self.current_entry()
        notes = self.model.notes(current.seq) if current is not None else ()
        self.inspector.show_entry(current, self.thought_of, notes)
        self.timeaxis.view.set_selected(current.seq if current is not None else None)

    @Slot(QModelIndex)
    def _on_timeline_double_clicked(self, index: QModelIndex) -> None:
        entry = self.model.entry(index.row())
        if entry.kind == StepKind.APPROVAL:
            self.approval_step_activated.emit(entry.run_id, entry.seq)

    # ------------------------------------------------------------------ find in run

    def _matches(self, text: str) -> list[int]:
        """Rows whose step mentions ``text`` (its summary, name, input, output, text)."""
        needle = text.casefold()
        rows = []
        for row, entry in enumerate(self.model.entries()):
            haystack = " ".join(
                (
                    entry.name,
                    self.model.summary(row),
                    entry.input_json or "",
                    entry.output_json or "",
                    entry.partial_text,
                    entry.error or "",
                )
            )
            if needle in haystack.casefold():
                rows.append(row)
        return rows

    def find_next(self, text: str, *, backwards: bool = False) -> int | None:
        """Select the next (or previous) step mentioning ``text``; its row, or None."""
        text = text.strip()
        if not text:
            self.find_status.clear()
            return None
        rows = self._matches(text)
        if not rows:
            self.find_status.setText("not found")
            return None
        current = (
            self.timeline.currentIndex().row() if self.timeline.currentIndex().isValid() else -1
        )
        if backwards:
            before = [r for r in rows if r < current]
            row = before[-1] if before else rows[-1]
        else:
            after = [r for r in rows if r > current]
            row = after[0] if after else rows[0]
        index = self.model.index(row)
        self.timeline.setCurrentIndex(index)
        self.timeline.scrollTo(index)
        self.find_status.setText(f"{rows.index(row) + 1} of {len(rows)}")
        return row

    @Slot()
    def _on_find_return_pressed(self) -> None:
        self.find_next(self.find_field.text())

    @Slot()
    def _on_find_previous_activated(self) -> None:
        self.find_next(self.find_field.text(), backwards=True)

    @Slot(str)
    def _on_find_text_changed(self, text: str) -> None:
        if not text.strip():
            self.find_status.clear()

    def refresh_colors(self) -> None:
        """Redo what was colored from the palette (after a light/dark switch)."""
        self.header.banner.refresh_colors()
        self.report_view.refresh_colors()
        self.header.show_row(self.row)
        self.timeaxis.view.refresh_colors()
        current = self.current_entry()
        self.inspector.entry = None
        notes = self.model.notes(current.seq) if current is not None else ()
        self.inspector.show_entry(current, self.thought_of, notes)

    @Slot(int)
    def _on_inspector_current_changed(self, _index: int) -> None:
        if self.inspector.currentWidget() is self.charts:
            self._on_charts_timer_timeout()
        if self.inspector.currentWidget() is self.report_view and self._report_stale:
            self.load_report()

    # ------------------------------------------------------------------ the report

    def use_reads(self, client: Client, tasks: TaskRunner) -> None:
        """Read the report with ``client`` on ``tasks`` (never on the GUI thread)."""
        self.report_loader = ReportLoader(client, tasks, self.report_view)

    def _loader(self) -> ReportLoader | None:
        return self.report_loader  # None until the window gives its reads (use_reads)

    def load_report(self) -> None:
        """Read the shown run's report off the GUI thread and show it in the Report tab."""
        loader = self._loader()
        if self.row is None or loader is None or loader.loading:
            return
        self._report_stale = False
        loader.load(self.row.run.id, self._report_loaded)

    def _report_loaded(self) -> None:
        if self._report_stale and self.inspector.currentWidget() is self.report_view:
            self._report_timer.start()  # steps came meanwhile: read it again

    @Slot()
    def _on_report_timer_timeout(self) -> None:
        self.load_report()

    @Slot()
    def _on_charts_timer_timeout(self) -> None:
        demo = self.row is not None and self.row.run.is_demo
        self.charts.set_entries(self.model.entries(), simulated=demo)
