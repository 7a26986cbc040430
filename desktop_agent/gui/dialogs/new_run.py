"""The new-run dialog: goal, model, workspace, tools, approval policy and budgets.

Its request and words are in :mod:`.new_run_request`, its fields' filling in :mod:`.new_run_fields`.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.messages import plain_error
from desktop_agent.client.views import ModelChoice, ToolInfo, thinking_budget_for
from desktop_agent.client.workspaces import WorkspaceState, check_workspace
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import format_duration, parse_duration
from desktop_agent.gui import resources, theme
from desktop_agent.gui.dialogs.agent_choice import AgentChoiceField
from desktop_agent.gui.dialogs.attachments_field import AttachmentsField, choose_folder
from desktop_agent.gui.dialogs.guard import GuardedDialog
from desktop_agent.gui.dialogs.new_run_fields import (
    budget_fields,
    check_tools,
    checked_tools,
    fill_budgets,
    fill_efforts,
    fill_models,
    fill_tools,
)
from desktop_agent.gui.dialogs.new_run_request import (
    ECONOMY_DEMO_TIP,
    ECONOMY_TIP,
    POLICIES,
    NewRunRequest,
    model_item_text,
    model_note_text,
    overrides_for,
    tool_item_text,
)
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.dialogs.server_tools_field import ServerToolsField
from desktop_agent.gui.sizing import keep_minimum_size
from desktop_agent.gui.widgets.forecast import Estimate, ForecastLine, ForecastQuestion, RunTask

__all__ = [
    "ECONOMY_DEMO_TIP",
    "ECONOMY_TIP",
    "POLICIES",
    "NewRunDialog",
    "NewRunRequest",
    "model_item_text",
    "model_note_text",
    "overrides_for",
    "tool_item_text",
]


class NewRunDialog(GuardedDialog):
    """Start a run.

    Args:
        models: models to offer.
        tools: tools to offer.
        settings: defaults for model and budgets.
        parent: owner.

    Signals:
        start_requested: the analyst pressed Start (a :class:`NewRunRequest`).
    """

    start_requested = Signal(object)

    economy_by_default = False
    """Whether economy mode is checked when a model that can batch is offered."""

    def __init__(
        self,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.again_of: str | None = None
        """The run prefilled from ("Run again"; see :meth:`prefill`)."""
        self.setWindowTitle("New run")
        self.setWindowIcon(resources.icon("new-run"))
        self.tool_infos = list(tools)
        self.goal = QPlainTextEdit(self)
        self.goal.setPlaceholderText(
            "What should the agent do? e.g. Summarise the reports in the workspace and list "
            "the three biggest risks, with sources."
        )
        self.goal.setTabChangesFocus(True)
        self.goal.setMinimumHeight(self.fontMetrics().height() * 4)
        self.goal.setMaximumHeight(self.fontMetrics().height() * 7)
        self.choices: dict[str, ModelChoice] = {}
        """The models offered, by id."""
        self.model = QComboBox(self)
        self._fill_models(models, settings.default_model)
        self.model.currentIndexChanged.connect(self._on_model_current_index_changed)
        self.model_note = QLabel(self)
        self.model_note.setWordWrap(True)
        self.model_notice = QLabel(self)
        """The selected model's deprecation notice (hidden for an active model)."""
        self.model_notice.setWordWrap(True)
        self.model_notice.hide()
        self.effort = QComboBox(self)
        """How much effort the model spends: its default, then the levels it takes."""
        self.effort.setToolTip(
            "How much the model works on each turn: lower is faster and cheaper, higher is "
            "more thorough. The model's default is what its documentation recommends."
        )
        self.thinking = QCheckBox("Thinking: let the model think before it answers", self)
        self.thinking.setToolTip(
            "On: the model reasons before answering and between tool calls (more tokens, "
            "often better work). Off: it answers directly."
        )
        self.economy = QCheckBox(
            "Economy: send each model turn in a Message Batch (half price, slower)", self
        )
        """Economy mode: the run waits for each answer, holding nothing, at half price."""
        self.economy.setToolTip(ECONOMY_TIP)
        self.economy.toggled.connect(self._on_economy_toggled)
        self.economy_note = QLabel(self)
        """Why economy mode is not offered with the selected model (shown only then)."""
        self.economy_note.setWordWrap(True)
        self.economy_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.economy_note.setMinimumWidth(520)  # wrapped: its height at the width it gets
        self.economy_note.hide()
        self.thinking_note = QLabel(self)
        """What Thinking off does on the selected model, when it does not simply stop it."""
        self.thinking_note.setWordWrap(True)
        self.thinking_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.thinking_note.hide()
        for note in (self.model_note, self.model_notice, self.thinking_note):
            # A wrapped label asks for the height of its text at a narrow width: at the
            # width it gets here that left blank lines under it.
            note.setMinimumWidth(520)
        self.forecast_line = ForecastLine(self)
        """The forecast of the run as chosen (shown once :meth:`set_forecaster` is called)."""
        self.forecast_template: str | None = None
        """The schedule, watch or batch whose past runs the forecast reads first."""
        self.effort.currentIndexChanged.connect(self._on_effort_current_index_changed)
        options_row = QHBoxLayout()
        options_row.addWidget(self.effort)
        options_row.addSpacing(16)
        options_row.addWidget(self.thinking, 1)
        self.workspace = QLineEdit(self)
        self.workspace.setPlaceholderText("empty: a new folder in the data folder")
        browse = QPushButton(resources.icon("folder"), "Choose…", self)
        browse.clicked.connect(self._on_browse_clicked)
        ws_row = QHBoxLayout()
        ws_row.addWidget(self.workspace, 1)
        ws_row.addWidget(browse)
        self.workspace_note = QLabel(self)
        """What the chosen folder holds, when the agent would find nothing in it."""
        self.workspace_note.setWordWrap(True)
        self.workspace_note.hide()
        self.workspace.textChanged.connect(self._on_workspace_text_changed)
        self.confirm: MessageDialog | None = None
        """The "Start anyway?" question, while open."""
        self._asked: NewRunRequest | None = None

        self.tools = QListWidget(self)
        fill_tools(self.tools, tools, default_tools)
        self.policy = QComboBox(self)
        for key, label in POLICIES:
            self.policy.addItem(label, key)

        self.cost, self.steps, self.time, self.tokens = budget_fields(self)
        fill_budgets(self, settings)

        top = QFormLayout()
        top.addRow("Goal", self.goal)
        top.addRow("Model", self.model)
        top.addRow("", self.model_note)
        top.addRow("", self.model_notice)
        top.addRow("Effort", options_row)
        top.addRow("", self.thinking_note)
        top.addRow("Mode", self.economy)
        top.addRow("", self.economy_note)
        top.addRow("", self.forecast_line)
        top.addRow("Workspace", ws_row)
        top.addRow("", self.workspace_note)
        self.attachments = AttachmentsField(self, top)
        self.server_tools = ServerToolsField(self, top, settings)
        self.agent = AgentChoiceField(self, top)
        tools_box = QGroupBox("Tools and approvals", self)
        tl = QVBoxLayout(tools_box)
        tl.addWidget(self.tools)
        tl.addWidget(QLabel("Approval policy", self))
        tl.addWidget(self.policy)
        budget_box = QGroupBox("Budget (the run waits for you when it reaches a limit)", self)
        bl = QFormLayout(budget_box)
        bl.addRow("Cost", self.cost)
        bl.addRow("Steps", self.steps)
        bl.addRow("Time", self.time)
        bl.addRow("Tokens", self.tokens)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        pal = self.error.palette()
        pal.setColor(QPalette.ColorRole.WindowText, theme.status_color(RunStatus.FAILED))
        self.error.setPalette(pal)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.start = self.buttons.addButton("Start run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.start.setIcon(resources.icon("resume"))
        self.start.setDefault(True)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.goal.textChanged.connect(self._on_goal_text_changed)

        columns = QHBoxLayout()
        columns.addWidget(tools_box, 1)
        columns.addWidget(budget_box, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(columns)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self._on_goal_text_changed()
        self._on_model_current_index_changed(self.model.currentIndex())
        self.resize(max(self.sizeHint().width(), 760), self.sizeHint().height())
        keep_minimum_size(self)

    def refill(
        self,
        models: Sequence[ModelChoice],
        tools: Sequence[ToolInfo],
        settings: Settings,
        default_tools: Sequence[str],
    ) -> None:
        """Empty the form and fill it anew, as a new dialog would be (for the next run).

        The window keeps one dialog and refills it at each New run: with PySide6 6.11 every
        widget built takes references to ``None`` that are never given back (about 220 per
        build of this dialog, 460 with its first showing), so a dialog built per opening
        made ``None``'s count climb for as long as the app ran.
        """
        for question in (self.confirm, self.discard_question):
            if question is not None:
                question.close()
        self.confirm, self._asked = None, None
        self.setWindowTitle("New run")
        self.again_of = None
        self.forecast_template = None
        self.economy.setChecked(False)
        self.forecast_line.set_economy(False)
        self.tool_infos = list(tools)
        self.goal.clear()
        self.model.blockSignals(True)
        try:
            self._fill_models(models, settings.default_model)
        finally:
            self.model.blockSignals(False)
        self.effort.blockSignals(True)  # the model's default effort, as in a new dialog
        self.effort.clear()
        self.effort.blockSignals(False)
        self._on_model_current_index_changed(self.model.currentIndex())
        self.economy.setChecked(self.economy_by_default and self.economy.isEnabled())
        self.thinking.setChecked(False)
        self.workspace.clear()
        fill_tools(self.tools, tools, default_tools)
        self.policy.setCurrentIndex(0)
        fill_budgets(self, settings)
        self.server_tools.reset(settings)
        self.error.setText("")
        self._on_goal_text_changed()

    def typed_text(self) -> bool:
        """Whether a goal was typed (Escape asks before dropping it)."""
        return bool(self.goal.toPlainText().strip())

    def prefill(self, run: Run) -> None:
        """Fill the form as ``run`` was started ("Run again").

        Goal, model, workspace, tools and budgets: the analyst edits what should change
        before starting.
        """
        self.setWindowTitle("Run again")
        self.again_of = run.id
        self.forecast_template = run.schedule_id or run.parent_id
        self.forecast_line.set_economy(run.spec.economy)
        self.goal.setPlainText(run.goal)
        index = self.model.findData(run.model)
        if index >= 0:
            self.model.setCurrentIndex(index)
        effort = self.effort.findData(run.spec.effort)
        self.effort.setCurrentIndex(max(0, effort))
        self.thinking.setChecked(run.spec.thinking_budget > 0)
        self.economy.setChecked(run.spec.economy and self.economy.isEnabled())
        self.workspace.setText(run.workspace)
        check_tools(self.tools, {name for name, _version in run.spec.tools})
        b = run.budget
        self.cost.setValue(b.max_cost_usd or 0)
        self.steps.setValue(b.max_steps or 0)
        self.time.setText(format_duration(b.max_time_s) if b.max_time_s else "")
        self.tokens.setValue(b.max_tokens or 0)
        self.attachments.keep(run)
        self.server_tools.keep(run)
        self.agent.keep(run)
        self.ask_forecast()  # the runs of its schedule or batch first

    def chosen_tools(self) -> list[str]:
        """Names of the checked tools."""
        return checked_tools(self.tools)

    def request(self) -> NewRunRequest:
        """The run asked for (raises InvalidInputError with a readable message)."""
        goal = self.goal.toPlainText().strip()
        if not goal:
            raise InvalidInputError("Say what the agent should do.")
        text = self.time.text().strip()
        max_time = parse_duration(text) if text else None
        tools = self.chosen_tools()
        return NewRunRequest(
            goal=goal,
            model=str(self.model.currentData()),
            workspace=self.workspace.text().strip() or None,
            tools=tuple(tools),
            approval_overrides=self.agent.overrides(
                overrides_for(str(self.policy.currentData()), self.tool_infos, tools)
            ),
            max_cost_usd=self.cost.value() or None,
            max_steps=self.steps.value() or None,
            max_time_s=max_time,
            max_tokens_budget=self.tokens.value() or None,
            forked_from=self.again_of,
            effort=str(self.effort.currentData() or ""),
            thinking_budget=thinking_budget_for(self.thinking.isChecked()),
            economy=self.economy_checked(),
            attachments=self.attachments.paths(),
            server_tools=self.server_tools.choice(),
            agent=self.agent.choice(),
        )

    def economy_checked(self) -> bool:
        """Whether the run is to be in economy mode (offered for the model, and checked)."""
        return self.economy.isEnabled() and self.economy.isChecked()

    def show_error(self, message: str) -> None:
        """Show why the run could not start."""
        self.error.setText(message)
        self.start.setEnabled(True)

    @Slot()
    def _on_goal_text_changed(self) -> None:
        self.start.setEnabled(bool(self.goal.toPlainText().strip()))

    def _fill_models(self, models: Sequence[ModelChoice], current: str) -> None:
        """Offer ``models`` (retired ones are never among them), ``current`` selected."""
        self.choices = {c.id: c for c in models}
        fill_models(self.model, models, current)

    def set_models(self, models: Sequence[ModelChoice]) -> None:
        """Offer ``models`` instead (the catalogue as read from the database).

        The model, effort and thinking chosen so far stay chosen when still offered.
        """
        if list(models) == list(self.choices.values()):
            return
        model, effort = self.model.currentData(), self.effort.currentData()
        self.model.blockSignals(True)
        try:
            self._fill_models(models, str(model))
        finally:
            self.model.blockSignals(False)
        self._on_model_current_index_changed(self.model.currentIndex())
        index = self.effort.findData(effort)
        if index >= 0:
            self.effort.setCurrentIndex(index)

    def chosen_model(self) -> ModelChoice | None:
        """The model selected."""
        return self.choices.get(str(self.model.currentData()))

    @Slot(int)
    def _on_model_current_index_changed(self, _index: int) -> None:
        choice = self.chosen_model()
        fill_efforts(self.effort, choice)  # the level chosen stays if the model takes it
        refusal = choice.economy_refusal() if choice is not None else ECONOMY_DEMO_TIP
        offered_before = self.economy.isEnabled()
        self.economy.setEnabled(not refusal)
        self.economy.setToolTip(refusal or ECONOMY_TIP)
        self.economy_note.setText(refusal)
        self.economy_note.setVisible(bool(refusal))
        if refusal:
            self.economy.setChecked(False)
        elif not offered_before:  # offered again: the form's default mode
            self.economy.setChecked(self.economy_by_default)
        self.model_note.setText(model_note_text(choice))
        notice = choice.notice if choice is not None else ""
        color = theme.warning_color(self.palette()).name()
        self.model_notice.setStyleSheet(f"QLabel {{ color: {color}; }}")
        self.model_notice.setText(f"⚠ {notice}" if notice else "")
        self.model_notice.setVisible(bool(notice))

    @Slot(int)
    def _on_effort_current_index_changed(self, _index: int) -> None:
        choice = self.chosen_model()
        effort = str(self.effort.currentData() or "") or (choice.default_effort if choice else "")
        text = choice.thinking_off_words(effort) if choice is not None else ""
        self.thinking_note.setText(text)
        self.thinking_note.setVisible(bool(text))
        self.ask_forecast()

    @Slot(bool)
    def _on_economy_toggled(self, checked: bool) -> None:
        self.forecast_line.set_economy(checked)

    def set_forecaster(self, run_task: RunTask, estimate: Estimate) -> None:
        """Show the forecast of the run as chosen, read with ``estimate`` off the GUI thread."""
        self.forecast_line.set_source(run_task, estimate)
        self.ask_forecast()

    def ask_forecast(self) -> None:
        """Ask the forecast line for the model, effort and template now chosen."""
        model = self.model.currentData()
        if model is None:
            return
        effort = str(self.effort.currentData() or "")
        self.forecast_line.ask(ForecastQuestion(str(model), effort, self.forecast_template))

    @Slot(str)
    def _on_workspace_text_changed(self, text: str) -> None:
        check = check_workspace(text)
        if check.state == WorkspaceState.NOT_A_FOLDER:
            color = theme.status_color(RunStatus.FAILED, self.palette())
        else:
            color = theme.warning_color(self.palette())
        self.workspace_note.setStyleSheet(f"QLabel {{ color: {color.name()}; }}")
        self.workspace_note.setText(f"⚠ {check.message}" if check.message else "")
        self.workspace_note.setVisible(bool(check.message))

    @Slot()
    def _on_browse_clicked(self) -> None:
        choose_folder(self, self.workspace)

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            request = self.request()
        except InvalidInputError as exc:
            self.show_error(plain_error(exc))
            return
        self.error.setText("")
        check = check_workspace(request.workspace or "")
        if check.warns:
            self._ask_start_anyway(request, check.message)
            return
        self._emit_start(request)

    def _ask_start_anyway(self, request: NewRunRequest, problem: str) -> None:
        """The agent would find no files: say so, and start only if the analyst confirms."""
        box = MessageDialog(
            "Start anyway?",
            f"{problem}\n\nStart the run anyway?",
            "status-needs-attention",
            confirm="Start anyway",
            parent=self,
        )
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self._asked = request
        box.confirmed.connect(self._on_confirm_confirmed)
        box.finished.connect(self._on_confirm_finished)
        self.confirm = box
        box.open()

    @Slot()
    def _on_confirm_confirmed(self) -> None:
        if self._asked is not None:
            self._emit_start(self._asked)

    @Slot()
    def _on_confirm_finished(self) -> None:
        self.confirm = None
        self._asked = None

    def _emit_start(self, request: NewRunRequest) -> None:
        self.start.setEnabled(False)
        self.start_requested.emit(request)
