"""Dialogs that make a run template: a schedule, a batch, a watched folder.

Each is the new-run form (goal, model, workspace, tools, approval policy, budgets) with a
section of its own: when a schedule fires, which items a batch runs over, which folder is
watched. What they check as the analyst types (cron expressions, intervals, how many items
a folder holds) is checked again by :class:`~desktop_agent.client.schedules.Scheduling`
when the request is made; its message then shows in the dialog.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.messages import plain_error
from desktop_agent.client.schedules import RunOptions
from desktop_agent.client.scheduling_views import cron_words, interval_words, upcoming_firings
from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration
from desktop_agent.gui import resources, theme
from desktop_agent.gui.dialogs.new_run import NewRunDialog, NewRunRequest
from desktop_agent.gui.sizing import keep_minimum_size
from desktop_agent.gui.widgets.forecast import ForecastQuestion

RunTask = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[Exception], None]], None]
"""Runs a function off the GUI thread, then one of the two callbacks on it."""


def run_options(request: NewRunRequest) -> RunOptions:
    """The run options of a template from the new-run form's request."""
    return RunOptions(
        model=request.model,
        workspace=request.workspace,
        max_cost_usd=request.max_cost_usd,
        max_steps=request.max_steps,
        max_time_s=request.max_time_s,
        tools=request.tools,
        approval_overrides=dict(request.approval_overrides),
        effort=request.effort,
        thinking_budget=request.thinking_budget,
        economy=request.economy,
    )


@dataclass(frozen=True)
class ScheduleRequest:
    """A schedule to add: the arguments of ``Scheduling.add_schedule``."""

    run: NewRunRequest
    name: str = ""
    cron: str | None = None
    every_s: float | None = None
    timezone: str = ""
    overlap: str = "skip"


@dataclass(frozen=True)
class BatchRequest:
    """A batch to start: the arguments of ``Scheduling.start_batch``."""

    run: NewRunRequest
    folder: str | None = None
    pattern: str = "*"
    lines: str | None = None
    concurrency: int = 4


@dataclass(frozen=True)
class WatchRequest:
    """A folder to watch: the arguments of ``Scheduling.add_watch``."""

    run: NewRunRequest
    folder: str
    pattern: str = "*"
    every_s: float = 10.0
    include_existing: bool = False


