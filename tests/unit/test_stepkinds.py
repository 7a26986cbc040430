"""The step kinds' descriptions: one for every kind, each complete, its details plain data."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from desktop_agent.client.stepkinds import (
    KINDS,
    Shape,
    StepFacts,
    describe,
    sections,
)
from desktop_agent.domain import StepKind, StepStatus

ICONS = Path(__file__).resolve().parents[2] / "resources" / "icons"
HEX = re.compile(r"#[0-9a-f]{6}")


def test_every_step_kind_has_a_description() -> None:
    """A kind added to the domain without a description fails here."""
    missing = [kind for kind in StepKind if kind not in KINDS]
    assert not missing, f"step kinds without a description: {missing}"
    assert all(describe(kind).kind is kind for kind in StepKind)


def test_every_description_is_complete() -> None:
    labels = [describe(kind).label for kind in StepKind]
    assert all(labels) and len(set(labels)) == len(labels), labels
    for kind in StepKind:
        entry = describe(kind)
        assert HEX.fullmatch(entry.colors.light) and HEX.fullmatch(entry.colors.dark), kind
        assert entry.icon is None or (ICONS / f"{entry.icon}.svg").is_file(), entry.icon


def test_details_are_plain_data_in_the_order_shown() -> None:
    """What the inspector shows is data an export can write as JSON, error and salvage last."""
    facts = StepFacts.make(
        StepKind.TOOL_CALL,
        "read_file",
        StepStatus.FAILED,
        {"arguments": {"path": "a.md"}},
        {"content": "no such file", "is_error": True, "data": {"tried": 2}},
        error="the file is gone",
        salvaged=("half a read",),
    )
    found = sections(facts, thought="I will read a.md")
    assert [(s.title, s.shape) for s in found] == [
        ("Thought (from the model call that asked)", Shape.TEXT),
        ("Tool read_file: arguments", Shape.ARGUMENTS),
        ("Result (error)", Shape.TEXT),
        ("Data", Shape.JSON),
        ("Error", Shape.TEXT),
        ("Salvaged output of interrupted attempt 1", Shape.TEXT),
    ]
    exported = json.loads(json.dumps([dataclasses.asdict(s) for s in found]))
    assert exported[1] == {
        "title": "Tool read_file: arguments",
        "shape": "arguments",
        "content": {"path": "a.md"},
    }
