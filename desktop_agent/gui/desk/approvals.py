"""The approvals room: the inbox, the approval dialogs, and the count everywhere it shows.

The poller brings the pending approvals; those decided here are hidden until the worker
applies the decision (:attr:`RunCommands.decided <desktop_agent.gui.commands.RunCommands>`).
The count shows in the Approvals tab, the toolbar's Approvals action and the window's
title; the selected run's pending calls show in its header's banner (through the controls
room). Nothing is ever decided blind: one call opens its dialog, several are confirmed
once in a list.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.domain import Approval, Run
from desktop_agent.domain.agents import agent_kind
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.gui import resources
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.models.approvals import ApprovalListModel, ApprovalRow
from desktop_agent.gui.widgets.inbox import ApprovalInbox


class ApprovalsRoom(QObject):
    """The pending approvals, the inbox that lists them, and their dialogs.

    Args:
        window: the main window.
        parent: the main window, as the owner of the widgets.

    Attributes:
        approvals_model: the inbox's rows.
        inbox: the Approvals tab.
        approvals: the pending approvals as last polled (decided ones included).
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.approvals_model = ApprovalListModel(parent)
        self.inbox = ApprovalInbox(self.approvals_model, parent)
        self.approvals: tuple[Approval, ...] = ()
        self._shown_pending = -1
        self.inbox.review_requested.connect(self.open_approval)
        self.inbox.approve_requested.connect(self._on_inbox_approve_requested)
        self.inbox.reject_requested.connect(self._on_inbox_reject_requested)
        window.acts["inbox"].triggered.connect(self.show_inbox)
        window.commands.decisions_changed.connect(self._on_commands_decisions_changed)

    def polled(self, approvals: tuple[Approval, ...]) -> None:
        """The pending approvals a poll read (before the notices: a notice offers Review)."""
        self.window.commands.decided &= {a.id for a in approvals}
        self.approvals = approvals

    def visible(self) -> list[Approval]:
        """The pending approvals not decided here meanwhile."""
        decided = self.window.commands.decided
        return [a for a in self.approvals if a.id not in decided]

    def pending_for(self, run_id: str | None) -> list[Approval]:
        """The visible pending approvals of ``run_id`` (None: none)."""
        if run_id is None:
            return []
        return [a for a in self.visible() if a.run_id == run_id]

    def show_pending(self) -> None:
        """List the visible approvals; their count in the tab, the toolbar and the title."""
        pending = self.visible()
        runs = self.window.runs_room.runs_model.rows()
        titles = {r.run.id: inbox_title(r.run) for r in runs}
        self.approvals_model.set_rows(
            ApprovalRow(a, titles.get(a.run_id, a.run_id)) for a in pending
        )
        n = len(pending)
        if n == self._shown_pending:
            return
        self._shown_pending = n
        side, action = self.window.side, self.window.acts["inbox"]
        index = side.indexOf(self.inbox)
        side.setTabText(index, f"Approvals ({n})" if n else "Approvals")
        side.setTabIcon(index, resources.badge_icon("inbox", n))
        action.setIcon(resources.badge_icon("inbox", n))
        action.setText(f"Approvals ({n})" if n else "Approvals")
        # The app's name last: the platform adds it to a title that does not end with it.
        waiting = f"{n} approval{'s' if n != 1 else ''} waiting — " if n else ""
        self.window.setWindowTitle(f"{waiting}desktop-agent")

    def recolor(self) -> None:
        """Draw the badges again (the palette changed)."""
        self._shown_pending = -1
        self.show_pending()

    @Slot()
    def show_inbox(self) -> None:
        """Show the Approvals tab with the keyboard in it (bringing the window up)."""
        self.window.side.setCurrentWidget(self.inbox)
        self.inbox.take_focus()
        if self.window.isHidden() or self.window.isMinimized():
            self.window.bring_up()

    # ------------------------------------------------------------------ dialogs

    @Slot(object)
    def open_approval(self, approval: Approval, of: int = 1) -> ApprovalDialog:
        """Open the approval dialog for ``approval`` (the first of ``of`` pending calls)."""
        row = self.window.runs_room.runs_model.get(approval.run_id)
        title = (row.run.title or row.run.goal) if row else approval.run_id
        position = f"1 of {of}" if of > 1 else ""
        tool = self.window.new_run_room.tools.get(approval.tool)
        return self.window.commands.open_approval(approval, title, tool, position)

    def dialog_open(self) -> bool:
        """Whether an approval dialog is open (notices wait while it is)."""
        dialog = self.window.commands.approval_dialog
        return dialog is not None and dialog.isVisible()

    @Slot(str, int)
    def open_step_approvals(self, run_id: str, seq: int) -> None:
        """Open the approval an approval step of the timeline recorded (read off-thread)."""
        row = self.window.runs_room.runs_model.get(run_id)
        title = (row.run.title or row.run.goal) if row else run_id
        tools = self.window.new_run_room.tools
        self.window.commands.open_step_approvals(run_id, seq, title, tools)

    @Slot(object)
    def _on_inbox_approve_requested(self, approvals: list[Approval]) -> None:
        if len(approvals) == 1:
            self.window.open_approval(approvals[0])
        else:
            self.window.commands.approve_many(approvals)

    @Slot(object)
    def _on_inbox_reject_requested(self, approvals: list[Approval]) -> None:
        if len(approvals) == 1:
            self.window.open_approval(approvals[0]).ask_reject()
        else:
            self.window.commands.reject_many(approvals)

    @Slot()
    def _on_commands_decisions_changed(self) -> None:
        self.show_pending()
        self.window.controls_room.update()


def inbox_title(run: Run) -> str:
    """The run as the inbox names it: another agent's runs say which agent asks."""
    title = run.title or run.goal
    try:
        kind = agent_kind(run.spec.agent)
    except InvalidInputError:
        return title
    if kind.foreign and kind.label not in title:
        return f"{kind.label} · {title}"
    return title
