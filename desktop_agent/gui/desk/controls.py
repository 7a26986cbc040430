"""The controls room: the run controls, enabled as the selected run allows, and their outcome.

Pause, resume, retry, cancel, stop, steer, answer, extend the budget and resolve go to
:class:`~desktop_agent.gui.commands.RunCommands` (which asks what it must, then writes a
command row off the GUI thread); approve, edit and reject open the first pending call's
dialog. What a command reports shows in the status bar, and the poller reads at once.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.gui.actions import APPROVAL_CONTROLS, RUN_CONTROLS
from desktop_agent.gui.controls import Control, allowed_controls
from desktop_agent.gui.desk.host import Desk

MODEL_NOTICE_MS = 30_000
"""How long the status bar says that a run just started uses a deprecated model."""


class ControlsRoom(QObject):
    """The run controls of the toolbar, the menus and the header, and commands' outcomes.

    Args:
        window: the main window.
        parent: the main window.
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        for control in (*RUN_CONTROLS, *APPROVAL_CONTROLS):
            window.acts[control].triggered.connect(self._control_slot(control))
        window.commands.done.connect(self._on_commands_done)
        window.commands.failed.connect(self._on_commands_failed)
        window.commands.model_notice.connect(self._on_commands_model_notice)

    def update(self) -> None:
        """Enable the controls the selected run allows; its pending calls in its banner."""
        w = self.window
        selected = w.runs_room.selected
        run = selected.run if selected else None
        pending = w.approvals_room.pending_for(run.id if run else None)
        w.detail_room.detail.show_pending(pending)  # the header's banner: never popped up
        allowed = allowed_controls(run, len(pending))
        for control in (*RUN_CONTROLS, *APPROVAL_CONTROLS):
            w.acts[control].setEnabled(control in allowed)
        self.update_compare()

    def update_compare(self) -> None:
        """Compare wants two selected runs; Run again and Export, one."""
        w = self.window
        w.acts["compare"].setEnabled(len(w.runs_room.run_list.selected_run_ids()) == 2)
        w.acts["run_again"].setEnabled(w.runs_room.selected is not None)
        w.acts["export"].setEnabled(w.runs_room.selected is not None)

    def _control_slot(self, control: Control) -> Callable[[], None]:
        def triggered() -> None:
            self.run_control(control)

        return triggered

    def run_control(self, control: Control) -> None:
        """Apply ``control`` to the selected run (if it applies now)."""
        w = self.window
        selected = w.runs_room.selected
        if selected is None:
            return
        run = selected.run
        pending = w.approvals_room.pending_for(run.id)
        if control not in allowed_controls(run, len(pending)):
            return
        c = w.commands
        handlers: dict[Control, Callable[[], object]] = {
            Control.PAUSE: lambda: c.pause(run),
            Control.RESUME: lambda: c.resume(run),
            Control.RETRY: lambda: c.retry(run),
            Control.CANCEL: lambda: c.cancel(run),
            Control.STOP: lambda: c.stop(run),
            Control.STEER: lambda: c.steer(run),
            Control.ANSWER: lambda: c.answer(run),
            Control.EXTEND_BUDGET: lambda: c.extend_budget(run),
            Control.RESOLVE: lambda: c.resolve(run),
            # Never blind: each opens the first pending call; the decision is made there.
            Control.APPROVE: lambda: w.open_approval(pending[0], len(pending)),
            Control.EDIT: lambda: w.open_approval(pending[0], len(pending)),
            Control.REJECT: lambda: w.open_approval(pending[0], len(pending)).ask_reject(),
        }
        handlers[control]()

    # ------------------------------------------------------------------ outcomes

    @Slot(str)
    def _on_commands_done(self, message: str) -> None:
        self.window.statusBar().showMessage(message, 6000)
        self.window.poller.refresh()

    @Slot(str)
    def _on_commands_model_notice(self, message: str) -> None:
        self.window.statusBar().showMessage(message, MODEL_NOTICE_MS)

    @Slot(str)
    def _on_commands_failed(self, message: str) -> None:
        self.window.show_error(message)
        self.window.poller.refresh()
