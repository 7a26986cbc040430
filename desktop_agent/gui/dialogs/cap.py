"""Raise the monthly spend cap, then resume the runs it held: one dialog, two steps.

A run the cap stops cannot be helped by extending its own budget. This dialog shows what
the month spent, the cap and the runs it holds; *Raise the cap* saves the new cap (or none)
and then offers *Resume the N held runs*.
"""

from __future__ import annotations

import math
import time

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.cap import MAX_CAP_USD, CapReport
from desktop_agent.domain.units import format_usd
from desktop_agent.gui.sizing import keep_minimum_size

SHOWN_RUNS = 8
"""Held runs named in the dialog; more are counted."""


def suggested_cap(report: CapReport) -> float:
    """A new cap worth offering: half as much again, at least $10 above this month's spend."""
    base = max(report.cap_usd or 0.0, report.spent_usd)
    return float(math.ceil(round(max(base * 1.5, report.spent_usd + 10.0), 2)))


def month_text(report: CapReport) -> str:
    """This month so far against the cap."""
    month = time.strftime("%B %Y", time.localtime())
    spent = format_usd(report.spent_usd)
    if report.cap_usd is None:
        return f"{month} so far: {spent}; no monthly spend cap is set."
    share = report.spent_usd / report.cap_usd * 100 if report.cap_usd > 0 else 100.0
    return f"{month} so far: {spent} of the {format_usd(report.cap_usd)} cap ({share:.0f}%)."


def held_text(report: CapReport) -> str:
    """The runs the cap holds, by name (the first few)."""
    n = len(report.held)
    if not n:
        return "No run waits for the cap now."
    names = [f"• {r.title or r.goal}" for r in report.held[:SHOWN_RUNS]]
    if n > SHOWN_RUNS:
        names.append(f"… and {n - SHOWN_RUNS} more")
    return f"{n} run{'s' if n != 1 else ''} wait for it:\n" + "\n".join(names)


class CapDialog(QDialog):
    """The cap, the runs it holds, a new cap; then the resume.

    Args:
        report: this month's spend, the cap and the held runs.
        parent: owner.

    Signals:
        raise_requested: the new cap in dollars, or 0.0 for none (the caller saves it and
            calls :meth:`cap_saved` or :meth:`show_error`).
        resume_requested: resume the held runs (the caller does, then closes the dialog).
    """

    raise_requested = Signal(float)
    resume_requested = Signal()

    def __init__(self, report: CapReport, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = report
        self.setWindowTitle("Raise the monthly spend cap")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.month = QLabel(month_text(report), self)
        self.held = QLabel(held_text(report), self)
        self.held.setWordWrap(True)
        self.held.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.cap = QDoubleSpinBox(self)
        self.cap.setRange(0.01, MAX_CAP_USD)
        self.cap.setDecimals(2)
        self.cap.setPrefix("$ ")
        self.cap.setValue(suggested_cap(report))
        self.no_cap = QCheckBox("No cap (runs may spend without a monthly limit)", self)
        self.no_cap.toggled.connect(self.cap.setDisabled)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        self.error.hide()
        form = QFormLayout()
        form.addRow("New monthly cap", self.cap)
        form.addRow("", self.no_cap)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.raise_button = self.buttons.addButton(
            "Raise the cap", QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.raise_button.setDefault(True)
        self.resume_button = QPushButton(self)
        self.buttons.addButton(self.resume_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.resume_button.hide()  # after addButton, which shows it
        self.raise_button.clicked.connect(self._on_raise_button_clicked)
        self.resume_button.clicked.connect(self._on_resume_button_clicked)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Runs stopped by the monthly spend cap go on only once the cap leaves room: "
            "extending a run's own budget does not lift it.",
            self,
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addWidget(self.month)
        layout.addWidget(self.held)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        keep_minimum_size(self)

    def new_cap(self) -> float | None:
        """The cap asked for (None: no cap)."""
        return None if self.no_cap.isChecked() else self.cap.value()

    @Slot()
    def _on_raise_button_clicked(self) -> None:
        usd = self.new_cap()
        if usd is not None and usd <= self.report.spent_usd:
            self.show_error(
                f"This month already spent {format_usd(self.report.spent_usd)}: a cap at or "
                "below it holds every run. Choose more, or no cap."
            )
            return
        self.error.hide()
        self.raise_button.setEnabled(False)
        self.raise_requested.emit(usd or 0.0)

    def cap_saved(self, cap_usd: float | None) -> None:
        """The new cap is saved: say so, and offer the resume of the held runs."""
        self.raise_button.hide()
        self.cap.setEnabled(False)
        self.no_cap.setEnabled(False)
        said = f"is now {format_usd(cap_usd)}" if cap_usd else "is off"
        n = len(self.report.held)
        if not n:
            self.month.setText(f"The monthly cap {said}. No run waits for it.")
            self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setText("Close")
            return
        self.month.setText(f"The monthly cap {said}.")
        self.resume_button.setText(f"Resume the {n} held run{'s' if n != 1 else ''}")
        self.resume_button.show()
        self.resume_button.setDefault(True)
        self.resume_button.setFocus()
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setText("Not now")

    def show_error(self, message: str) -> None:
        """Say why the cap was not changed; the analyst may try again."""
        self.error.setText(message)
        self.error.show()
        self.raise_button.setEnabled(True)

    @Slot()
    def _on_resume_button_clicked(self) -> None:
        self.resume_button.setEnabled(False)
        self.resume_requested.emit()
