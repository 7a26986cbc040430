"""The new-schedule dialog: a run template fired on an interval or a cron expression."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QComboBox, QLineEdit, QWidget

from desktop_agent.client.scheduling_views import cron_words, interval_words, upcoming_firings
from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration
from desktop_agent.gui.dialogs.new_run import NewRunRequest
from desktop_agent.gui.dialogs.template_form import TemplateDialog


@dataclass(frozen=True)
class ScheduleRequest:
    """A schedule to add: the arguments of ``Scheduling.add_schedule``."""

    run: NewRunRequest
    name: str = ""
    cron: str | None = None
    every_s: float | None = None
    timezone: str = ""
    overlap: str = "skip"


def _when_short(ts: float, now: float) -> str:
    local, today = time.localtime(ts), time.localtime(now)
    if (local.tm_year, local.tm_yday) == (today.tm_year, today.tm_yday):
        return time.strftime("%H:%M", local)
    if ts - now < 6 * 86400:
        return time.strftime("%a %H:%M", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


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
