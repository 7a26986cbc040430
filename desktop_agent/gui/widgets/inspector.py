"""The step inspector: what a step thought, called, got back and cost, plus its raw JSON.

A model call whose answer cites documents shows its answer with ``[n]`` marks and lists
its sources under it: file, page or characters, passage
(:mod:`desktop_agent.gui.widgets.citations`); a click on one asks for the step that read
the source (:attr:`StepInspector.source_requested`).
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QUrl, Signal, Slot
from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import QPlainTextEdit, QTabWidget, QTextBrowser, QTextEdit, QWidget

from desktop_agent.client.report import CitedAnswer, cited_answer
from desktop_agent.client.shapes import step_json
from desktop_agent.client.stepkinds import (
    Section,
    Shape,
    describe,
    facts_of,
    model_text,
    sections,
)
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import JSON, Step, StepKind
from desktop_agent.domain.tags import StepNote
from desktop_agent.gui import fmt, theme
from desktop_agent.gui.widgets.citations import answer_html, citations_html, source_seq

MAX_SHOWN = 20_000
"""Characters of one field shown in the details (the raw JSON tab has everything)."""

ThoughtLookup = Callable[[StepEntry], str]


def _clip(text: str) -> str:
    if len(text) <= MAX_SHOWN:
        return text
    return text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN:,} more characters in Raw JSON)"


def _pre(text: str) -> str:
    return (
        f"<pre style='white-space: pre-wrap; margin: 2px 0 8px 0'>{html.escape(_clip(text))}</pre>"
    )


def _json(value: JSON) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _args(value: JSON) -> str:
    """Arguments as HTML: short values in a table, long texts as blocks of text."""
    if not isinstance(value, dict) or not value:
        return _pre(_json(value))
    rows, blocks = [], []
    for key, v in value.items():
        if isinstance(v, str) and ("\n" in v or len(v) > 100):
            blocks.append(f"<div><code>{html.escape(str(key))}</code>:</div>{_pre(v)}")
        else:
            shown = v if isinstance(v, str) else _json(v)
            rows.append(
                f"<tr><td style='padding-right:10px'><code>{html.escape(str(key))}</code></td>"
                f"<td>{html.escape(_clip(str(shown)))}</td></tr>"
            )
    table = f"<table cellspacing='0' cellpadding='1'>{''.join(rows)}</table>" if rows else ""
    return table + "".join(blocks)


def raw_json(step: Step) -> dict[str, Any]:
    """The step as plain data (what the Raw JSON tab shows): ``--json``'s, with its run."""
    return {"run_id": step.run_id, **step_json(step)}


def _facts(step: Step, palette: QPalette) -> str:
    color = theme.step_status_color(step.status, palette).name()
    rows = [
        ("Status", f"<span style='color:{color}; font-weight:bold'>{step.status.value}</span>"),
        ("Attempt", str(step.attempt) + (" (retried)" if step.attempt > 1 else "")),
    ]
    if step.effect is not None:
        rows.append(("Effect", step.effect.value.replace("_", " ")))
    rows.append(("Idempotency key", f"<code>{html.escape(step.idempotency_key)}</code>"))
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(step.started_at))
    rows.append(("Started", started))
    if step.duration_s is not None:
        rows.append(("Duration", fmt.short_duration(step.duration_s)))
    else:
        rows.append(("Duration", f"{fmt.short_duration(time.time() - step.started_at)} so far"))
    u = step.usage
    if u.total:
        rows.append(
            (
                "Tokens",
                f"{u.input_tokens:,} in · {u.output_tokens:,} out · "
                f"{u.cache_write_tokens:,} cache write · {u.cache_read_tokens:,} cache read",
            )
        )
    if step.cost_usd:
        rows.append(("Cost", fmt.format_usd(step.cost_usd)))
    muted = palette.color(QPalette.ColorRole.PlaceholderText).name()
    cells = "".join(
        f"<tr><td style='padding-right:12px; color:{muted}'>{k}</td><td>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table cellspacing='0' cellpadding='1'>{cells}</table>"


def _section(title: str, body: str) -> str:
    return f"<h4 style='margin: 10px 0 2px 0'>{html.escape(title)}</h4>{body}"


def _body(section: Section) -> str:
    """A section's content as HTML, every piece of it escaped."""
    if section.shape == Shape.ARGUMENTS:
        return _args(section.content)
    if section.shape == Shape.JSON:
        return _pre(_json(section.content))
    return _pre(str(section.content))


def step_html(step: Step, thought: str, palette: QPalette) -> str:
    """The details of a step as HTML: a heading, its facts, then its kind's sections."""
    kind = describe(step.kind)
    color = theme.kind_color(step.kind, palette).name()
    out = [
        f"<h3 style='margin:0 0 6px 0'>Step {step.seq} · "
        f"<span style='color:{color}'>{kind.label}</span> · "
        f"{html.escape(step.name)}</h3>",
        _facts(step, palette),
    ]
    cited = _cited(step)
    said = model_text(step.output) if cited is not None else None
    for s in sections(facts_of(step), thought):
        if cited is not None and s.shape == Shape.TEXT and s.content == said:
            out.append(_section(s.title, answer_html(cited, MAX_SHOWN)))  # with its [n]
        else:
            out.append(_section(s.title, _body(s)))
    if cited is not None:
        out.append(citations_html(cited.references, palette))
    return "".join(out)


def _cited(step: Step) -> CitedAnswer | None:
    """A model call's answer with its citations resolved (None: it cites nothing)."""
    if step.kind != StepKind.MODEL_CALL:
        return None
    cited = cited_answer(step.output, step.seq)
    return cited if cited.references else None


def notes_html(notes: Sequence[StepNote]) -> str:
    """The analyst's notes on a step, last in its details ("" when none)."""
    if not notes:
        return ""
    items = "".join(
        f"<p style='margin:2px 0'>✎ <i>{html.escape(n.text)}</i> <span style='color:gray'>"
        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(n.created_at))}</span></p>"
        for n in notes
    )
    return _section("Your notes (never sent to the agent)", items)


