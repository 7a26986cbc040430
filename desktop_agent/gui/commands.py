"""Run commands from the window: confirmations and prompts, then a command row, off-thread.

Every command goes through the client (a row in the database that the worker applies at
the next step boundary); the write runs on the task pool so the window never waits on a
locked database. Deciding several approvals at once is in :mod:`.approval_batch`, the
monthly cap dialog's writes in :mod:`.cap_flow`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QWidget

from desktop_agent.client import cap
from desktop_agent.client.api import Client
from desktop_agent.client.cap import CapReport
from desktop_agent.client.checks import CheckResult, check_arguments, final_check
from desktop_agent.client.messages import note_delivery, plain_error
from desktop_agent.client.views import ToolInfo, model_notice
from desktop_agent.domain import JSON, Approval, ApprovalState, Run
from desktop_agent.gui.approval_batch import (
    BatchOutcome,
    batch_question,
    call_label,
    decide_each,
)
from desktop_agent.gui.cap_flow import wire_cap_dialog
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.cap import CapDialog
from desktop_agent.gui.dialogs.new_run import NewRunRequest
from desktop_agent.gui.dialogs.prompts import BudgetDialog, MessageDialog, ResolveDialog, TextPrompt
from desktop_agent.gui.diffview import DiskFile, read_target, written_file
from desktop_agent.gui.tasks import TaskRunner

__all__ = ["BatchOutcome", "RunCommands", "batch_question", "call_label"]


class RunCommands(QObject):
    """Sends the analyst's commands.

    Args:
        client: the client.
        tasks: where writes run.
        window: parent of confirmations and prompts.

    Signals:
        done: a command was queued (a message for the status bar).
        failed: a command was refused or failed (the message).
        run_started: a new run was created (the :class:`Run`).
        model_notice: the new run's model is deprecated (the notice, for the status bar).
        decisions_changed: approvals were decided here (hide them until the worker applies).
    """

    done = Signal(str)
    failed = Signal(str)
    run_started = Signal(object)
    model_notice = Signal(str)
    decisions_changed = Signal()

    def __init__(self, client: Client, tasks: TaskRunner, window: QWidget) -> None:
        super().__init__(window)
        self.client = client
        self.tasks = tasks
        self.window = window
        self.dialog: QWidget | None = None
        """The confirmation or prompt opened last (tests drive it)."""
        self.decided: set[str] = set()
        """Approvals decided here whose decision the worker has not applied yet."""
        self.approval_dialog: ApprovalDialog | None = None
        self.last_batch: BatchOutcome | None = None
        """What the last decision on several approvals did (tests read it)."""

    def _send(
        self, fn: Callable[[], Any], message: str, then: Callable[[Any], None] | None = None
    ) -> None:
        def ok(result: Any) -> None:
            self.done.emit(message)
            if then is not None:
                then(result)

        self.tasks.submit(fn, ok, lambda exc: self.failed.emit(plain_error(exc)))

    # ------------------------------------------------------------------ simple

    def pause(self, run: Run) -> None:
        """Pause at the next step boundary."""
        self._send(
            lambda: self.client.pause(run.id),
            "Pause requested: it takes effect at the next step boundary",
        )

    def resume(self, run: Run) -> None:
        """Resume (or wake) the run."""
        self._send(lambda: self.client.resume(run.id), "Resume requested")

    def retry(self, run: Run) -> None:
        """Retry a failed run from the failed step."""
        self._send(lambda: self.client.resume(run.id), "Retrying from the failed step")

    def approve(
        self,
        approval: Approval,
        arguments: JSON = None,
        note: str = "approved in the app",
        dialog: ApprovalDialog | None = None,
    ) -> None:
        """Approve as proposed, or with edited arguments (only the edited call runs).

        The client records the decision only if it can take effect (an edit that would
        not run, or an approval decided meanwhile, is refused): from ``dialog``, the dialog
        closes once it is recorded and shows the refusal otherwise.
        """
        message = "Approved with edits" if arguments is not None else "Approved"
        self._decide(
            approval,
            lambda: self.client.approve(approval.id, arguments, note),
            f"{message}: {approval.tool}",
            dialog,
        )

    def reject(self, approval: Approval, reason: str, dialog: ApprovalDialog | None = None) -> None:
        """Reject with a reason the agent reads."""
        self._decide(
            approval,
            lambda: self.client.reject(approval.id, reason),
            f"Rejected: {approval.tool}",
            dialog,
        )

    def _decide(
        self,
        approval: Approval,
        record: Callable[[], Any],
        message: str,
        dialog: ApprovalDialog | None,
    ) -> None:
        """Record a decision off-thread; hide the approval meanwhile, show it again if refused."""
        self.decided.add(approval.id)
        self.decisions_changed.emit()

        def recorded(_result: Any) -> None:
            self.done.emit(message)
            if dialog is not None and self.approval_dialog is dialog:
                dialog.accept()

        def refused(exc: Exception) -> None:
            self.decided.discard(approval.id)
            self.decisions_changed.emit()
            if dialog is not None and self.approval_dialog is dialog:
                dialog.show_error(plain_error(exc))
            else:
                self.failed.emit(plain_error(exc))

        self.tasks.submit(record, recorded, refused)

    def start_run(self, request: NewRunRequest, on_error: Callable[[Exception], None]) -> None:
        """Create a run from the new-run dialog's request."""
        client = self.client

        def create() -> tuple[Run, str]:
            run = client.start_run(
                request.goal,
                model=request.model,
                workspace=request.workspace,
                tools=list(request.tools),
                approval_overrides=dict(request.approval_overrides),
                max_cost_usd=request.max_cost_usd,
                max_steps=request.max_steps,
                max_time_s=request.max_time_s,
                max_tokens_budget=request.max_tokens_budget,
                use_defaults=False,
                forked_from=request.forked_from,
                effort=request.effort,
                thinking_budget=request.thinking_budget,
                economy=request.economy,
                attachments=request.attachments,
                agent=request.agent or None,
                **request.server_tools.options(),
            )
            return run, model_notice(client)

        def created(made: tuple[Run, str]) -> None:
            run, notice = made
            self.done.emit(f"Started run {run.id}")
            self.run_started.emit(run)
            if notice:
                self.model_notice.emit(f"Started run {run.id} · Note: {notice}")

        self.tasks.submit(create, created, on_error)

    def check(self, approval: Approval, arguments: JSON, dialog: ApprovalDialog) -> None:
        """Run the tool's check of ``arguments`` off-thread; show it in ``dialog`` if open."""
        client = self.client

        def show(result: CheckResult) -> None:
            if self.approval_dialog is dialog:
                dialog.show_check(result, arguments=arguments)

        self.tasks.submit(lambda: check_arguments(client, approval, arguments), show, _ignore)

    def final_check(self, approval: Approval, dialog: ApprovalDialog) -> None:
        """The worker's check before a decided call ran, if it did."""
        client = self.client

        def show(result: CheckResult | None) -> None:
            if self.approval_dialog is dialog:
                dialog.show_check(result, final=True)

        self.tasks.submit(lambda: final_check(client, approval), show, _ignore)

    # ------------------------------------------------------------------ with a dialog

    def cancel(self, run: Run) -> None:
        """Ask, then cancel (interrupting a model call in flight)."""
        self._confirm(
            "Cancel the run?",
            f"Cancel “{run.title or run.goal}”?\n\nA model call in flight is interrupted and a "
            "partial report is written to the workspace. A cancelled run cannot be resumed.",
            "cancel",
            "Cancel run",
            lambda: self._send(lambda: self.client.cancel(run.id), "Cancel requested"),
        )

    def stop(self, run: Run) -> None:
        """Ask, then stop gracefully with a partial report."""
        self._confirm(
            "Stop the run?",
            "Stop at the next step boundary and write a partial report of what was found?",
            "stop",
            "Stop with report",
            lambda: self._send(lambda: self.client.stop(run.id), "Stop requested"),
        )

    def _confirm(
        self, title: str, text: str, icon: str, confirm: str, then: Callable[[], None]
    ) -> None:
        """Ask ``text``, with "Keep running" as the way out; ``then`` on confirmation."""
        box = MessageDialog(
            title, text, icon, confirm=confirm, cancel="Keep running", parent=self.window
        )
        box.confirmed.connect(then)
        self.dialog = box
        box.open()

    def _prompt(self, title: str, text: str, ok: str, then: Callable[[str], None]) -> TextPrompt:
        prompt = TextPrompt(title, text, ok, self.window)
        prompt.submitted.connect(then)
        self.dialog = prompt
        prompt.open()
        return prompt

    def steer(self, run: Run) -> None:
        """Send the agent a note, read at the next step boundary (or when the run goes on)."""
        when = note_delivery(run)
        queued = "Note queued; " + (when or "delivered at the agent's next step")
        self._prompt(
            "Steer the agent",
            "Your note is added to the conversation before the agent's next step"
            + (f": {when}." if when else "."),
            "Send note",
            lambda text: self._send(lambda: self.client.steer(run.id, text), queued),
        )

    def answer(self, run: Run) -> None:
        """Answer the agent's question."""
        self._prompt(
            "Answer the agent",
            run.status_message or "The agent asked you a question.",
            "Send answer",
            lambda text: self._send(lambda: self.client.answer(run.id, text), "Answer sent"),
        )

    def reject_with_reason(self, approval: Approval) -> None:
        """Ask for a reason, then reject."""
        self._prompt(
            "Reject the call",
            f"Why do you reject {approval.tool}? The agent reads your reason.",
            "Reject",
            lambda reason: self.reject(approval, reason),
        )

    def extend_budget(self, run: Run) -> None:
        """Ask how much to add, then extend; for a run the monthly cap holds, the cap dialog.

        Whether the cap holds the run is read off the GUI thread first (its last step).
        """

        def read() -> CapReport | None:
            return cap.report(self.client) if self.client.waits_for_monthly_cap(run) else None

        def opened(report: CapReport | None) -> None:
            if report is not None:
                self.open_cap_dialog(report)
            else:
                self._open_budget_dialog(run)

        self.tasks.submit(read, opened, lambda exc: self.failed.emit(plain_error(exc)))

    def raise_cap(self) -> None:
        """Open the cap dialog (this month, the cap, the runs it holds)."""

        def opened(report: CapReport) -> None:
            self.open_cap_dialog(report)

        self.tasks.submit(
            lambda: cap.report(self.client), opened, lambda exc: self.failed.emit(plain_error(exc))
        )

    def open_cap_dialog(self, report: CapReport) -> CapDialog:
        """Show ``report`` with a new cap to save, then the resume of the held runs."""
        dialog = CapDialog(report, self.window)
        wire_cap_dialog(dialog, self.client, self.tasks, self.done.emit, self.failed.emit)
        self.dialog = dialog
        dialog.open()
        return dialog

    def _open_budget_dialog(self, run: Run) -> None:
        dialog = BudgetDialog(self.window)

        def submitted(cost: float, steps: int, time_s: float, tokens: int) -> None:
            self._send(
                lambda: self.client.extend_budget(
                    run.id, cost_usd=cost, steps=steps, time_s=time_s, tokens=tokens
                ),
                "Budget extended",
            )

        dialog.submitted.connect(submitted)
        self.dialog = dialog
        dialog.open()

    def resolve(self, run: Run) -> None:
        """Ask what to do with a step in doubt, then send the decision."""
        dialog = ResolveDialog(run.status_message, self.window)
        dialog.submitted.connect(
            lambda action: self._send(
                lambda: self.client.resolve(run.id, action), f"Decision sent: {action}"
            )
        )
        self.dialog = dialog
        dialog.open()

    # ------------------------------------------------------------------ approval dialog

    def open_approval(
        self, approval: Approval, run_title: str, tool: ToolInfo | None, position: str = ""
    ) -> ApprovalDialog:
        """Open the approval dialog (replacing one already open).

        ``position`` says where the call stands among its run's pending calls (``1 of 3``).
        """
        old = self.approval_dialog
        if old is not None:
            old.close()
            if old.isVisible():  # it holds an edit: first the analyst says whether to drop it
                old.raise_()
                return old
        effect = tool.effect.value if tool and tool.effect else ""
        dialog = ApprovalDialog(
            approval, run_title, tool.input_schema if tool else {}, effect, self.window, position
        )
        dialog.approve_requested.connect(self._on_approval_dialog_approve_requested)
        dialog.reject_requested.connect(self._on_approval_dialog_reject_requested)
        dialog.check_requested.connect(self._on_approval_dialog_check_requested)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(self._on_approval_dialog_destroyed)
        self.approval_dialog = dialog
        dialog.show()
        if approval.state == ApprovalState.PENDING:
            self.check(approval, approval.arguments, dialog)
        else:
            self.final_check(approval, dialog)
        self.read_disk(approval, dialog)
        return dialog

    def read_disk(self, approval: Approval, dialog: ApprovalDialog) -> None:
        """Read the file a write would replace, off-thread, and show the diff in ``dialog``."""
        written = written_file(approval.tool, approval.arguments)
        if written is None:
            return
        client, rel = self.client, written[0]

        def read() -> DiskFile:
            return read_target(Path(client.run(approval.run_id).workspace), rel)

        def show(disk: DiskFile) -> None:
            if self.approval_dialog is dialog:
                dialog.show_disk(disk)

        def failed(exc: Exception) -> None:
            show(DiskFile(rel, None, plain_error(exc)))

        self.tasks.submit(read, show, failed)

    # ------------------------------------------------------------------ several approvals

    def approve_many(self, approvals: Sequence[Approval]) -> None:
        """Ask once, listing the calls, then approve each as proposed."""
        chosen = list(approvals)
        box = MessageDialog(
            "Approve several calls?",
            batch_question("Approve", chosen)
            + "\n\nEach runs as the agent proposed it. Review one (Return) to edit it first.",
            "approve",
            confirm=f"Approve {len(chosen)}",
            cancel="Back",
            parent=self.window,
        )
        box.confirmed.connect(
            lambda: self._decide_many(
                chosen, "Approved", lambda a: self.client.approve(a.id, None, "approved in the app")
            )
        )
        self.dialog = box
        box.open()

    def reject_many(self, approvals: Sequence[Approval]) -> None:
        """Ask once for a reason, listing the calls, then reject each with it."""
        chosen = list(approvals)
        self._prompt(
            "Reject several calls",
            batch_question("Reject", chosen) + " The agents read your reason.",
            f"Reject {len(chosen)}",
            lambda reason: self._decide_many(
                chosen, "Rejected", lambda a: self.client.reject(a.id, reason)
            ),
        )

    def _decide_many(
        self, approvals: list[Approval], verb: str, record: Callable[[Approval], Any]
    ) -> None:
        """Record one decision per approval off-thread; report what was and was not decided.

        One at a time rather than all-or-none: a call decided meanwhile elsewhere (the CLI,
        a deadline) must not hold back the others, and is reported, not counted as done.
        """
        self.decided.update(a.id for a in approvals)
        self.decisions_changed.emit()

        def reported(outcome: BatchOutcome) -> None:
            self.last_batch = outcome
            self.decided.difference_update(a.id for a, _why in outcome.failed)
            self.decisions_changed.emit()
            if outcome.failed:
                self.failed.emit(outcome.message())
            else:
                self.done.emit(outcome.message())

        def broke(exc: Exception) -> None:
            self.decided.difference_update(a.id for a in approvals)
            self.decisions_changed.emit()
            self.failed.emit(plain_error(exc))

        self.tasks.submit(lambda: decide_each(approvals, verb, record), reported, broke)

    def open_step_approvals(
        self, run_id: str, seq: int, run_title: str, tools: dict[str, ToolInfo]
    ) -> None:
        """Open the approval recorded by an approval step (pending or decided)."""
        client = self.client

        def opened(found: list[Approval]) -> None:
            if found:
                first = found[0]
                self.open_approval(first, run_title, tools.get(first.tool))

        self.tasks.submit(lambda: client.step_approvals(run_id, seq), opened)

    @Slot()
    def _on_approval_dialog_destroyed(self) -> None:
        self.approval_dialog = None

    @Slot(object, object, str)
    def _on_approval_dialog_approve_requested(
        self, approval: Approval, arguments: JSON, note: str
    ) -> None:
        self.approve(approval, arguments, note, self.approval_dialog)

    @Slot(object, str)
    def _on_approval_dialog_reject_requested(self, approval: Approval, reason: str) -> None:
        self.reject(approval, reason, self.approval_dialog)

    @Slot(object, object)
    def _on_approval_dialog_check_requested(self, approval: Approval, arguments: JSON) -> None:
        dialog = self.approval_dialog
        if dialog is not None:
            self.check(approval, arguments, dialog)


def _ignore(_exc: Exception) -> None:
    """A failed preview check is not worth an error dialog."""
