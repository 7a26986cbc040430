"""The New run dialog's choice of the agent that drives the run.

:class:`AgentChoiceField` is the form's "Agent" row, under the goal: *desktop-agent* (our
own loop and tools) or *Claude Agent SDK* (a session of the SDK with Claude Code's own
tools, kept in the journal and executed by a worker: ``client/sdk_runs.py``). With the SDK
chosen, the choices that are desktop-agent's own (its tools, thinking, economy mode,
Anthropic's server tools) are greyed out, the approval policy is read for Claude Code's
tools, and a note says what the run will be. The SDK is an extra of the package: without
it the choice is offered disabled, saying how to install it.

The choice lasts one opening of the dialog (it is reset when the dialog closes), except
for "Run again", which keeps the run's (:meth:`AgentChoiceField.keep`).
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QPalette, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.sdk_runs import INSTALL_HINT, sdk_installed
from desktop_agent.domain import Run
from desktop_agent.domain.agents import AgentKind

SDK = AgentKind.AGENT_SDK
SDK_NOTE = (
    "A Claude Agent SDK session: Claude Code's own tools (Bash, Read, Write, Edit…), kept in "
    "the journal so that any worker can resume it. The approval policy and the budget "
    "apply; the options greyed out are desktop-agent's own."
)
MISSING_TIP = f"The Claude Agent SDK is not installed here: {INSTALL_HINT}"

SDK_WRITES = ("Write", "Edit", "MultiEdit", "NotebookEdit", "Bash")
"""Claude Code's tools that change files or run commands (asked about under "changes")."""


class NewRunForm(Protocol):
    """What the field reads of the New run dialog."""

    @property
    def tools(self) -> QListWidget:
        """The tool list (desktop-agent's tools)."""
        ...

    @property
    def thinking(self) -> QCheckBox:
        """Thinking on or off."""
        ...

    @property
    def economy(self) -> QCheckBox:
        """Economy mode."""
        ...

    @property
    def policy(self) -> QComboBox:
        """The approval policy preset."""
        ...

    @property
    def model(self) -> QComboBox:
        """The model picker."""
        ...

    @property
    def server_tools(self) -> QWidget:
        """Anthropic's server tools."""
        ...

    @property
    def thinking_note(self) -> QLabel:
        """What thinking off does on the model."""
        ...

    @property
    def economy_note(self) -> QLabel:
        """Why economy mode is not offered, if it is not."""
        ...


def sdk_overrides(policy: str) -> dict[str, str]:
    """The approval policy preset for Claude Code's tools (``*``: every tool)."""
    if policy == "all":
        return {"*": "ask"}
    if policy == "changes":
        return dict.fromkeys(SDK_WRITES, "ask")
    return {}


class AgentChoiceField(QWidget):
    """desktop-agent or the Claude Agent SDK: a row of the form, under the goal.

    Args:
        dialog: the New run dialog (its tools, thinking, economy, policy, model and
            server tools are read and greyed out).
        form: the form the field's row goes into (second, under the goal).
    """

    def __init__(self, dialog: QDialog, form: QFormLayout) -> None:
        super().__init__(dialog)
        self.form: NewRunForm = dialog  # type: ignore[assignment]
        self.combo = QComboBox(self)
        self.combo.setAccessibleName("Agent")
        self.combo.addItem(AgentKind.DESKTOP.label, "")
        self.combo.addItem(SDK.label, SDK.value)
        self.combo.setItemData(0, "desktop-agent's own loop and tools", Qt.ItemDataRole.ToolTipRole)
        self.note = QLabel(SDK_NOTE, self)
        self.note.setWordWrap(True)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.note.setMinimumWidth(520)
        self.note.hide()
        if sdk_installed():
            self.combo.setItemData(
                1, "A session of the Claude Agent SDK", Qt.ItemDataRole.ToolTipRole
            )
        else:
            model = self.combo.model()
            assert isinstance(model, QStandardItemModel)
            item = model.item(1)
            if item is not None:
                item.setEnabled(False)
            self.combo.setItemData(1, MISSING_TIP, Qt.ItemDataRole.ToolTipRole)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.combo)
        row.addStretch(1)
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.addLayout(row)
        rows.addWidget(self.note)
        form.insertRow(1, "Agent", self)
        self.combo.currentIndexChanged.connect(self._on_combo_current_index_changed)
        # After the dialog's own handler, which offers economy mode per model again.
        self.form.model.currentIndexChanged.connect(self._on_combo_current_index_changed)
        dialog.finished.connect(self.reset)

    def choice(self) -> str:
        """The agent chosen: "" (desktop-agent) or ``agent-sdk``."""
        return str(self.combo.currentData() or "")

    def overrides(self, ours: dict[str, str]) -> dict[str, str]:
        """The approval overrides of the request: ``ours``, or the SDK's for its tools."""
        if self.choice() != SDK.value:
            return ours
        return sdk_overrides(str(self.form.policy.currentData()))

    def keep(self, run: Run) -> None:
        """Choose as ``run`` was started ("Run again")."""
        self.combo.setCurrentIndex(1 if run.spec.agent == SDK.value and sdk_installed() else 0)

    @Slot()
    def reset(self) -> None:
        """desktop-agent, as a new form has it."""
        self.combo.setCurrentIndex(0)
        self._on_combo_current_index_changed()

    @Slot()
    def _on_combo_current_index_changed(self) -> None:
        sdk = self.choice() == SDK.value
        self.note.setVisible(sdk)
        form = self.form
        for widget in (form.tools, form.thinking, form.thinking_note, form.server_tools):
            widget.setEnabled(not sdk)
        if sdk:
            form.economy.setChecked(False)
        # Economy mode as the dialog offers it for the model (its note says why not).
        form.economy.setEnabled(not sdk and not form.economy_note.text())
