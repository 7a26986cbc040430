"""An editable form generated from a tool's JSON schema, and a diff of what was edited.

Strings get a line edit (or a multi-line editor for long or multi-line text), numbers spin
boxes, booleans check boxes, enums combo boxes; anything else is edited as JSON. A field the
original arguments did not have is sent only if the analyst changes it.
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from desktop_agent.client.checks import shape_problem
from desktop_agent.domain import JSON, RunStatus
from desktop_agent.gui import theme

LONG_TEXT_FIELDS = frozenset({"content", "text", "body", "message", "query_text", "code"})


class FormError(ValueError):
    """A field does not hold a valid value (e.g. JSON that does not parse)."""


def resolve(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """The schema of a value, and whether it may be null.

    Pydantic writes ``Optional[X]`` as ``anyOf: [X, {"type": "null"}]``.
    """
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        concrete = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        nullable = len(concrete) < len(options)
        if len(concrete) == 1:
            merged = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            return {**concrete[0], **merged}, nullable
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) == 1:
            return {**schema, "type": others[0]}, "null" in kind
    return schema, False


class _Field:
    """One argument: its widget, how to read it, and its original value."""

    def __init__(self, name: str, schema: Mapping[str, Any], value: JSON, present: bool) -> None:
        self.name = name
        self.schema, self.nullable = resolve(schema)
        self.original = value
        self.present = present
        self.widget: QWidget = self._make(value)

    def _make(self, value: JSON) -> QWidget:
        kind = self.schema.get("type")
        if "enum" in self.schema:
            box = QComboBox()
            options = [json.dumps(v) if not isinstance(v, str) else v for v in self.schema["enum"]]
            box.addItems(options)
            if value is not None:
                shown = value if isinstance(value, str) else json.dumps(value)
                if shown not in options:
                    box.addItem(shown)
                box.setCurrentText(shown)
            return box
        if kind == "string" and (value is None or isinstance(value, str)):
            text = value or ""
            if "\n" in text or len(text) > 80 or self.name in LONG_TEXT_FIELDS:
                editor = QPlainTextEdit()
                editor.setPlainText(text)
                editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
                editor.setMinimumHeight(220)
                return editor
            line = QLineEdit(text)
            hint = str(self.schema.get("description", ""))
            if self.nullable:
                hint = f"(not set) {hint}".strip()
            line.setPlaceholderText(hint)
            return line
        if kind == "integer" and (
            value is None or (isinstance(value, int) and not isinstance(value, bool))
        ):
            spin = QSpinBox()
            spin.setRange(
                int(self.schema.get("minimum", -(2**31))),
                int(self.schema.get("maximum", 2**31 - 1)),
            )
            spin.setValue(int(value if value is not None else self.schema.get("default", 0) or 0))
            return spin
        if (
            kind == "number"
            and (value is None or isinstance(value, int | float))
            and not isinstance(value, bool)
        ):
            dspin = QDoubleSpinBox()
            dspin.setDecimals(6)
            dspin.setRange(
                float(self.schema.get("minimum", -1e12)), float(self.schema.get("maximum", 1e12))
            )
            dspin.setValue(
                float(value if value is not None else self.schema.get("default", 0) or 0)
            )
            return dspin
        if kind == "boolean" and (value is None or isinstance(value, bool)):
            check = QCheckBox()
            check.setChecked(
                bool(value if value is not None else self.schema.get("default", False))
            )
            return check
        editor = QPlainTextEdit()
        editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        editor.setPlainText(json.dumps(value, indent=2, ensure_ascii=False) if self.present else "")
        editor.setMinimumHeight(80)
        editor.setProperty("json", True)
        return editor

    def value(self) -> JSON:
        """The edited value."""
        w = self.widget
        if isinstance(w, QComboBox):
            text = w.currentText()
            if self.schema.get("type") == "string" or all(
                isinstance(v, str) for v in self.schema.get("enum", [])
            ):
                return text
            return self._json(text)
        if isinstance(w, QPlainTextEdit):
            if w.property("json"):
                text = w.toPlainText().strip()
                if not text:
                    return None
                return self._json(text)
            return w.toPlainText()
        if isinstance(w, QLineEdit):
            return None if self.nullable and not w.text() else w.text()
        if isinstance(w, QSpinBox):
            return w.value()
        if isinstance(w, QDoubleSpinBox):
            return w.value()
        if isinstance(w, QCheckBox):
            return w.isChecked()
        return self.original

    def _json(self, text: str) -> JSON:
        """``text`` read as JSON; what cannot be read, stored or sent is a :class:`FormError`."""
        try:
            value: JSON = json.loads(text)
        except ValueError as exc:
            raise FormError(f"{self.name}: not valid JSON ({exc})") from None
        except RecursionError:
            raise FormError(f"{self.name}: nested too deeply") from None
        problem = shape_problem({self.name: value})
        if problem is not None:
            raise FormError(f"{self.name}: {problem.removeprefix('the edited arguments ')}")
        return value

    def reset(self) -> None:
        """Show the original value again."""
        w, value = self.widget, self.original
        if not self.present:
            value = self._initial_shown()
        if isinstance(w, QPlainTextEdit):
            if w.property("json"):
                text = json.dumps(value, indent=2, ensure_ascii=False) if self.present else ""
            else:
                text = "" if value is None else str(value)
            w.setPlainText(text)
        elif isinstance(w, QLineEdit):
            w.setText("" if value is None else str(value))
        elif isinstance(w, QSpinBox):
            w.setValue(int(value or 0))
        elif isinstance(w, QDoubleSpinBox):
            w.setValue(float(value or 0))
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QComboBox) and value is not None:
            w.setCurrentText(value if isinstance(value, str) else json.dumps(value))

    def changed(self) -> bool:
        """Whether the analyst changed the value."""
        try:
            v = self.value()
        except FormError:
            return True
        if not self.present:
            default = self.schema.get("default")
            return v not in (None, "", default) and v != self._initial_shown()
        return bool(v != self.original)

    def _initial_shown(self) -> JSON:
        kind = self.schema.get("type")
        default = self.schema.get("default")
        return {
            "integer": default or 0,
            "number": float(default or 0),
            "boolean": bool(default),
        }.get(str(kind), default)


class SchemaForm(QWidget):
    """Fields for each argument of a tool call.

    Args:
        schema: the tool's JSON schema (an object schema).
        arguments: the proposed arguments.
        parent: owner.

    Signals:
        edited: a field changed.
    """

    edited = Signal()

    def __init__(
        self,
        schema: Mapping[str, Any],
        arguments: Mapping[str, JSON],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.original = dict(arguments)
        props: dict[str, Any] = dict(schema.get("properties") or {})
        required = set(schema.get("required") or [])
        names = list(props) + [k for k in arguments if k not in props]
        self.fields: dict[str, _Field] = {}
        layout = QFormLayout(self)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for name in names:
            field = _Field(name, props.get(name, {}), arguments.get(name), name in arguments)
            self.fields[name] = field
            label = QLabel(f"{name}{' *' if name in required else ''}")
            desc = str(props.get(name, {}).get("description", ""))
            if desc:
                label.setToolTip(desc)
                field.widget.setToolTip(desc)
            field.widget.setObjectName(f"arg_{name}")
            layout.addRow(label, field.widget)
            self._connect(field.widget)
        if not names:
            layout.addRow(QLabel("This tool takes no arguments."))

    def _connect(self, w: QWidget) -> None:
        if isinstance(w, QPlainTextEdit | QLineEdit):
            w.textChanged.connect(self._on_field_changed)
        elif isinstance(w, QSpinBox | QDoubleSpinBox):
            w.valueChanged.connect(self._on_field_changed)
        elif isinstance(w, QCheckBox):
            w.toggled.connect(self._on_field_changed)
        elif isinstance(w, QComboBox):
            w.currentIndexChanged.connect(self._on_field_changed)

    @Slot()
    def _on_field_changed(self) -> None:
        self.edited.emit()

    def widget_for(self, name: str) -> QWidget:
        """The editor of argument ``name``."""
        return self.fields[name].widget

    def values(self) -> dict[str, JSON]:
        """The edited arguments (raises :class:`FormError` when a field is invalid)."""
        out = dict(self.original)
        for name, field in self.fields.items():
            if field.present or field.changed():
                out[name] = field.value()
        return out

    def reset(self) -> None:
        """Undo every edit."""
        for field in self.fields.values():
            field.reset()

    def is_edited(self) -> bool:
        """Whether any argument differs from the proposal."""
        return any(f.changed() for f in self.fields.values())


def _lines(value: JSON) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True).splitlines()


def diff_lines(original: Mapping[str, JSON], edited: Mapping[str, JSON]) -> list[str]:
    """A unified diff per changed argument (strings diffed line by line)."""
    out: list[str] = []
    for name in [*original, *[k for k in edited if k not in original]]:
        before, after = original.get(name), edited.get(name)
        if name in original and name in edited and before == after:
            continue
        out.append(f"@@ {name} @@")
        old = _lines(before) if name in original else []
        new = _lines(after) if name in edited else []
        for line in difflib.unified_diff(old, new, lineterm="", n=2):
            if line.startswith(("---", "+++")):
                continue
            if line.startswith("@@"):
                out.append("…")
                continue
            out.append(line)
    return out


def diff_html(original: Mapping[str, JSON], edited: Mapping[str, JSON], palette: QPalette) -> str:
    """The diff as colored HTML, or a note that nothing changed."""
    lines = diff_lines(original, edited)
    if not lines:
        return "<p>No changes: approving runs the call exactly as the agent proposed it.</p>"
    added = theme.status_color(RunStatus.COMPLETED, palette).name()
    removed = theme.status_color(RunStatus.FAILED, palette).name()
    head = palette.color(QPalette.ColorRole.Link).name()
    rows = []
    for line in lines:
        text = html.escape(line)
        if line.startswith("@@"):
            rows.append(f"<div style='color:{head}; font-weight:bold'>{text}</div>")
        elif line.startswith("+"):
            rows.append(f"<div style='color:{added}'>{text}</div>")
        elif line.startswith("-"):
            rows.append(f"<div style='color:{removed}'>{text}</div>")
        else:
            rows.append(f"<div>{text or '&nbsp;'}</div>")
    body = "".join(rows)
    return f"<div style='font-family: monospace; white-space: pre-wrap'>{body}</div>"
