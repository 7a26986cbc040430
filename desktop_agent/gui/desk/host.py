"""What the rooms use of the main window: :class:`Desk`, which the main window satisfies.

The window builds the rooms and passes itself; a room reaches the shared parts (client,
task runner, poller, commands, actions) and the other rooms through it, at the time it
needs them, so the rooms can be built in the order their widgets are laid out.

A room sees another room only as the face below (:class:`RunsFace`, :class:`DetailFace`,
...): what the other rooms use of it, and nothing else. So this module names no room, and
the rooms, which import it, never import each other: the window, which builds them, is
the only module that knows them all (the type checker holds each room to its face where
the window passes itself as a :class:`Desk`).
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtWidgets import QStatusBar, QTabWidget

from desktop_agent.client.api import Client
from desktop_agent.client.views import ModelChoice, RunRow, ToolInfo
from desktop_agent.domain import Approval, Run
from desktop_agent.gui.actions import Actions
from desktop_agent.gui.commands import RunCommands
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.gui.layout import WindowLayout
from desktop_agent.gui.models.runs import RunListModel
from desktop_agent.gui.notifier import Notifier
from desktop_agent.gui.poller import LivePoller
from desktop_agent.gui.supervisor import WorkerSupervisor
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.tray import TrayController
from desktop_agent.gui.widgets.inbox import ApprovalInbox
from desktop_agent.gui.widgets.run_detail import RunDetailPane
from desktop_agent.gui.widgets.runlist import RunListPanel
from desktop_agent.secrets import KeyStore


class RunsFace(Protocol):
    """What the other rooms use of the run list room (:mod:`~desktop_agent.gui.desk.runs`)."""

    runs_model: RunListModel
    run_list: RunListPanel
    selected: RunRow | None

    def select_when_listed(self, run_id: str) -> None:
        """Select ``run_id`` as soon as a poll lists it (a run just made or brought back)."""
        ...

    def unarchive(self, run_id: str, seq: int) -> None:
        """Bring ``run_id`` back from its archive (off the GUI thread), then open it."""
        ...


class DetailFace(Protocol):
    """What the other rooms use of the run detail room (:mod:`~desktop_agent.gui.desk.detail`)."""

    detail: RunDetailPane

    def show_run(self, row: RunRow | None) -> None:
        """Switch the pane to ``row`` (None: no run); its steps come with the next poll."""
        ...

    def want_step(self, run_id: str, seq: int, marks: list[str]) -> None:
        """Select step ``seq`` of ``run_id`` once shown and loaded (0: none), marking ``marks``."""
        ...

    def show_wanted_step(self) -> None:
        """Select the step asked for, if its run is shown and the step loaded."""
        ...


class ApprovalsFace(Protocol):
    """What the other rooms use of the approvals room (:mod:`~desktop_agent.gui.desk.approvals`)."""

    inbox: ApprovalInbox

    def visible(self) -> list[Approval]:
        """The pending approvals not decided here meanwhile."""
        ...

    def pending_for(self, run_id: str | None) -> list[Approval]:
        """The visible pending approvals of ``run_id`` (None: none)."""
        ...

    def dialog_open(self) -> bool:
        """Whether an approval dialog is open (notices wait while it is)."""
        ...


class ControlsFace(Protocol):
    """What the other rooms use of the controls room (:mod:`~desktop_agent.gui.desk.controls`)."""

    def update(self) -> None:
        """Enable the controls the selected run allows; its pending calls in its banner."""
        ...

    def update_compare(self) -> None:
        """Compare wants two selected runs; Run again and Export, one."""
        ...


class NewRunFace(Protocol):
    """What the other rooms use of the new-run room (:mod:`~desktop_agent.gui.desk.new_run`)."""

    tools: dict[str, ToolInfo]

    def open_new_run(self) -> NewRunDialog:
        """Open the new-run dialog (one dialog, emptied and filled anew at each opening)."""
        ...

    def offered_models(self) -> list[ModelChoice]:
        """The models a new run may use, as last read (retired ones left out, the demo last)."""
        ...

    def run_started(self, run: Run) -> None:
        """A run was made here (new, forked, the demo): close the dialog, select the run."""
        ...


class WorkerFace(Protocol):
    """What the other rooms use of the worker room (:mod:`~desktop_agent.gui.desk.worker`)."""

    supervisor: WorkerSupervisor


class AlertsFace(Protocol):
    """What the other rooms use of the alerts room (:mod:`~desktop_agent.gui.desk.alerts`)."""

    tray: TrayController
    notifier: Notifier


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

    # The rooms, read-only: the window's attributes hold the rooms themselves.

    @property
    def runs_room(self) -> RunsFace:
        """The run list, its selection, archived runs and tags."""
        ...

    @property
    def detail_room(self) -> DetailFace:
        """The selected run's pane."""
        ...

    @property
    def approvals_room(self) -> ApprovalsFace:
        """The approvals inbox and dialogs."""
        ...

    @property
    def controls_room(self) -> ControlsFace:
        """The run controls."""
        ...

    @property
    def new_run_room(self) -> NewRunFace:
        """The new-run dialog, the models and the tools."""
        ...

    @property
    def worker_room(self) -> WorkerFace:
        """The worker's supervision."""
        ...

    @property
    def alerts_room(self) -> AlertsFace:
        """The tray and the notices."""
        ...

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
