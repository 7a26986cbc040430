"""Notes on steps, in the app: the timeline's "Note on this step…" action and its prompt.

A note is the analyst's, never the agent's (a message to the agent is Steer): it is
written off the GUI thread (:func:`desktop_agent.client.annotations.add_note`), marks the
step's row with ✎ and shows in the inspector once the poll has read it back (a note
moves the run's ``updated_at``, so the selected run's steps are read again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction

from desktop_agent.client.annotations import add_note
from desktop_agent.client.api import Client
from desktop_agent.domain.errors import plain_error
from desktop_agent.domain.tags import StepNote
from desktop_agent.gui.dialogs.prompts import TextPrompt
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.widgets.run_detail import RunDetailPane


class NotingWindow(Protocol):
    """What :class:`StepNoting` needs of the main window."""

    client: Client
    tasks: TaskRunner
    detail: RunDetailPane

    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work."""
        ...


class StepNoting(QObject):
    """The timeline's "Note on this step…" action (context menu), its prompt, the note.

    Args:
        window: the main window (its client, task runner, run detail and errors).
        written: called on the GUI thread with the note once stored.
    """

    def __init__(
        self, window: NotingWindow, written: Callable[[StepNote], None] | None = None
    ) -> None:
        super().__init__(window.detail)
        self.window = window
        self.written = written
        self.prompt: TextPrompt | None = None
        self.action = QAction("Note on this step…", window.detail.timeline)
        self.action.setToolTip("Write your own note on the step (never sent to the agent)")
        self.action.triggered.connect(self._on_action_triggered)
        window.detail.timeline.addAction(self.action)

    @Slot()
    def _on_action_triggered(self) -> None:
        entry = self.window.detail.current_entry()
        if entry is None:
            self.window.show_error("Select a step in the timeline to write a note on it.")
            return
        self.open_prompt(entry.run_id, entry.seq)

    def open_prompt(self, run_id: str, seq: int) -> TextPrompt:
        """The prompt for a note on step ``seq`` of the shown run (one at a time)."""
        row = self.window.detail.row
        shown = row.run.id if row is not None else run_id  # a fork's shared step: its own run
        if self.prompt is not None:
            self.prompt.close()
            self.prompt.deleteLater()
        prompt = TextPrompt(
            f"Note on step {seq}",
            "Your note on this step: shown under it, in exports and found by search. It is "
            "yours alone: the agent never reads it (Steer sends the agent a message).",
            "Save note",
            self.window.detail,
        )
        prompt.submitted.connect(lambda text: self.save(shown, seq, text))
        self.prompt = prompt
        prompt.open()
        return prompt

    def save(self, run_id: str, seq: int, text: str) -> None:
        """Write the note off the GUI thread."""
        client = self.window.client
        self.window.tasks.submit(
            lambda: add_note(client, run_id, seq, text),
            self._on_written,
            lambda exc: self.window.show_error(plain_error(exc)),
        )

    def _on_written(self, note: StepNote) -> None:
        if self.written is not None:
            self.written(note)
