"""The watch-a-folder dialog: each new file in a folder starts a run from the template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QCheckBox, QLineEdit, QWidget

from desktop_agent.client.scheduling_views import interval_words
from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration
from desktop_agent.gui.dialogs.new_run import NewRunRequest
from desktop_agent.gui.dialogs.template_form import TemplateDialog


@dataclass(frozen=True)
class WatchRequest:
    """A folder to watch: the arguments of ``Scheduling.add_watch``."""

    run: NewRunRequest
    folder: str
    pattern: str = "*"
    every_s: float = 10.0
    include_existing: bool = False


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
