"""Dialogs that never lose typed text: Escape, Cancel or the close box ask first.

Every way out of a dialog that is not its confirming button goes through
:meth:`QDialog.reject` (Escape, a Cancel button, the window's close box), so one override
is enough. A dialog says what typed text it would lose (:meth:`GuardedDialog.typed_text`);
with nothing typed it closes at once.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from desktop_agent.gui.sizing import keep_minimum_size

QUESTION = "Discard what you typed?"


class DiscardQuestion(QDialog):
    """``Discard what you typed?`` with Discard, and Keep editing as the default.

    Args:
        parent: the dialog holding the text.

    Signals:
        discarded: the analyst chose Discard.
    """

    discarded = Signal()

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setWindowTitle(QUESTION)
        self.setWindowModality(Qt.WindowModality.WindowModal)
        text = QLabel(f"{QUESTION} It is lost when this window closes.", self)
        text.setWordWrap(True)
        text.setMinimumWidth(320)
        buttons = QDialogButtonBox(self)
        self.discard_button = buttons.addButton(
            "Discard", QDialogButtonBox.ButtonRole.DestructiveRole
        )
        self.keep_button = buttons.addButton("Keep editing", QDialogButtonBox.ButtonRole.RejectRole)
        self.keep_button.setDefault(True)
        self.discard_button.clicked.connect(self._on_discard_button_clicked)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addWidget(buttons)
        keep_minimum_size(self)

    @Slot()
    def _on_discard_button_clicked(self) -> None:
        self.accept()
        self.discarded.emit()


class GuardedDialog(QDialog):
    """A dialog that asks before Escape, Cancel or the close box discard typed text.

    Subclasses override :meth:`typed_text`. :meth:`close_discarding` closes without asking
    (the app is quitting).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.discard_question: DiscardQuestion | None = None
        """The question while it is asked (tests answer it)."""
        self._discarding = False

    def typed_text(self) -> bool:
        """Whether closing now would lose something the analyst typed."""
        return False

    def reject(self) -> None:
        """Close, unless that loses typed text and the analyst wants to keep editing."""
        if self._discarding or not self.isVisible() or not self.typed_text():
            super().reject()
            return
        if self.discard_question is not None and self.discard_question.isVisible():
            return  # already asked
        question = DiscardQuestion(self)
        question.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        question.discarded.connect(self.close_discarding)
        question.destroyed.connect(self._on_question_destroyed)
        self.discard_question = question
        question.open()

    @Slot()
    def close_discarding(self) -> None:
        """Close without asking: what was typed is dropped."""
        self._discarding = True
        try:
            self.reject()
        finally:
            self._discarding = False

    @Slot()
    def _on_question_destroyed(self) -> None:
        self.discard_question = None
