"""The start-batch dialog: one goal over the files of a folder or the lines of a file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QSpinBox, QWidget

from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.gui.dialogs.new_run import NewRunRequest
from desktop_agent.gui.dialogs.template_form import RunTask, TemplateDialog
from desktop_agent.gui.widgets.forecast import ForecastQuestion


@dataclass(frozen=True)
class BatchRequest:
    """A batch to start: the arguments of ``Scheduling.start_batch``."""

    run: NewRunRequest
    folder: str | None = None
    pattern: str = "*"
    lines: str | None = None
    concurrency: int = 4


STREAMED_CONCURRENCY = 4
"""Items of a streamed batch running at once, by default (as ``batch start``)."""

ECONOMY_CONCURRENCY = 1000
"""Most items of a batch running at once: an economy-mode run in a batch holds no thread."""


class BatchDialog(TemplateDialog):
    """Start a batch: one goal over the files of a folder or the lines of a file.

    A batch is in economy mode by default (its turns wait together in Message Batches, at
    half price), every item at once; not with the demo model.

    Args:
        run_task: counts the items off the GUI thread.
        count: how many items a folder (and pattern) or file of lines holds; raises
            InvalidInputError.
    """

    economy_by_default = True

    def __init__(
        self,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        run_task: RunTask,
        count: Callable[..., int],
        parent: QWidget | None = None,
    ) -> None:
        self.run_task = run_task
        self.count_items = count
        self._count_generation = 0
        self.item_count: int | None = None
        super().__init__(
            "Start batch", "batch", "Start batch", models, tools, settings, default_tools, parent
        )
        self.goal.setPlaceholderText(
            "The goal for each item; {item} is the line or the file's name, {path} the file's "
            "full path. e.g. Summarise {item} and list its three key figures, with pages."
        )
        self.workspace.setPlaceholderText(
            "empty: a new folder per item (a file item is copied into it)"
        )
        self.section.setTitle("Items")
        self.from_folder, self.from_lines, kinds = self.choice_row(
            "Files of a folder", "Lines of a text file"
        )
        self.folder = QLineEdit(self)
        self.folder.setPlaceholderText("one run per file in this folder")
        self.pattern = QLineEdit("*", self)
        self.pattern.setPlaceholderText("file names to take, e.g. *.pdf")
        self.lines = QLineEdit(self)
        self.lines.setPlaceholderText("one run per non-empty line of this file")
        self.check = self.feedback_label()
        self.concurrency = QSpinBox(self)
        self.concurrency.setRange(1, ECONOMY_CONCURRENCY)
        self.concurrency.setValue(STREAMED_CONCURRENCY)
        self.concurrency.setSuffix(" runs at a time")
        self.placeholders = QLabel(
            "Without {item}, {name} or {path} in the goal, the item is added at its end.", self
        )
        self.placeholders.setWordWrap(True)
        self.placeholders.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.form.addRow("Take", kinds)
        self.form.addRow("Folder", self.browse_row(self.folder, "Items folder", folder=True))
        self.form.addRow("Pattern", self.pattern)
        self.form.addRow("File", self.browse_row(self.lines, "File of lines", folder=False))
        self.form.addRow("", self.check)
        self.form.addRow("Concurrency", self.concurrency)
        self.form.addRow("", self.placeholders)
        for edit in (self.folder, self.pattern, self.lines):
            edit.textChanged.connect(self._on_items_changed)
        self.from_folder.toggled.connect(self._on_items_changed)
        self.economy.toggled.connect(self._on_batch_economy_toggled)
        self.economy.setChecked(self.economy.isEnabled())
        self._on_items_changed()
        self._finish()

    @Slot(bool)
    def _on_batch_economy_toggled(self, checked: bool) -> None:
        self._fit_concurrency()

    def ask_forecast(self) -> None:
        """The forecast of the whole batch: every item counted so far (one until then)."""
        model = self.model.currentData()
        if model is None:
            return
        effort = str(self.effort.currentData() or "")
        items = self.item_count or 1
        self.forecast_line.ask(ForecastQuestion(str(model), effort, None, items))

    def _fit_concurrency(self) -> None:
        """Economy mode: every item at once (up to the most); streamed: a few at a time."""
        if self.economy.isChecked():
            items = self.item_count or ECONOMY_CONCURRENCY
            self.concurrency.setValue(max(1, min(ECONOMY_CONCURRENCY, items)))
        else:
            self.concurrency.setValue(STREAMED_CONCURRENCY)

    def section_problem(self) -> str | None:
        """Until the items are counted, or when there are none."""
        return None if self.item_count else (self.check.text() or "no items yet")

    @Slot()
    def _on_items_changed(self) -> None:
        folder_mode = self.from_folder.isChecked()
        self.form.setRowVisible(self.pattern, folder_mode)
        for edit, shown in ((self.folder, folder_mode), (self.lines, not folder_mode)):
            row = self._row_of(edit)
            if row >= 0:
                self.form.setRowVisible(row, shown)
        self.item_count = None
        self._count_generation += 1
        generation = self._count_generation
        source = (self.folder if folder_mode else self.lines).text().strip()
        if not source:
            what = "folder" if folder_mode else "file of lines"
            self.show_feedback(self.check, False, f"choose a {what}")
            self._validate()
            return
        self.check.setText("Counting…")
        self.check.setPalette(self.palette())
        count, pattern = self.count_items, self.pattern.text().strip() or "*"
        if folder_mode:

            def job() -> int:
                return count(folder=source, pattern=pattern)
        else:

            def job() -> int:
                return count(lines=source)

        def done(n: int) -> None:
            if generation == self._count_generation:
                self.item_count = n
                if self.economy.isChecked():
                    self._fit_concurrency()
                self.ask_forecast()  # for every item now
                noun = ("file" if folder_mode else "line") + ("s" if n != 1 else "")
                self.show_feedback(self.check, True, f"{n} {noun}: {n} runs")
                self._validate()

        def failed(exc: Exception) -> None:
            if generation == self._count_generation:
                self.show_feedback(self.check, False, str(exc))
                self._validate()

        self._validate()
        self.run_task(job, done, failed)

    def _row_of(self, edit: QLineEdit) -> int:
        for row in range(self.form.rowCount()):
            item = self.form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            layout = item.layout() if item is not None else None
            if layout is not None and layout.indexOf(edit) >= 0:
                return row
        return -1

    def make_request(self, run: NewRunRequest) -> BatchRequest:
        """The batch asked for."""
        if self.from_folder.isChecked():
            folder = self.folder.text().strip()
            if not folder:
                raise InvalidInputError("choose the folder whose files are the items")
            return BatchRequest(
                run=run,
                folder=folder,
                pattern=self.pattern.text().strip() or "*",
                concurrency=self.concurrency.value(),
            )
        lines = self.lines.text().strip()
        if not lines:
            raise InvalidInputError("choose the file whose lines are the items")
        return BatchRequest(run=run, lines=lines, concurrency=self.concurrency.value())
