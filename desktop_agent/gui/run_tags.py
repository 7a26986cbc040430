"""Tags on runs, in the app: the run list's "Tags…" action and its prompt.

The prompt shows the run's tags (``q3 urgent``); what the analyst leaves there becomes the
run's tags, written off the GUI thread (:func:`desktop_agent.client.annotations.set_tags`).
A bad tag is refused with the client's message and nothing changes. The run list shows
the change at the next poll: a change of tags moves the run's ``updated_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from desktop_agent.client.annotations import TagChange, set_tags
from desktop_agent.client.api import Client
from desktop_agent.domain.errors import plain_error
from desktop_agent.domain.tags import split_tags
from desktop_agent.gui.dialogs.prompts import TextPrompt
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.widgets.runlist import RunListPanel


class TagsPrompt(TextPrompt):
    """The run's tags, separated by spaces or commas; empty takes every tag off."""

    def __init__(self, run_id: str, tags: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(
            f"Tags of run {run_id}",
            "Tags, separated by spaces or commas: letters, digits, '-', '_', '.' and ':' "
            "(e.g. q3 client:acme). Leave it empty to take every tag off.",
            "Save tags",
            parent,
        )
        self.run_id = run_id
        self.text.setPlainText(" ".join(tags))
        self.text.setMinimumSize(380, 60)
        self.ok.setEnabled(True)

    def typed_text(self) -> bool:
        """Tags changed are what closing without saving would lose."""
        return False

    @Slot()
    def _on_text_text_changed(self) -> None:
        self.ok.setEnabled(True)  # empty is a choice too: no tags

    @Slot()
    def _on_buttons_accepted(self) -> None:
        self.submitted.emit(self.text.toPlainText().strip())
        self.accept()


class TaggingWindow(Protocol):
    """What :class:`RunTagging` needs of the main window."""

    client: Client
    tasks: TaskRunner
    run_list: RunListPanel

    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work."""
        ...


class RunTagging(QObject):
    """The run list's "Tags…" action (context menu), its prompt, and the tags written.

    Args:
        window: the main window (its client, task runner, run list and errors).
        saved: called on the GUI thread with what changed (the window polls at once).
    """

    def __init__(
        self, window: TaggingWindow, saved: Callable[[TagChange], None] | None = None
    ) -> None:
        super().__init__(window.run_list)
        self.window = window
        self.saved = saved
        self.prompt: TagsPrompt | None = None
        self.action = QAction("Tags…", window.run_list.table)
        self.action.setToolTip("Label the run (tag:NAME in the search box finds it)")
        self.action.triggered.connect(self._on_action_triggered)
        window.run_list.table.addAction(self.action)

    @Slot()
    def _on_action_triggered(self) -> None:
        run_id = self.window.run_list.current_run_id()
        if run_id is None:
            self.window.show_error("Select a run in the list to tag it.")
            return
        row = self.window.run_list.model.get(run_id)
        self.open_prompt(run_id, row.run.tags if row is not None else ())

    def open_prompt(self, run_id: str, tags: tuple[str, ...]) -> TagsPrompt:
        """The prompt for ``run_id``'s tags (one at a time)."""
        if self.prompt is not None:
            self.prompt.close()
            self.prompt.deleteLater()
        prompt = TagsPrompt(run_id, tags, self.window.run_list)
        prompt.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        prompt.submitted.connect(lambda text: self.save(run_id, text))
        self.prompt = prompt
        prompt.open()
        return prompt

    def save(self, run_id: str, text: str) -> None:
        """Give ``run_id`` exactly the tags of ``text``, off the GUI thread."""
        client = self.window.client
        self.window.tasks.submit(
            lambda: set_tags(client, run_id, split_tags(text)),
            self._on_saved,
            lambda exc: self.window.show_error(plain_error(exc)),
        )

    def _on_saved(self, change: TagChange) -> None:
        if self.saved is not None:
            self.saved(change)
