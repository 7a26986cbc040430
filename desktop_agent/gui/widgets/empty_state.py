"""What the run list shows instead of an empty table: a way in, or a way out of the filters."""

from __future__ import annotations

from enum import StrEnum

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop_agent.gui import resources

WELCOME = (
    "desktop-agent runs research agents over the files of a folder and asks you before it "
    "changes anything. The offline demo needs no API key and costs nothing."
)
NO_MATCH = "No run matches the search or the status filter."


class EmptyMode(StrEnum):
    """Why the list is empty."""

    NO_RUNS = "no_runs"
    NO_MATCH = "no_match"


class EmptyState(QWidget):
    """Centered text and buttons: try the demo or start a run; or clear the filters.

    Args:
        parent: owner.

    Signals:
        demo_requested: "Try the offline demo" was pressed.
        new_run_requested: "New run" was pressed.
        clear_filters_requested: "Clear filters" was pressed.
    """

    demo_requested = Signal()
    new_run_requested = Signal()
    clear_filters_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = EmptyMode.NO_RUNS
        self.text = QLabel(WELCOME, self)
        self.text.setWordWrap(True)
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # Wide enough for the welcome on one or two lines; a wrapped label left to its own
        # size hint wraps at a few words a line and is cut in a short list area.
        fm = self.fontMetrics()
        self.text.setMinimumWidth(
            min(fm.horizontalAdvance(WELCOME) // 2 + fm.averageCharWidth() * 4, 560)
        )
        self.text.setMaximumWidth(fm.horizontalAdvance(WELCOME) + fm.averageCharWidth() * 2)
        self.demo_button = QPushButton(resources.icon("resume"), "Try the offline demo", self)
        self.demo_button.setDefault(True)
        self.new_run_button = QPushButton(resources.icon("new-run"), "New run", self)
        self.clear_button = QPushButton("Clear filters", self)
        self.demo_button.clicked.connect(self.demo_requested)
        self.new_run_button.clicked.connect(self.new_run_requested)
        self.clear_button.clicked.connect(self.clear_filters_requested)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.demo_button, self.new_run_button, self.clear_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        line = QHBoxLayout()
        line.addStretch(1)
        line.addWidget(self.text, 100)
        line.addStretch(1)
        layout.addLayout(line)
        layout.addLayout(buttons)
        layout.addStretch(1)
        self.set_mode(EmptyMode.NO_RUNS)

    def set_mode(self, mode: EmptyMode) -> None:
        """Offer the way in (no runs at all) or the way out of the filters (none match)."""
        self.mode = mode
        first_use = mode == EmptyMode.NO_RUNS
        self.text.setText(WELCOME if first_use else NO_MATCH)
        self.demo_button.setVisible(first_use)
        self.new_run_button.setVisible(first_use)
        self.clear_button.setVisible(not first_use)

    def set_demo_busy(self, busy: bool) -> None:
        """While the demo is being set up, one press is enough."""
        self.demo_button.setEnabled(not busy)
        self.demo_button.setText("Starting the demo…" if busy else "Try the offline demo")
