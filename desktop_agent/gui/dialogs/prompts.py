"""Small dialogs: a text prompt (note, answer, reason), budget extension, in-doubt resolution.

They open window-modal with ``open()`` (no nested event loop) and report through signals.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import parse_duration
from desktop_agent.gui import resources
from desktop_agent.gui.dialogs.guard import GuardedDialog
from desktop_agent.gui.sizing import keep_minimum_size


class MessageDialog(QDialog):
    """A message with an icon, and either OK or a confirm/cancel pair.

    (Our own rather than QMessageBox: that one fixes its size again on every show.)

    Args:
        title: window title.
        text: the message (plain text).
        icon: icon name under ``resources/icons``.
        confirm: label of the confirming button; None for a plain message with OK.
        cancel: label of the cancelling button.
        parent: owner.

    Signals:
        confirmed: the analyst pressed the confirming button.
    """

    confirmed = Signal()

    def __init__(
        self,
        title: str,
        text: str,
        icon: str = "status-needs-attention",
        confirm: str | None = None,
        cancel: str = "Cancel",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setWindowModality(Qt.WindowModality.WindowModal)
        picture = QLabel(self)
        picture.setPixmap(resources.icon(icon).pixmap(32, 32))
        picture.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.text = QLabel(text, self)
        self.text.setWordWrap(True)
        self.text.setMinimumWidth(380)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(self)
        self.confirm_button: QPushButton | None = None
        if confirm is None:
            self.cancel_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Ok)
            self.buttons.accepted.connect(self.accept)
        else:
            self.confirm_button = self.buttons.addButton(
                confirm, QDialogButtonBox.ButtonRole.AcceptRole
            )
            self.cancel_button = self.buttons.addButton(
                cancel, QDialogButtonBox.ButtonRole.RejectRole
            )
            self.cancel_button.setDefault(True)
            self.buttons.accepted.connect(self._on_buttons_accepted)
            self.buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(picture)
        row.addWidget(self.text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.buttons)
        keep_minimum_size(self)

    @Slot()
    def _on_buttons_accepted(self) -> None:
        self.confirmed.emit()
        self.accept()


class TextPrompt(GuardedDialog):
    """Ask for a non-empty text (Escape with text typed asks before discarding it).

    Args:
        title: window title.
        explanation: what the text is for.
        ok_label: label of the accept button.
        parent: owner.

    Signals:
        submitted: the analyst confirmed (the stripped text).
    """

    submitted = Signal(str)

    def __init__(
        self, title: str, explanation: str, ok_label: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setWindowModality(Qt.WindowModality.WindowModal)
        label = QLabel(explanation, self)
        label.setWordWrap(True)
        self.text = QPlainTextEdit(self)
        self.text.setTabChangesFocus(True)
        self.text.setMinimumSize(440, 110)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.ok = self.buttons.addButton(ok_label, QDialogButtonBox.ButtonRole.AcceptRole)
        self.ok.setDefault(True)
        self.ok.setEnabled(False)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.text.textChanged.connect(self._on_text_text_changed)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.buttons)
        keep_minimum_size(self)

    def typed_text(self) -> bool:
        """Whether a note, answer or reason was typed."""
        return bool(self.text.toPlainText().strip())

    @Slot()
    def _on_text_text_changed(self) -> None:
        self.ok.setEnabled(bool(self.text.toPlainText().strip()))

    @Slot()
    def _on_buttons_accepted(self) -> None:
        text = self.text.toPlainText().strip()
        if text:
            self.submitted.emit(text)
            self.accept()


class BudgetDialog(QDialog):
    """Raise a run's limits.

    Args:
        parent: owner.

    Signals:
        submitted: the amounts to add (cost_usd, steps, time_s, tokens).
    """

    submitted = Signal(float, int, float, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Extend the budget")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.cost = QDoubleSpinBox(self)
        self.cost.setRange(0, 10_000)
        self.cost.setDecimals(2)
        self.cost.setPrefix("$ ")
        self.steps = QSpinBox(self)
        self.steps.setRange(0, 1_000_000)
        self.time = QLineEdit(self)
        self.time.setPlaceholderText("e.g. 30m, 2h, 1d (empty: none)")
        self.tokens = QSpinBox(self)
        self.tokens.setRange(0, 2_000_000_000)
        self.tokens.setSingleStep(10_000)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Add cost", self.cost)
        form.addRow("Add steps", self.steps)
        form.addRow("Add time", self.time)
        form.addRow("Add tokens", self.tokens)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        ok = buttons.addButton("Extend", QDialogButtonBox.ButtonRole.AcceptRole)
        ok.setDefault(True)
        buttons.accepted.connect(self._on_buttons_accepted)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Add to the run's limits; the run continues if it was held.", self))
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        keep_minimum_size(self)

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            time_s = parse_duration(self.time.text()) if self.time.text().strip() else 0.0
        except InvalidInputError as exc:
            self.error.setText(str(exc))
            return
        if not any((self.cost.value(), self.steps.value(), time_s, self.tokens.value())):
            self.error.setText("Give an amount to add.")
            return
        self.submitted.emit(self.cost.value(), self.steps.value(), time_s, self.tokens.value())
        self.accept()


RESOLUTIONS = [
    ("probe", "Probe", "Ask the target whether the effect already happened, then continue."),
    ("mark_done", "Mark done", "You checked: the effect happened. The run continues."),
    ("retry", "Retry", "Run the step again with the same idempotency key."),
    ("skip", "Skip", "Do not run it; the agent is told it may or may not have happened."),
    ("accept", "Accept changes", "Accept a changed agent definition and continue."),
]


class ResolveDialog(QDialog):
    """Decide about a run that needs attention.

    Args:
        message: why the run needs attention.
        parent: owner.

    Signals:
        submitted: the chosen action (``probe``, ``mark_done``, ``retry``, ``skip``, ``accept``).
    """

    submitted = Signal(str)

    def __init__(self, message: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("The run needs your decision")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        layout = QVBoxLayout(self)
        why = QLabel(message or "The run needs attention.", self)
        why.setWordWrap(True)
        why.setMinimumWidth(460)
        layout.addWidget(why)
        self.group = QButtonGroup(self)
        self.choices: dict[str, QRadioButton] = {}
        for i, (action, label, help_) in enumerate(RESOLUTIONS):
            radio = QRadioButton(f"{label}: {help_}", self)
            self.group.addButton(radio, i)
            self.choices[action] = radio
            layout.addWidget(radio)
        self.choices["probe"].setChecked(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.ok: QPushButton = buttons.addButton("Decide", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self._on_buttons_accepted)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        keep_minimum_size(self)

    @Slot()
    def _on_buttons_accepted(self) -> None:
        index = self.group.checkedId()
        if index >= 0:
            self.submitted.emit(RESOLUTIONS[index][0])
            self.accept()