def _when_short(ts: float, now: float) -> str:
    local, today = time.localtime(ts), time.localtime(now)
    if (local.tm_year, local.tm_yday) == (today.tm_year, today.tm_yday):
        return time.strftime("%H:%M", local)
    if ts - now < 6 * 86400:
        return time.strftime("%a %H:%M", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


class TemplateDialog(NewRunDialog):
    """The new-run form plus a section of its own (see the subclasses).

    Args:
        title: window title.
        icon: icon name of the window and of the accept button.
        action: label of the accept button.
        models: models to offer.
        tools: tools to offer.
        settings: defaults for model and budgets.
        default_tools: tools checked at first.
        parent: owner.

    Signals:
        submitted: the analyst pressed the accept button (the subclass's request).
    """

    submitted = Signal(object)

    def __init__(
        self,
        title: str,
        icon: str,
        action: str,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        self._ready = False
        super().__init__(models, tools, settings, default_tools, parent)
        self.setWindowTitle(title)
        self.setWindowIcon(resources.icon(icon))
        self.start.setText(action)
        self.start.setIcon(resources.icon(icon))
        # Templates carry no token budget (the other limits apply to each run).
        budget = self.tokens.parentWidget()
        form = budget.layout() if budget is not None else None
        if isinstance(form, QFormLayout):
            form.setRowVisible(self.tokens, False)
        self.tools.setMinimumHeight(self.tools.sizeHintForRow(0) * 6 + 6)
        lines = self.fontMetrics().height()
        self.goal.setMinimumHeight(lines * 3)
        self.goal.setMaximumHeight(lines * 5)
        self.section = QGroupBox(self)
        self.form = QFormLayout(self.section)
        layout = self.layout()
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(1, self.section)

    def _finish(self) -> None:
        """Size the dialog for its section; subclasses call this last."""
        self._ready = True
        self._validate()
        hint = self.sizeHint()
        self.resize(max(hint.width(), 760), hint.height())
        keep_minimum_size(self)

    def feedback_label(self) -> QLabel:
        """A label for ✔/✘ feedback under a field."""
        label = QLabel(self)
        label.setWordWrap(True)
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        # A wrapped label asks for the height of its text at a narrow width; at the width it
        # gets here that left lines of blank space under a long message.
        label.setMinimumWidth(520)
        return label

    def show_feedback(self, label: QLabel, ok: bool, text: str) -> None:
        """``✔ text`` in the completed color, or ``✘ text`` in the failed one."""
        status = RunStatus.COMPLETED if ok else RunStatus.FAILED
        pal = label.palette()
        pal.setColor(QPalette.ColorRole.WindowText, theme.status_color(status, self.palette()))
        label.setPalette(pal)
        label.setText(("✔ " if ok else "✘ ") + text)

    def browse_row(self, edit: QLineEdit, title: str, *, folder: bool) -> QHBoxLayout:
        """``edit`` with a Choose… button that opens a file or folder picker."""
        button = QPushButton(resources.icon("folder"), "Choose…", self)

        def browse() -> None:
            dialog = QFileDialog(self, title, edit.text())
            if folder:
                dialog.setFileMode(QFileDialog.FileMode.Directory)
                dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
            else:
                dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
            dialog.fileSelected.connect(edit.setText)
            dialog.open()

        button.clicked.connect(browse)
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        row.addWidget(button)
        return row

    # ------------------------------------------------------------------ checks

    def choice_row(self, first: str, second: str) -> tuple[QRadioButton, QRadioButton, QHBoxLayout]:
        """Two exclusive radio buttons on one row, the first checked."""
        a = QRadioButton(first, self)
        b = QRadioButton(second, self)
        a.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(a)
        group.addButton(b)
        row = QHBoxLayout()
        row.addWidget(a)
        row.addWidget(b)
        row.addStretch(1)
        return a, b, row

    def section_problem(self) -> str | None:
        """What keeps the section from being accepted (None: nothing); shown live."""
        return None

    def make_request(self, run: NewRunRequest) -> object:
        """The request to emit (raises InvalidInputError with a readable message)."""
        raise NotImplementedError

    def _validate(self) -> None:
        if not self._ready:
            return
        goal = bool(self.goal.toPlainText().strip())
        self.start.setEnabled(goal and self.section_problem() is None)

    @Slot()
    def _on_goal_text_changed(self) -> None:
        super()._on_goal_text_changed()
        self._validate()

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            request = self.make_request(self.request())
        except InvalidInputError as exc:
            self.show_error(plain_error(exc))
            return
        self.error.setText("")
        self.start.setEnabled(False)
        self.submitted.emit(request)

    def show_error(self, message: str) -> None:
        """Show why the request was refused (e.g. the backend's validation message)."""
        text = message[:1].upper() + message[1:]
        self.error.setText(f"✘ {text}" if not text.startswith("✘") else text)
        self._validate()


# --------------------------------------------------------------------------- schedules


OVERLAPS = [
    ("skip", "Skip the firing: one run at a time (recommended)"),
    ("queue", "Queue it: start when the previous run ends"),
]


class ScheduleDialog(TemplateDialog):
    """Create a schedule: a run template fired on an interval or a cron expression."""

    def __init__(
        self,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(
            "New schedule",
            "schedule",
            "Create schedule",
            models,
            tools,
            settings,
            default_tools,
            parent,
        )
        self.goal.setPlaceholderText(
            "What should each run do? e.g. Check the competitors' pricing pages and note "
            "what changed since the last run."
        )
        self.section.setTitle("When")
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("optional: the goal's first line")
        self.by_interval, self.by_cron, kinds = self.choice_row(
            "At an interval", "On a cron expression"
        )
        self.every = QLineEdit("1d", self)
        self.every.setPlaceholderText("e.g. 30m, 6h, 1d")
        self.cron = QLineEdit(self)
        self.cron.setPlaceholderText("minute hour day-of-month month day-of-week, e.g. 0 9 * * 1-5")
        self.timezone = QLineEdit(self)
        self.timezone.setPlaceholderText("empty: local time (or an IANA name, e.g. Europe/Paris)")
        self.check = self.feedback_label()
        self.overlap = QComboBox(self)
        for key, label in OVERLAPS:
            self.overlap.addItem(label, key)
        self.form.addRow("Name", self.name)
        self.form.addRow("Repeat", kinds)
        self.form.addRow("Every", self.every)
        self.form.addRow("Cron", self.cron)
        self.form.addRow("Time zone", self.timezone)
        self.form.addRow("", self.check)
        self.form.addRow("If still running", self.overlap)
        for edit in (self.every, self.cron, self.timezone):
            edit.textChanged.connect(self._on_when_changed)
        self.by_interval.toggled.connect(self._on_when_changed)
        self._on_when_changed()
        self._finish()

    def when(self) -> tuple[str | None, float | None, str]:
        """(cron, interval, time zone) as entered; raises InvalidInputError."""
        if self.by_cron.isChecked():
            cron = " ".join(self.cron.text().split())
            if not cron:
                raise InvalidInputError(
                    "enter a cron expression: five fields, e.g. 0 9 * * 1-5 (9:00 on weekdays)"
                )
            return cron, None, self.timezone.text().strip()
        text = self.every.text().strip()
        if not text:
            raise InvalidInputError("enter an interval, e.g. 30m, 6h or 1d")
        return None, parse_duration(text), ""

    def section_problem(self) -> str | None:
        """The cron or interval problem, if any."""
        try:
            cron, every, zone = self.when()
            upcoming_firings(cron=cron, every_s=every, timezone=zone, count=1)
        except InvalidInputError as exc:
            return str(exc)
        return None

    @Slot()
    def _on_when_changed(self) -> None:
        cron_mode = self.by_cron.isChecked()
        self.form.setRowVisible(self.every, not cron_mode)
        self.form.setRowVisible(self.cron, cron_mode)
        self.form.setRowVisible(self.timezone, cron_mode)
        now = time.time()
        try:
            cron, every, zone = self.when()
            firings = upcoming_firings(cron=cron, every_s=every, timezone=zone, count=3, now=now)
        except InvalidInputError as exc:
            self.show_feedback(self.check, False, str(exc))
        else:
            if cron is not None:
                words = cron_words(cron) or f"cron {cron}"
            else:
                words = interval_words(every or 0)
                words = words[:1].upper() + words[1:]
            nexts = ", ".join(_when_short(t, now) for t in firings)
            self.show_feedback(self.check, True, f"{words} — next: {nexts}")
        self._validate()

    def make_request(self, run: NewRunRequest) -> ScheduleRequest:
        """The schedule asked for."""
        cron, every, zone = self.when()
        upcoming_firings(cron=cron, every_s=every, timezone=zone, count=1)
        return ScheduleRequest(
            run=run,
            name=self.name.text().strip(),
            cron=cron,
            every_s=every,
            timezone=zone,
            overlap=str(self.overlap.currentData()),
        )


# --------------------------------------------------------------------------- batches


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


# --------------------------------------------------------------------------- watches


class WatchDialog(TemplateDialog):
    """Watch a folder: each new file starts a run from the template."""

    def __init__(
        self,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(
            "Watch a folder",
            "watch",
            "Watch folder",
            models,
            tools,
            settings,
            default_tools,
            parent,
        )
        self.goal.setPlaceholderText(
            "The goal for each new file; {name} is its name, {path} its full path. "
            "e.g. Extract the totals from invoice {name} into totals.csv."
        )
        self.workspace.setPlaceholderText("empty: a new folder per file (the file is copied in)")
        self.section.setTitle("New files in a folder")
        self.folder = QLineEdit(self)
        self.folder.setPlaceholderText("new files in this folder start runs")
        self.pattern = QLineEdit("*", self)
        self.pattern.setPlaceholderText("file names to react to, e.g. *.pdf")
        self.every = QLineEdit("10s", self)
        self.every.setPlaceholderText("e.g. 10s, 1m")
        self.existing = QCheckBox("Also start runs for the files there now", self)
        self.check = self.feedback_label()
        self.form.addRow("Folder", self.browse_row(self.folder, "Folder to watch", folder=True))
        self.form.addRow("Pattern", self.pattern)
        self.form.addRow("Scan every", self.every)
        self.form.addRow("", self.existing)
        self.form.addRow("", self.check)
        for edit in (self.folder, self.every):
            edit.textChanged.connect(self._on_fields_changed)
        self._on_fields_changed()
        self._finish()

    def _scan_s(self) -> float:
        text = self.every.text().strip()
        if not text:
            raise InvalidInputError("enter how often to look, e.g. 10s")
        seconds = parse_duration(text)
        if seconds < 0.5:
            raise InvalidInputError("scan at most every half second")
        return seconds

    def section_problem(self) -> str | None:
        """A missing folder or a bad interval."""
        if not self.folder.text().strip():
            return "choose a folder"
        try:
            self._scan_s()
        except InvalidInputError as exc:
            return str(exc)
        return None

    @Slot()
    def _on_fields_changed(self) -> None:
        problem = self.section_problem()
        if problem is None:
            self.show_feedback(
                self.check, True, f"Looks for new files {interval_words(self._scan_s())}"
            )
        else:
            self.show_feedback(self.check, False, problem)
        self._validate()

    def make_request(self, run: NewRunRequest) -> WatchRequest:
        """The watch asked for."""
        folder = self.folder.text().strip()
        if not folder:
            raise InvalidInputError("choose the folder to watch")
        return WatchRequest(
            run=run,
            folder=folder,
            pattern=self.pattern.text().strip() or "*",
            every_s=self._scan_s(),
            include_existing=self.existing.isChecked(),
        )
