"""The new-run room: the New run dialog, the models and tools it offers, the offline demo.

One dialog, emptied and filled anew at each opening (see ``NewRunDialog.refill``). It
offers the model catalogue the workers stored, read off the GUI thread (until then, the
one shipped with the program), and the tools, MCP ones included as a worker last listed
them. The run is created off the GUI thread; once it exists, it is selected.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.client.messages import plain_error
from desktop_agent.client.models import ModelList
from desktop_agent.client.views import (
    ModelChoice,
    ToolInfo,
    default_tool_names,
    model_choices,
    tool_catalog,
)
from desktop_agent.client.workspaces import start_demo_run
from desktop_agent.domain import Run
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.new_run import NewRunDialog, NewRunRequest
from desktop_agent.gui.widgets.forecast import estimate_with


class NewRunRoom(QObject):
    """New runs: the dialog, what it offers, and the run selected once made.

    Args:
        window: the main window.
        parent: the main window, as the dialog's parent.

    Attributes:
        tools: every tool new runs may use, by name (the approval dialogs' schemas too).
        new_run_dialog: the dialog, once opened.
        model_list: the catalogue as last read (None: not yet; the shipped one).
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.tools: dict[str, ToolInfo] = {t.name: t for t in tool_catalog(window.client)}
        self.new_run_dialog: NewRunDialog | None = None
        self.model_list: ModelList | None = None
        window.acts["new_run"].triggered.connect(self._on_new_run_triggered)

    @Slot()
    def _on_new_run_triggered(self) -> None:
        self.open_new_run()

    def open_new_run(self) -> NewRunDialog:
        """Open the new-run dialog (one dialog, emptied and filled anew at each opening)."""
        client = self.window.client
        # MCP tools a worker listed since the app started (a small local file, no SQL).
        client.reload_mcp_tools()
        self.tools = {t.name: t for t in tool_catalog(client)}
        models, tools = self.offered_models(), list(self.tools.values())
        settings, defaults = client.settings, default_tool_names(client)
        dialog = self.new_run_dialog
        if dialog is None:
            dialog = NewRunDialog(models, tools, settings, defaults, self.parent_window)
            dialog.start_requested.connect(self.start_requested)
            dialog.set_forecaster(self.window.tasks.submit, estimate_with(client))
            self.new_run_dialog = dialog
        else:  # never one built per opening: see NewRunDialog.refill
            dialog.refill(models, tools, settings, defaults)
        dialog.open()

        def update(choices: list[ModelChoice]) -> None:
            if self.new_run_dialog is dialog:
                dialog.set_models(choices)

        self.read_models(update)
        return dialog

    def offered_models(self) -> list[ModelChoice]:
        """The models a new run may use, as last read (retired ones left out, the demo last)."""
        return model_choices(self.model_list)

    def read_models(self, then: Callable[[list[ModelChoice]], None]) -> None:
        """Read the catalogue the workers stored, off the GUI thread; ``then`` gets the models.

        Until it is read, dialogs offer the catalogue shipped with the program; a reading
        that fails leaves them so.
        """
        client = self.window.client

        def read() -> ModelList:
            return client.models()

        def done(models: ModelList) -> None:
            self.model_list = models
            then(model_choices(models))

        self.window.tasks.submit(read, done, _ignore_failure)

    @Slot(object)
    def start_requested(self, request: NewRunRequest) -> None:
        """Create the run the dialog asks for (off the GUI thread; a refusal shows in it)."""
        dialog = self.new_run_dialog

        def failed(exc: Exception) -> None:
            if dialog is not None:
                dialog.show_error(plain_error(exc))

        self.window.commands.start_run(request, failed)

    @Slot(object)
    def run_started(self, run: Run) -> None:
        """A run was made here (new, forked, the demo): close the dialog, select the run."""
        if self.new_run_dialog is not None:
            self.new_run_dialog.accept()
        self.window.runs_room.select_when_listed(run.id)

    @Slot()
    def start_demo(self) -> None:
        """Start the offline demo on the sample workspace, and select it."""
        empty = self.window.runs_room.run_list.empty
        empty.set_demo_busy(True)
        client = self.window.client

        def failed(exc: Exception) -> None:
            empty.set_demo_busy(False)
            self.window.show_error(plain_error(exc))

        def started(run: Run) -> None:
            empty.set_demo_busy(False)
            self.window.statusBar().showMessage(f"Started the offline demo (run {run.id})", 6000)
            self.run_started(run)

        self.window.tasks.submit(lambda: start_demo_run(client), started, failed)


def _ignore_failure(_exc: Exception) -> None:
    """A background read whose failure changes nothing the analyst sees."""