class StepInspector(QTabWidget):
    """Details and raw JSON of the selected step.

    Args:
        parent: owner.

    Signals:
        source_requested: a cited source was clicked: the seq of the step that read it.
    """

    source_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.details = QTextBrowser(self)
        self.details.setOpenLinks(False)  # a source's link selects a step, in place
        self.details.anchorClicked.connect(self._on_details_anchor_clicked)
        self.raw = QPlainTextEdit(self)
        self.raw.setReadOnly(True)
        self.raw.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.raw.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.addTab(self.details, "Step details")
        self.addTab(self.raw, "Raw JSON")
        self.entry: StepEntry | None = None
        self.notes: tuple[StepNote, ...] = ()
        self._step: Step | None = None
        self._raw_stale = True
        self.currentChanged.connect(self._on_self_current_changed)
        self.show_entry(None)

    def show_entry(
        self,
        entry: StepEntry | None,
        thought: ThoughtLookup | None = None,
        notes: Sequence[StepNote] = (),
    ) -> None:
        """Show ``entry`` (None: a hint to select a step), with the analyst's ``notes`` on it."""
        if entry is not None and entry == self.entry and tuple(notes) == self.notes:
            return
        self.entry = entry
        self.notes = tuple(notes)
        if entry is None:
            self._step = None
            self.details.setHtml(
                "<p style='color:gray'>Select a step in the timeline to see what it thought, "
                "called, got back and cost.</p>"
            )
            self.raw.setPlainText("")
            return
        step = entry.to_step()
        bar = self.details.verticalScrollBar()
        same = self._step is not None and self._step.seq == step.seq
        keep = bar.value() if same else 0  # a live update of the same step keeps the place
        self._step = step
        said = thought(entry) if thought is not None and entry.kind == StepKind.TOOL_CALL else ""
        self.details.setHtml(step_html(step, said, self.palette()) + notes_html(self.notes))
        self.details.setExtraSelections([])  # marks belong to the text they were made on
        bar.setValue(keep)
        self._raw_stale = True
        if self.currentWidget() is self.raw:
            self._fill_raw()

    def mark(self, words: list[str]) -> int:
        """Highlight every occurrence of ``words`` in the details (case aside).

        Shows the first one. Returns how many were marked (a search's words, in the step it
        opened).
        """
        doc = self.details.document()
        color = self.palette().color(QPalette.ColorRole.Highlight)
        color.setAlpha(90)
        marks: list[QTextEdit.ExtraSelection] = []
        for word in words:
            cursor = doc.find(word, 0)
            while not cursor.isNull():
                found = QTextEdit.ExtraSelection()
                found.cursor = cursor
                found.format.setBackground(color)
                marks.append(found)
                cursor = doc.find(word, cursor)
        self.details.setExtraSelections(marks)
        if marks:
            self.details.setTextCursor(marks[0].cursor)
            self.details.ensureCursorVisible()
        return len(marks)

    @Slot(QUrl)
    def _on_details_anchor_clicked(self, url: QUrl) -> None:
        seq = source_seq(url)
        if seq is not None:
            self.source_requested.emit(seq)

    @Slot(int)
    def _on_self_current_changed(self, _index: int) -> None:
        if self.currentWidget() is self.raw:
            self._fill_raw()

    def _fill_raw(self) -> None:
        if not self._raw_stale:
            return
        self._raw_stale = False
        self.raw.setPlainText(_json(raw_json(self._step)) if self._step else "")
