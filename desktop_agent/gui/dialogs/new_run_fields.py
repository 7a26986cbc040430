"""The new-run form's lists and pickers: how they are filled from choices and read back.

Functions over the form's own widgets (the dialog keeps them as attributes); the words they
show are in :mod:`.new_run_request`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLineEdit, QListWidget, QSpinBox, QWidget

from desktop_agent.client.views import ModelChoice, ToolInfo
from desktop_agent.config import Settings
from desktop_agent.domain.units import format_duration
from desktop_agent.gui.dialogs.new_run_request import model_item_text, tool_item_text


def fill_tools(view: QListWidget, tools: Sequence[ToolInfo], default_tools: Sequence[str]) -> None:
    """Offer ``tools`` in ``view``, those in ``default_tools`` checked.

    Anthropic's server tools are left out: the form's own field chooses them
    (:mod:`.server_tools_field`).
    """
    view.clear()
    tools = [t for t in tools if t.origin != "provider"]
    for tool in tools:
        # An item Qt makes (addItem with a text), not a QListWidgetItem made here: the
        # view's first call into a Python-made item keeps a reference to None (PySide6
        # 6.11), one per tool at each filling.
        view.addItem(tool_item_text(tool))
        item = view.item(view.count() - 1)
        item.setData(Qt.ItemDataRole.UserRole, tool.name)
        item.setToolTip(tool.description)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        checked = tool.name in default_tools
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
    rows = max(4, min(len(tools), 9))
    view.setMinimumHeight(view.sizeHintForRow(0) * rows + 6)


def check_tools(view: QListWidget, used: Collection[str]) -> None:
    """Check the tools named in ``used``, uncheck the others."""
    for i in range(view.count()):
        item = view.item(i)
        checked = item.data(Qt.ItemDataRole.UserRole) in used
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)


def checked_tools(view: QListWidget) -> list[str]:
    """Names of the checked tools."""
    out = []
    for i in range(view.count()):
        item = view.item(i)
        if item.checkState() == Qt.CheckState.Checked:
            out.append(str(item.data(Qt.ItemDataRole.UserRole)))
    return out


def fill_models(combo: QComboBox, models: Sequence[ModelChoice], current: str) -> None:
    """Offer ``models`` in ``combo``, ``current`` selected (else the first)."""
    combo.clear()
    for choice in models:
        combo.addItem(model_item_text(choice), choice.id)
        index = combo.count() - 1
        tip = choice.notice or choice.price
        if tip:
            combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
    index = combo.findData(current)
    combo.setCurrentIndex(max(0, index))


def fill_efforts(combo: QComboBox, choice: ModelChoice | None) -> None:
    """The effort levels ``choice`` takes; the level chosen stays if it takes it."""
    before = combo.currentData()
    combo.clear()
    default = choice.default_effort if choice is not None else ""
    combo.addItem(f"Model default ({default})" if default else "Model default", "")
    for level in choice.efforts if choice is not None else ():
        combo.addItem(level, level)
    combo.setEnabled(combo.count() > 1)
    index = combo.findData(before) if before else -1
    combo.setCurrentIndex(max(0, index))


def fill_budgets(form: BudgetForm, settings: Settings) -> None:
    """The budgets a new run gets unless the analyst changes them."""
    form.cost.setValue(settings.default_max_cost_usd or 0)
    form.steps.setValue(settings.default_max_steps or 0)
    max_time = settings.default_max_time_s
    form.time.setText(format_duration(max_time) if max_time else "")
    form.tokens.setValue(0)


class BudgetForm(Protocol):
    """A form holding the budget's fields (:func:`budget_fields`)."""

    cost: QDoubleSpinBox
    steps: QSpinBox
    time: QLineEdit
    tokens: QSpinBox


def budget_fields(parent: QWidget) -> tuple[QDoubleSpinBox, QSpinBox, QLineEdit, QSpinBox]:
    """The budget's fields, in this order: cost, steps, time and tokens (0: no limit)."""
    cost = QDoubleSpinBox(parent)
    cost.setRange(0, 10_000)
    cost.setDecimals(2)
    cost.setPrefix("$ ")
    cost.setSpecialValueText("no limit")
    steps = QSpinBox(parent)
    steps.setRange(0, 1_000_000)
    steps.setSpecialValueText("no limit")
    time = QLineEdit(parent)
    time.setPlaceholderText("no limit (e.g. 30m, 2h, 3d)")
    tokens = QSpinBox(parent)
    tokens.setRange(0, 2_000_000_000)
    tokens.setSingleStep(100_000)
    tokens.setSpecialValueText("no limit")
    return cost, steps, time, tokens
