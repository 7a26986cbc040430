"""The window's notices: which status changes are told, how often, and where a click leads.

Each poll's runs are diffed against the last (:func:`~desktop_agent.gui.notify.transitions`,
the first poll being the baseline); stalls are looked for once a second. What is worth
telling goes through a :class:`~desktop_agent.gui.notify.NoticeGate` (coalesced per kind,
rate-limited, held while the analyst decides in a dialog) to the
:class:`~desktop_agent.gui.notifier.Notifier`. A click on a notice about a run opens it;
about its one pending approval, that approval's dialog; about several runs, the inbox
showing only theirs. The tray icon counts the runs that need the analyst.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QApplication, QTabWidget, QWidget

from desktop_agent.client.views import RunRow, pending_for
from desktop_agent.config import Settings
from desktop_agent.domain import Approval
from desktop_agent.gui import notify, theme
from desktop_agent.gui.models.runs import RunListModel
from desktop_agent.gui.notifier import Notifier
from desktop_agent.gui.tray import TrayController
from desktop_agent.gui.widgets.inbox import ApprovalInbox
from desktop_agent.gui.widgets.runlist import RunListPanel


class NoticeDesk(QObject):
    """Turns the window's polls into notices, and a click on one into the work.

    Args:
        window: the main window (what a click brings up).
        settings: the app's settings, read anew at each poll (which notices are wanted).
        notifier: where notices go (tray, desktop notifications, window).
        tray: the tray icon (its count).
        runs: the run list's model.
        side: the tabs on the left; ``run_list`` and ``inbox`` are two of them.
        run_list: the run list.
        inbox: the approvals inbox.
        approvals: the pending approvals the window shows.
        bring_up: shows and raises the window.
        select_run: selects a run in the list (False: not listed).
        open_approval: opens an approval's dialog.
        dialog_open: whether an approval dialog is open (notices wait while it is).
    """

    def __init__(
        self,
        window: QWidget,
        settings: Callable[[], Settings],
        notifier: Notifier,
        tray: TrayController,
        runs: RunListModel,
        side: QTabWidget,
        run_list: RunListPanel,
        inbox: ApprovalInbox,
        approvals: Callable[[], list[Approval]],
        bring_up: Callable[[], None],
        select_run: Callable[[str], bool],
        open_approval: Callable[[Approval], object],
        dialog_open: Callable[[], bool],
    ) -> None:
        super().__init__(window)
        self.settings, self.notifier, self.tray, self.runs = settings, notifier, tray, runs
        self.side, self.run_list, self.inbox = side, run_list, inbox
        self.approvals, self.bring_up = approvals, bring_up
        self.select_run, self.open_approval, self.dialog_open = (
            select_run,
            open_approval,
            dialog_open,
        )
        self.gate = notify.NoticeGate()
        self.states: dict[str, notify.State] | None = None
        """Each listed run's state at the last poll (None before the first: the baseline)."""
        self.stalled: dict[str, int] = {}
        notifier.open_requested.connect(self.open_run)
        notifier.review_requested.connect(self.open_run)
        notifier.open_many_requested.connect(self.open_many)

    def polled(self, rows: Iterable[RunRow], *, full: bool) -> None:
        """Tell what changed since the last poll (``full``: ``rows`` are every run listed)."""
        rows = list(rows)
        if self.states is None:  # the first poll is the baseline: no notices for old news
            self.states = {r.run.id: notify.state_of(r.run) for r in rows}
            return
        s = self.settings()
        wanted = {
            notify.NoticeKind.NEEDS_USER: s.notify_needs_user,
            notify.NoticeKind.FINISHED: s.notify_finished,
            notify.NoticeKind.FAILED: s.notify_failed,
        }
        changed = notify.transitions(self.states, rows)
        self.tell([n for n in changed if wanted[n.kind]])
        if full:  # runs gone from the list (archived, deleted) are forgotten
            self.states = {}
        for r in rows:
            self.states[r.run.id] = notify.state_of(r.run)
        self.tray.set_count(sum(1 for r in self.runs.rows() if theme.needs_user(r.run)))

    def tick(self) -> None:
        """Once a second: stalled runs, and notices whose wait is over."""
        after_s = self.settings().notify_stall_minutes * 60
        self.tell(notify.stalls(self.runs.rows(), time.time(), after_s, self.stalled))

    def tell(self, notices: list[notify.Notice]) -> None:
        """Offer ``notices`` to the gate (rate, coalescing, no balloon over a dialog)."""
        busy = QApplication.activeModalWidget() is not None or self.dialog_open()
        for notice in self.gate.offer(notices, time.time(), busy=busy):
            pending = pending_for(self.approvals(), notice.run_id)
            single = notice.kind == notify.NoticeKind.NEEDS_USER and len(pending) == 1
            self.notifier.notify(notice, single_approval=single and len(notice.runs) == 1)

    @Slot(str)
    def open_run(self, run_id: str) -> None:
        """A notice about a run opens it; about its one pending approval, that dialog."""
        self.bring_up()
        if not run_id:
            return
        self.side.setCurrentWidget(self.run_list)
        self.select_run(run_id)
        pending = pending_for(self.approvals(), run_id)
        if len(pending) == 1:
            self.open_approval(pending[0])

    @Slot(object)
    def open_many(self, run_ids: tuple[str, ...]) -> None:
        """A notice about several runs: their approvals in the inbox, else the runs."""
        self.bring_up()
        wanted = set(run_ids)
        if any(a.run_id in wanted for a in self.approvals()):
            self.side.setCurrentWidget(self.inbox)
            self.inbox.show_only(wanted)
            self.inbox.take_focus()
            return
        self.side.setCurrentWidget(self.run_list)
        self.run_list.select_runs([r for r in run_ids if self.runs.get(r) is not None])
        self.run_list.table.setFocus()
