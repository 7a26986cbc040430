"""The form every run template dialog shares: the new-run form with a section of its own.

:class:`TemplateDialog` is the base of the schedule (:mod:`.schedule`), batch
(:mod:`.batch`) and watched-folder (:mod:`.watch`) dialogs; :func:`run_options` turns the
form's request into a template's run options.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.messages import plain_error
from desktop_agent.client.schedules import RunOptions
from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.gui import resources, theme
from desktop_agent.gui.dialogs.new_run import NewRunDialog, NewRunRequest
from desktop_agent.gui.sizing import keep_minimum_size

RunTask = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[Exception], None]], None]
"""Runs a function off the GUI thread, then one of the two callbacks on it."""


def run_options(request: NewRunRequest) -> RunOptions:
    """The run options of a template from the new-run form's request."""
    return RunOptions(
        model=request.model,
        workspace=request.workspace,
        max_cost_usd=request.max_cost_usd,
        max_steps=request.max_steps,
        max_time_s=request.max_time_s,
        tools=request.tools,
        approval_overrides=dict(request.approval_overrides),
        effort=request.effort,
        thinking_budget=request.thinking_budget,
        economy=request.economy,
    )


class TemplateDialog(NewRunDialog):
    """The new-run form plus a section of its own (see the subclasses).

    Args:
        title: window title.
        icon: icon name of the window and of the accept button.
        action: label of the accept button.
        models: models to offer.
        tools: tools to offer.
        settings: defaults for model and budgets.
        default_tools: tools checked at first.
        parent: owner.

    Signals:
        submitted: the analyst pressed the accept button (the subclass's request).
    """

    submitted = Signal(object)

    def __init__(
        self,
        title: str,
        icon: str,
        action: str,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        self._ready = False
        super().__init__(models, tools, settings, default_tools, parent)
        self.setWindowTitle(title)
        self.setWindowIcon(resources.icon(icon))
        self.start.setText(action)
        self.start.setIcon(resources.icon(icon))
        # Templates carry no token budget (the other limits apply to each run).
        budget = self.tokens.parentWidget()
        form = budget.layout() if budget is not None else None
        if isinstance(form, QFormLayout):
            form.setRowVisible(self.tokens, False)
        self.tools.setMinimumHeight(self.tools.sizeHintForRow(0) * 6 + 6)
        lines = self.fontMetrics().height()
        self.goal.setMinimumHeight(lines * 3)
        self.goal.setMaximumHeight(lines * 5)
        self.section = QGroupBox(self)
        self.form = QFormLayout(self.section)
        layout = self.layout()
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(1, self.section)

    def _finish(self) -> None:
        """Size the dialog for its section; subclasses call this last."""
        self._ready = True
        self._validate()
        hint = self.sizeHint()
        self.resize(max(hint.width(), 760), hint.height())
        keep_minimum_size(self)

    def feedback_label(self) -> QLabel:
        """A label for ✔/✘ feedback under a field."""
        label = QLabel(self)
        label.setWordWrap(True)
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        # A wrapped label asks for the height of its text at a narrow width; at the width it
        # gets here that left lines of blank space under a long message.
        label.setMinimumWidth(520)
        return label

    def show_feedback(self, label: QLabel, ok: bool, text: str) -> None:
        """``✔ text`` in the completed color, or ``✘ text`` in the failed one."""
        status = RunStatus.COMPLETED if ok else RunStatus.FAILED
        pal = label.palette()
        pal.setColor(QPalette.ColorRole.WindowText, theme.status_color(status, self.palette()))
        label.setPalette(pal)
        label.setText(("✔ " if ok else "✘ ") + text)

    def browse_row(self, edit: QLineEdit, title: str, *, folder: bool) -> QHBoxLayout:
        """``edit`` with a Choose… button that opens a file or folder picker."""
        button = QPushButton(resources.icon("folder"), "Choose…", self)

        def browse() -> None:
            dialog = QFileDialog(self, title, edit.text())
            if folder:
                dialog.setFileMode(QFileDialog.FileMode.Directory)
                dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
            else:
                dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
            dialog.fileSelected.connect(edit.setText)
            dialog.open()

        button.clicked.connect(browse)
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        row.addWidget(button)
        return row

    # ------------------------------------------------------------------ checks

    def choice_row(self, first: str, second: str) -> tuple[QRadioButton, QRadioButton, QHBoxLayout]:
        """Two exclusive radio buttons on one row, the first checked."""
        a = QRadioButton(first, self)
        b = QRadioButton(second, self)
        a.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(a)
        group.addButton(b)
        row = QHBoxLayout()
        row.addWidget(a)
        row.addWidget(b)
        row.addStretch(1)
        return a, b, row

    def section_problem(self) -> str | None:
        """What keeps the section from being accepted (None: nothing); shown live."""
        return None

    def make_request(self, run: NewRunRequest) -> object:
        """The request to emit (raises InvalidInputError with a readable message)."""
        raise NotImplementedError

    def _validate(self) -> None:
        if not self._ready:
            return
        goal = bool(self.goal.toPlainText().strip())
        self.start.setEnabled(goal and self.section_problem() is None)

    @Slot()
    def _on_goal_text_changed(self) -> None:
        super()._on_goal_text_changed()
        self._validate()

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            request = self.make_request(self.request())
        except InvalidInputError as exc:
            self.show_error(plain_error(exc))
            return
        self.error.setText("")
        self.start.setEnabled(False)
        self.submitted.emit(request)

    def show_error(self, message: str) -> None:
        """Show why the request was refused (e.g. the backend's validation message)."""
        text = message[:1].upper() + message[1:]
        self.error.setText(f"✘ {text}" if not text.startswith("✘") else text)
        self._validate()
