"""Fork from this step: a new run that shares a run's steps 1..N and goes on from there.

The analyst may add a note (sent to the agent first) or, when the run's next step is a tool
call, edit that call's arguments (JSON, as the approval dialog's text editor takes them;
the client checks them as an approval's edit is checked). The dialog only collects what
was asked: :meth:`request` raises with a readable message, and the window makes the fork
off the GUI thread and shows a refusal here (:meth:`show_error`), keeping what was typed.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.domain import JSON
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.gui.dialogs.guard import GuardedDialog
from desktop_agent.gui.sizing import keep_minimum_size


class ForkDialog(GuardedDialog):
    """Ask how a fork of ``run_id`` after step ``at_seq`` goes on.

    Args:
        run_id: the run forked.
        at_seq: the last step the fork shares.
        next_call: the run's tool call at ``at_seq + 1`` (its name and arguments), if any:
            only then can its arguments be edited.
        parent: owner.

    Signals:
        fork_requested: ``(run_id, at_seq, note or None, edited arguments or None)``.
    """

    fork_requested = Signal(str, int, object, object)

    def __init__(
        self,
        run_id: str,
        at_seq: int,
        next_call: tuple[str, JSON] | None = None,
        parent: QWidget | None = None,
        *,
        moved: str = "",
        note_problem: str = "",
    ) -> None:
        super().__init__(parent)
        self.run_id, self.at_seq = run_id, at_seq
        self.setWindowTitle(f"Fork from step {at_seq}" if moved else "Fork from this step")
        shared = f"steps 1–{at_seq}" if at_seq > 1 else "step 1"
        intro = QLabel(
            (f"{moved}\n\n" if moved else "")
            + f"A new run that shares {shared} of run {run_id} (not done again) and goes on "
            "from there.",
            self,
        )
        intro.setWordWrap(True)
        self.moved = moved
        self.with_note = QRadioButton("Go on, with a note to the agent (optional):", self)
        self.note = QPlainTextEdit(self)
        self.note.setPlaceholderText("What should the agent do differently from here?")
        name = next_call[0] if next_call else ""
        self.with_args = QRadioButton(
            f"Edit the arguments of step {at_seq + 1} ({name}) and run it:"
            if next_call
            else f"Step {at_seq + 1} is not a tool call: there are no arguments to edit",
            self,
        )
        self.args = QPlainTextEdit(self)
        self.args.setPlainText(json.dumps(next_call[1], indent=2) if next_call else "")
        self.with_args.setEnabled(next_call is not None)
        group = QButtonGroup(self)
        group.addButton(self.with_note)
        group.addButton(self.with_args)
        self.with_note.toggled.connect(self._on_with_note_toggled)
        if note_problem and next_call is not None:
            # Only an edit can follow here: a note would leave the tool call unanswered.
            self.with_note.setEnabled(False)
            self.with_note.setText(f"A note cannot follow this step: {note_problem}")
            self.with_args.setChecked(True)
            self._on_with_note_toggled(False)
        else:
            self.with_note.setChecked(True)
            self._on_with_note_toggled(True)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b00020")
        self.error.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.fork_button = self.buttons.addButton("Fork", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for w in (intro, self.with_note, self.note, self.with_args, self.args, self.error):
            layout.addWidget(w)
        layout.addWidget(self.buttons)
        self.resize(560, 460)
        keep_minimum_size(self)

    def typed_text(self) -> bool:
        """Whether a note was typed (Escape asks before dropping it)."""
        return bool(self.note.toPlainText().strip())

    def request(self) -> tuple[str | None, JSON]:
        """The note, or the edited arguments (raises InvalidInputError, readable)."""
        if self.with_args.isChecked():
            try:
                args = json.loads(self.args.toPlainText())
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"The arguments are not valid JSON: {exc.msg}.") from None
            if not isinstance(args, dict):
                raise InvalidInputError("The arguments must be a JSON object.")
            return None, args
        note = self.note.toPlainText().strip()
        return (note or None), None

    def show_error(self, message: str) -> None:
        """Show why the fork was not made (the dialog stays open with what was typed)."""
        self.error.setText(message)
        self.error.show()
        self.fork_button.setEnabled(True)

    @Slot(bool)
    def _on_with_note_toggled(self, checked: bool) -> None:
        self.note.setEnabled(checked)
        self.args.setEnabled(not checked)

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            note, args = self.request()
        except InvalidInputError as exc:
            self.show_error(str(exc))
            return
        self.error.hide()
        self.fork_button.setEnabled(False)
        self.fork_requested.emit(self.run_id, self.at_seq, note, args)
