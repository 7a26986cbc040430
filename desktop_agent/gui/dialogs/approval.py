"""The approval dialog: see the proposed tool call, edit its arguments, approve or reject.

It shows the tool, the rule that asked, the agent's stated reason, an editable form
generated from the tool's schema with a live diff of the edits, the tool's own check of the
(edited) arguments, and the time left before the deadline. A call that replaces a file
also shows the file on disk against the proposed content. Rejecting asks for a reason,
which goes back to the agent. Ctrl+Return approves what the form holds: the call as
proposed, or the edited call after an edit (refused inline while the edit is invalid).
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.checks import CheckResult
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import JSON, Approval, ApprovalState, RunStatus
from desktop_agent.gui import fmt, resources, theme
from desktop_agent.gui.dialogs.guard import GuardedDialog
from desktop_agent.gui.dialogs.prompts import TextPrompt
from desktop_agent.gui.diffview import DiskFile, file_diff_html, written_file
from desktop_agent.gui.sizing import keep_minimum_size
from desktop_agent.gui.widgets.schema_form import FormError, SchemaForm, diff_html

_REFUSED = "Approve is off: this edit would be refused"

CheckFn = Callable[[Approval, JSON], None]
"""Asks for a check of the arguments; the result comes back through ``show_check``."""


def deadline_text(approval: Approval, now: float | None = None) -> str:
    """Time left before the deadline, and what happens then."""
    if approval.deadline is None:
        return "No deadline: the run waits until you decide."
    left = approval.deadline - (time.time() if now is None else now)
    action = "approved" if approval.default_action == "approve" else "rejected"
    if left <= 0:
        return f"The deadline has passed: the call is {action} by default."
    return f"{fmt.format_duration(left)} left; then the call is {action} by default."


class ApprovalDialog(GuardedDialog):
    """Review one approval (closing it with edited arguments asks before dropping them).

    Args:
        approval: the approval to review.
        run_title: title of its run.
        schema: the tool's JSON schema (``{}`` when unknown).
        effect: the tool's effect class, for display.
        position: where this call stands among the run's pending calls (``1 of 3``), or "".
        parent: owner.

    Signals:
        approve_requested: approve (the approval, the edited arguments or None, a note).
        reject_requested: reject (the approval, the reason).
        check_requested: check these arguments (the approval, the arguments).
    """

    approve_requested = Signal(object, object, str)
    reject_requested = Signal(object, str)
    check_requested = Signal(object, object)

    def __init__(
        self,
        approval: Approval,
        run_title: str,
        schema: Mapping[str, Any],
        effect: str = "",
        parent: QWidget | None = None,
        position: str = "",
    ) -> None:
        super().__init__(parent)
        self.approval = approval
        self.reject_prompt: TextPrompt | None = None
        self.disk: DiskFile | None = None
        pending = approval.state == ApprovalState.PENDING
        title = f"Approve {approval.tool}?" if pending else f"Approval of {approval.tool}"
        self.setWindowTitle(f"{title} ({position})" if position else title)
        self.setWindowIcon(resources.icon("inbox"))
        self.resize(980, 680)

        facts = QFormLayout()
        self.position = self._label(
            f"Pending call {position} of this run; the others wait for their turn."
            if position
            else ""
        )
        if position:
            facts.addRow("Call", self.position)
        facts.addRow("Run", self._label(f"{run_title}  ({approval.run_id})"))
        tool = f"<b>{approval.tool}</b>" + (
            f" — effect: {effect.replace('_', ' ')}" if effect else ""
        )
        facts.addRow("Tool", self._label(tool))
        facts.addRow("Rule that asked", self._label(approval.rule or "—"))
        self.deadline = self._label(deadline_text(approval))
        facts.addRow("Deadline", self.deadline)
        if not pending:
            note = f": {approval.decision_note}" if approval.decision_note else ""
            facts.addRow("Decision", self._label(f"{approval.state.value}{note}"))

        reason = QTextBrowser(self)
        reason.setPlainText(approval.reason or "(the agent gave no reason with this call)")
        reason.setMaximumHeight(self.fontMetrics().height() * 5)
        reason_box = QGroupBox("The agent's stated reason", self)
        QVBoxLayout(reason_box).addWidget(reason)

        args = approval.arguments if isinstance(approval.arguments, dict) else {}
        self.form = SchemaForm(schema, args)
        self.form.setEnabled(pending)
        self.form.edited.connect(self._on_form_edited)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.form)
        form_box = QGroupBox("Arguments (edit to run a different call)", self)
        QVBoxLayout(form_box).addWidget(scroll)
        self.diff = QTextBrowser(self)
        diff_box = QGroupBox("Changes", self)
        QVBoxLayout(diff_box).addWidget(self.diff)
        self.file_diff: QTextBrowser | None = None
        self.tabs: QTabWidget | None = None
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(form_box)
        written = written_file(approval.tool, approval.arguments)
        if written is None:
            split.addWidget(diff_box)
        else:
            # A write replaces a file: what it loses on disk comes first.
            self.file_diff = QTextBrowser(self)
            self.file_diff.setPlainText(f"Reading {written[0]} from the workspace…")
            self.tabs = QTabWidget(self)
            self.tabs.addTab(self.file_diff, "File on disk")
            self.tabs.addTab(diff_box, "Your edits")
            split.addWidget(self.tabs)
        split.setSizes([560, 420])

        self.check = self._label("Checking the arguments…")
        check_box = QGroupBox("Tool's check", self)
        QVBoxLayout(check_box).addWidget(self.check)

        self.buttons = QDialogButtonBox(self)
        self.approve_button = QPushButton(resources.icon("approve"), "Approve", self)
        # Not the button's own shortcut: setText() (Approve / Approve with edits) resets it.
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setEnabled(pending)
            shortcut.activated.connect(self._on_approve_shortcut_activated)
        self._approve_tip = "Run the call (Ctrl+Enter)"
        self._refusal: str | None = None
        self.approve_button.setToolTip(self._approve_tip)
        self.reject_button = QPushButton(resources.icon("reject"), "Reject…", self)
        self.reject_button.setShortcut(QKeySequence("Ctrl+Shift+J"))
        self.reject_button.setToolTip("Refuse the call; the agent reads your reason (Ctrl+Shift+J)")
        self.reset_button = QPushButton("Undo edits", self)
        self.close_button = QPushButton("Decide later", self)
        self.buttons.addButton(self.approve_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.addButton(self.reject_button, QDialogButtonBox.ButtonRole.DestructiveRole)
        self.buttons.addButton(self.reset_button, QDialogButtonBox.ButtonRole.ResetRole)
        self.buttons.addButton(self.close_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.approve_button.clicked.connect(self._on_approve_button_clicked)
        self.reject_button.clicked.connect(self._on_reject_button_clicked)
        self.reset_button.clicked.connect(self._on_reset_button_clicked)
        self.close_button.clicked.connect(self.reject)
        for button in (self.approve_button, self.reject_button, self.reset_button):
            button.setVisible(pending)
        self.error = self._label("")
        palette = self.error.palette()
        palette.setColor(QPalette.ColorRole.WindowText, theme.status_color(RunStatus.FAILED))
        self.error.setPalette(palette)

        layout = QVBoxLayout(self)
        layout.addLayout(facts)
        layout.addWidget(reason_box)
        layout.addWidget(split, 1)
        layout.addWidget(check_box)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

        self._timer = QTimer(self)
        self._timer.setInterval(1000)
        self._timer.timeout.connect(self._on_timer_timeout)
        if approval.deadline is not None and pending:
            self._timer.start()
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(400)
        self._check_timer.timeout.connect(self._on_check_timer_timeout)
        self._update_diff()
        keep_minimum_size(self)

    def _label(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    # ------------------------------------------------------------------ state

    def edited_arguments(self) -> dict[str, JSON] | None:
        """The edited arguments, or None when nothing was edited."""
        if not self.form.is_edited():
            return None
        return self.form.values()

    def show_disk(self, disk: DiskFile) -> None:
        """Show what the (edited) write does to the file on disk, read off the GUI thread."""
        self.disk = disk
        self._update_file_diff()

    def ask_reject(self) -> None:
        """Ask for the reason of a rejection, over the call it rejects."""
        self._on_reject_button_clicked()

    def typed_text(self) -> bool:
        """Whether the arguments were edited (closing would drop the edit)."""
        return self.approval.state == ApprovalState.PENDING and self.form.is_edited()

    def request_check(self) -> None:
        """Ask for the tool's check of the current arguments (debounced)."""
        self._check_timer.start()

    def show_check(
        self, result: CheckResult | None, *, final: bool = False, arguments: JSON = None
    ) -> None:
        """Show what the tool's check said (``final``: the worker's check before running).

        ``arguments`` are the ones checked: a result for arguments the form no longer holds
        (the analyst typed on meanwhile) is dropped. While the edited arguments fail the
        check, Approve is off and says why: the client would refuse to record the edit.
        """
        if result is None:
            self.check.setText("No check is available for this call.")
            return
        if not final and arguments is not None and not self._holds(arguments):
            return
        color = {True: RunStatus.COMPLETED, False: RunStatus.FAILED, None: RunStatus.QUEUED}
        name = theme.status_color(color[result.ok], self.palette()).name()
        mark = {True: "✔", False: "✘", None: "?"}[result.ok]
        when = (
            "Final check before running"
            if final
            else "Checked now (the worker checks again right before running)"
        )
        said = html.escape(result.message, quote=False)
        self.check.setText(f"<span style='color:{name}'>{mark}</span> {when}: {said}")
        if not final:
            refused = result.ok is False and self.form.is_edited()
            self._refusal = result.message if refused else None
            self._show_refusal()

    def show_error(self, message: str) -> None:
        """Show why a decision could not be sent (the dialog stays open to decide again)."""
        self.error.setText(message)
        self.approve_button.setEnabled(True)
        self.reject_button.setEnabled(True)
        self._show_refusal()

    def refusal(self) -> str | None:
        """Why Approve is off for the edited arguments, or None."""
        return self._refusal

    def _holds(self, arguments: JSON) -> bool:
        """Whether the form holds ``arguments`` now."""
        try:
            held: JSON = self.form.values()
        except FormError:
            return False
        return bool(held == arguments)

    def _show_refusal(self) -> None:
        """Turn Approve off, saying why, while the edited arguments fail the check."""
        if self._refusal is None:
            self.approve_button.setToolTip(self._approve_tip)
            if self.error.text().startswith(_REFUSED):
                self.error.setText("")
            return
        self.approve_button.setEnabled(False)
        self.approve_button.setToolTip(f"{_REFUSED}: {self._refusal}")
        self.error.setText(f"{_REFUSED}: {self._refusal}")

    # ------------------------------------------------------------------ slots

    @Slot()
    def _on_timer_timeout(self) -> None:
        self.deadline.setText(deadline_text(self.approval))

    @Slot()
    def _on_check_timer_timeout(self) -> None:
        try:
            args = self.form.values()
        except FormError as exc:
            self.show_check(CheckResult(False, str(exc)))
            return
        self.check_requested.emit(self.approval, args)

    @Slot()
    def _on_form_edited(self) -> None:
        self._update_diff()
        self.request_check()

    def _update_file_diff(self) -> None:
        if self.file_diff is None or self.disk is None:
            return
        try:
            written = written_file(self.approval.tool, self.form.values())
        except FormError:
            return  # the edit diff says what is wrong; the last file diff stays
        if written is None or written[0] != self.disk.path:
            self.file_diff.setPlainText(
                "The edited call writes another file: approve it to see its effect in the run."
            )
            return
        self.file_diff.setHtml(file_diff_html(self.disk, written[1], self.palette()))

    def _update_diff(self) -> None:
        try:
            edited = self.form.values()
        except FormError as exc:
            self.diff.setPlainText(str(exc))
            self.approve_button.setEnabled(False)
            return
        # The check of these values is on its way; until it answers, the client's own check
        # of the edit stands behind the button.
        self._refusal = None
        self._show_refusal()
        self.approve_button.setEnabled(True)
        changed = self.form.is_edited()
        self.approve_button.setText("Approve with edits" if changed else "Approve")
        self.reset_button.setEnabled(changed)
        self.diff.setHtml(diff_html(self.form.original, edited, self.palette()))
        self._update_file_diff()

    @Slot()
    def _on_approve_button_clicked(self) -> None:
        try:
            edited = self.edited_arguments()
        except FormError as exc:
            self.show_error(plain_error(exc))
            return
        self.error.setText("")
        self.approve_button.setEnabled(False)
        note = "approved with edits in the app" if edited is not None else "approved in the app"
        self.approve_requested.emit(self.approval, edited, note)

    @Slot()
    def _on_approve_shortcut_activated(self) -> None:
        """Ctrl+Return: approve what the form holds, as the button would (never blind)."""
        try:
            self.edited_arguments()
        except FormError as exc:
            self.error.setText(plain_error(exc))
            return
        if self.approve_button.isEnabled():
            self._on_approve_button_clicked()
        elif self._refusal is not None:
            self.error.setText(f"{_REFUSED}: {self._refusal}")

    @Slot()
    def _on_reject_button_clicked(self) -> None:
        prompt = TextPrompt(
            "Reject the call",
            f"Why do you reject {self.approval.tool}? The agent reads your reason and "
            "can try something else.",
            "Reject",
            self,
        )
        prompt.submitted.connect(self._on_reject_prompt_submitted)
        self.reject_prompt = prompt
        prompt.open()

    @Slot(str)
    def _on_reject_prompt_submitted(self, reason: str) -> None:
        self.error.setText("")
        self.reject_button.setEnabled(False)
        self.reject_requested.emit(self.approval, reason)

    @Slot()
    def _on_reset_button_clicked(self) -> None:
        self.form.reset()
        self._update_diff()
        self.request_check()

    def done(self, result: int) -> None:
        """Stop the timers when the dialog closes."""
        self._timer.stop()
        self._check_timer.stop()
        super().done(result)
