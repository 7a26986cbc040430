"""What the rooms use of the main window: :class:`Desk`, which the main window satisfies.

The window builds the rooms and passes itself; a room reaches the shared parts (client,
task runner, poller, commands, actions) and the other rooms through it, at the time it
needs them, so the rooms can be built in the order their widgets are laid out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from PySide6.QtWidgets import QStatusBar, QTabWidget

from desktop_agent.client.api import Client
from desktop_agent.domain import Approval
from desktop_agent.gui.actions import Actions
from desktop_agent.gui.commands import RunCommands
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.layout import WindowLayout
from desktop_agent.gui.poller import LivePoller
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.secrets import KeyStore

if TYPE_CHECKING:
    from desktop_agent.gui.desk.alerts import AlertsRoom
    from desktop_agent.gui.desk.approvals import ApprovalsRoom
    from desktop_agent.gui.desk.controls import ControlsRoom
    from desktop_agent.gui.desk.detail import DetailRoom
    from desktop_agent.gui.desk.new_run import NewRunRoom
    from desktop_agent.gui.desk.runs import RunsRoom
    from desktop_agent.gui.desk.worker import WorkerRoom


class Desk(Protocol):
    """The main window as its rooms see it."""

    client: Client
    keys: KeyStore
    tasks: TaskRunner
    commands: RunCommands
    acts: Actions
    poller: LivePoller
    side: QTabWidget
    layout_memory: WindowLayout
    runs_room: RunsRoom
    detail_room: DetailRoom
    approvals_room: ApprovalsRoom
    controls_room: ControlsRoom
    new_run_room: NewRunRoom
    worker_room: WorkerRoom
    alerts_room: AlertsRoom

    @property
    def is_shut_down(self) -> bool:
        """Whether the window stopped its polling, timers and tasks."""
        ...

    def statusBar(self) -> QStatusBar:
        """The window's status bar."""
        ...

    def setWindowTitle(self, title: str, /) -> None:
        """Set the window's title."""
        ...

    def isHidden(self) -> bool:
        """Whether the window is hidden (in the tray)."""
        ...

    def isMinimized(self) -> bool:
        """Whether the window is minimized."""
        ...

    def hide(self) -> None:
        """Hide the window."""
        ...

    def close(self) -> bool:
        """Close the window (its close event decides what that means)."""
        ...

    def bring_up(self) -> None:
        """Show, raise and activate the window."""
        ...

    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work (without blocking the window)."""
        ...

    def select_run(self, run_id: str) -> bool:
        """Select a run in the list (showing the Runs tab); False if it is not listed."""
        ...

    def open_step(self, run_id: str, seq: int, marks: object = ()) -> None:
        """Select ``run_id`` with step ``seq`` selected in its timeline (0: the run only)."""
        ...

    def open_approval(self, approval: Approval, of: int = 1) -> ApprovalDialog:
        """Open the approval dialog for ``approval`` (the first of ``of`` pending calls)."""
        ...

    def shutdown(self) -> None:
        """Stop polling, timers and background tasks (the worker keeps running)."""
        ...
