"""The terminal, the timeline and the inspector present each step kind by its one description.

Each test swaps the descriptions for marked copies and checks that what the CLI prints and
what the GUI shows follow them: a presenter that still kept its own per-kind code would
show the unmarked text and fail.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from desktop_agent.cli import output as cli_output
from desktop_agent.client import stepkinds
from desktop_agent.client.api import Client
from desktop_agent.client.shapes import step_json
from desktop_agent.client.stepkinds import (
    ColorPair,
    Context,
    KindDescription,
    Section,
    Shape,
    StepFacts,
    facts_of,
)
from desktop_agent.client.views import StepEntry, timeline_entries
from desktop_agent.domain import JSON, StepKind, StepStatus
from desktop_agent.engine.ports import StepIntent
from desktop_agent.gui import theme
from desktop_agent.gui.models.steps import StepRole, StepTimelineModel
from desktop_agent.gui.widgets.inspector import StepInspector, step_html
from desktop_agent.gui.widgets.timeline import StepDelegate
from desktop_agent.persistence.store import SqlStore

pytestmark = pytest.mark.usefixtures("qapp")

SAMPLES: dict[StepKind, tuple[str, JSON, JSON]] = {
    StepKind.MODEL_CALL: (
        "demo",
        {"model": "demo"},
        {
            "content": [
                {"type": "text", "text": "Reading the sources."},
                {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "a.md"}},
            ]
        },
    ),
    StepKind.TOOL_CALL: (
        "read_file",
        {"tool_use_id": "tu1", "arguments": {"path": "a.md"}},
        {"content": "alpha", "is_error": False},
    ),
    StepKind.APPROVAL: (
        "approval",
        {"requests": [{"name": "write_file", "rule": "always", "arguments": {"path": "r.md"}}]},
        {"decisions": [{"state": "approved"}]},
    ),
    StepKind.SLEEP: ("wait", {"seconds": 5, "until": 1_760_000_005.0}, {}),
    StepKind.STEER: ("steer", {"text": "look at 2026"}, {}),
    StepKind.COMPACTION: ("demo", {"summarized_messages": 12}, {"summary": "read three files"}),
    StepKind.BUDGET: ("cost", {"limit": "cost"}, {"action": "stop"}),
    StepKind.ERROR: ("restore", {"why": "restored from a backup"}, {"detail": "older copy"}),
    StepKind.QUESTION: ("ask_user", {"question": "Which market?"}, {"content": "Europe"}),
    StepKind.REPORT: ("partial_report", {"reason": "stopped"}, {"path": "report.partial.md"}),
}
"""One finished step of every kind, as the engine records them."""

Patch = Callable[[KindDescription], KindDescription]


def _every_kind(client: Client, store: SqlStore) -> str:
    """A run whose journal holds one finished sample step of every kind, in kind order."""
    assert set(SAMPLES) == set(StepKind), "give the new kind a sample step here"
    run = client.start_run("One step of every kind", model="demo")
    for seq, (kind, (name, inp, out)) in enumerate(SAMPLES.items(), start=1):
        intent = StepIntent(seq, kind, name, inp, status=StepStatus.COMPLETED, output=out)
        store.commit(run.id, intents=[intent])
    return run.id


def _swap(monkeypatch: pytest.MonkeyPatch, change: Patch) -> dict[StepKind, KindDescription]:
    """Replace every description by ``change(description)``; returns the originals."""
    originals = dict(stepkinds.KINDS)
    monkeypatch.setattr(stepkinds, "KINDS", {k: change(d) for k, d in originals.items()})
    return originals


def _marked(d: KindDescription) -> KindDescription:
    return dataclasses.replace(
        d,
        label=d.label.upper(),
        summary=lambda f, c: f"<{d.kind}> {d.summary(f, c)}",
        terminal_summary=lambda f, c: f"[{d.kind}] {d.terminal_summary(f, c)}",
    )


def test_the_terminal_and_the_timeline_take_each_kinds_lines_from_its_description(
    client: Client, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _every_kind(client, store)
    original = _swap(monkeypatch, _marked)
    model = StepTimelineModel()
    model.reset(run_id, timeline_entries(client, run_id))
    steps = client.steps(run_id)
    assert [s.kind for s in steps] == list(SAMPLES)
    for row, step in enumerate(steps):
        kind = original[step.kind]
        facts = facts_of(step)
        terminal = kind.terminal_summary(facts, Context(model_label=cli_output.model_label))
        line = cli_output.step_line(step)
        assert line.startswith(f"[{step.seq:>4}] ✓ {step.kind!s:<11} [{step.kind}] {terminal}")
        timeline = f"<{step.kind}> {kind.summary(facts, Context())}"
        index = model.index(row)
        assert model.data(index, StepRole.SUMMARY) == timeline
        assert model.data(index, Qt.ItemDataRole.DisplayRole) == (
            f"#{step.seq} {kind.label.upper()} {timeline}"
        )


def _shown_sections(d: KindDescription) -> KindDescription:
    def details(f: StepFacts, c: Context) -> list[Section]:
        return [
            Section(f"<b>{d.kind}</b> text", Shape.TEXT, "<script>said</script>"),
            Section("Arguments", Shape.ARGUMENTS, {"<key>": "<value>", "long": "<l>\n" * 3}),
            Section("Data", Shape.JSON, {"k": "<json>"}),
        ]

    return dataclasses.replace(d, label=f"{d.label}-label", sections=details)


def test_the_inspector_renders_each_kinds_sections_escaped(
    client: Client, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _every_kind(client, store)
    _swap(monkeypatch, _shown_sections)
    palette = QPalette()
    for step in client.steps(run_id):
        shown = step_html(step, "", palette)
        assert f"{stepkinds.describe(step.kind).label}</span>" in shown
        assert f"&lt;b&gt;{step.kind}&lt;/b&gt; text" in shown
        assert "&lt;script&gt;said&lt;/script&gt;" in shown
        assert "&lt;key&gt;" in shown and "&lt;value&gt;" in shown and "&lt;l&gt;" in shown
        assert "&quot;k&quot;: &quot;&lt;json&gt;&quot;" in shown
        for raw in ("<b>", "<script>", "<key>", "<value>", "<l>", "<json>"):
            assert raw not in shown


def test_the_raw_json_tab_shows_the_step_as_json_output_does_with_its_run(
    client: Client, store: SqlStore, qtbot: QtBot
) -> None:
    run_id = _every_kind(client, store)
    steps = {s.seq: s for s in client.steps(run_id)}
    inspector = StepInspector()
    qtbot.addWidget(inspector)
    for entry in timeline_entries(client, run_id):
        inspector.setCurrentWidget(inspector.details)
        inspector.show_entry(entry)
        inspector.setCurrentWidget(inspector.raw)  # filled when shown
        shown = json.loads(inspector.raw.toPlainText())
        as_cli = json.loads(json.dumps(step_json(steps[entry.seq]), default=str))
        assert shown == {"run_id": run_id, **as_cli}, entry.kind


def _paint(entry: StepEntry, palette: QPalette) -> QImage:
    """One timeline row painted by the delegate, as an image."""
    model = StepTimelineModel()
    model.reset(entry.run_id, [entry])
    option = QStyleOptionViewItem()
    option.rect = QRect(0, 0, 640, 26)
    option.palette = palette
    option.font = QFont()
    option.state = QStyle.StateFlag.State_Enabled
    image = QImage(640, 26, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    StepDelegate().paint(painter, option, model.index(0))
    painter.end()
    return image


def test_the_timeline_paints_each_kind_in_its_descriptions_colour(
    client: Client, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _every_kind(client, store)
    mine = {kind: ColorPair(f"#10{i:02x}30", f"#c0{i:02x}e0") for i, kind in enumerate(StepKind)}
    _swap(monkeypatch, lambda d: dataclasses.replace(d, colors=mine[d.kind]))
    light, dark = QPalette(), theme.dark_palette()
    for entry in timeline_entries(client, run_id):
        pair = mine[entry.kind]
        for palette, want in ((light, pair.light), (dark, pair.dark)):
            assert theme.kind_color(entry.kind, palette) == QColor(want)
            strip = _paint(entry, palette).pixelColor(1, 13)  # the kind's strip, at the left
            assert strip.name() == want, entry.kind


def test_an_open_step_is_marked_waiting_when_its_description_says_it_waits(
    client: Client, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = client.start_run("Open steps of every kind", model="demo")
    for seq, kind in enumerate(StepKind, start=1):
        store.commit(run.id, intents=[StepIntent(seq, kind, "open", {})])
    original = _swap(monkeypatch, lambda d: dataclasses.replace(d, waits=not d.waits))
    model = StepTimelineModel()
    model.reset(run.id, timeline_entries(client, run.id))
    delegate, palette = StepDelegate(), QPalette()
    for row in range(model.rowCount()):
        entry = model.entry(row)
        badges = [text for text, _ in delegate._badges(entry, model.index(row), palette)]
        assert ("waiting" in badges) == (not original[entry.kind].waits), entry.kind
