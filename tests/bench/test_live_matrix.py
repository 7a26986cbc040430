"""``bench/live_matrix.py`` against the contract fake: the matrix it would run on the real API.

The fake refuses what the API refuses (per model) and checks every thinking block sent back
against its prefix, so a cell that passes here sends what the API accepts.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.fake_anthropic import (
    FakeAnthropic,
    Reply,
    Status,
    Stream,
    Text,
    Thinking,
    ToolUse,
)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "live_matrix.py"
CURRENT = [
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-1",
    "claude-mythos-5-2",
]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("live_matrix", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["live_matrix"] = module  # dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


live_matrix = _load()
main: Callable[[Sequence[str]], int] = live_matrix.main


def agent(body: dict[str, Any], index: int) -> Reply:
    """Thinks, says a word and calls ``note`` on the first turn; a short text later.

    Later turns think too, so that the kept turn after a compaction and the fallback
    model's turn carry signed blocks of their own.
    """
    if len(body["messages"]) == 1:
        return Stream(
            [
                Thinking("One note, then a word."),
                Text("Noting."),
                ToolUse("note", {"text": "ready"}),
            ]
        )
    return Stream([Thinking("One word."), Text("Done.")])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-live-matrix")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal to ask on
    with FakeAnthropic(agent) as server:
        yield server


def _run(fake: FakeAnthropic, *args: str) -> int:
    return main(["--base-url", fake.url, "--snapshot", *args])


def test_every_offered_cell_passes_on_every_current_model(
    fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(fake, "--yes", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    cells = report["cells"]
    assert {c["model"] for c in cells} == set(CURRENT)
    assert len(cells) == len(CURRENT) * 2 * 3 * 4
    assert all(c["status"] == "passed" for c in cells), [
        c for c in cells if c["status"] != "passed"
    ]
    assert (report["passed"], report["failed"], report["skipped"]) == (len(cells), 0, 0)
    assert [r.error for r in fake.requests if r.error is not None] == []
    bodies = fake.bodies()
    # Both kinds of compaction ran, and thinking went back to the model on later turns.
    assert any("compaction" in b for b in bodies)
    assert any(live_matrix.SUMMARY_PROMPT in json.dumps(b) for b in bodies)
    assert any(
        blk.get("type") == "thinking"
        for b in bodies
        for m in b["messages"]
        if m["role"] == "assistant"
        for blk in m["content"]
    )
    assert 0 < report["spent_usd"] <= report["estimate_usd"]


def test_a_refused_cell_is_reported_and_fails_the_run(
    fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse_haiku(body: dict[str, Any], index: int) -> Reply:
        if body["model"] == "claude-haiku-5-5" and len(body["messages"]) > 1:
            return Status(400, "invalid_request_error", "messages.1.content.0: refused by the test")
        return agent(body, index)

    fake.script = refuse_haiku
    assert _run(fake, "--yes", "--models", "claude-haiku-5-5,claude-opus-5-5") == 1
    out = capsys.readouterr().out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("claude-")]
    haiku = [r for r in rows if r[0].strip() == "claude-haiku-5-5"]
    opus = [r for r in rows if r[0].strip() == "claude-opus-5-5"]
    assert len(haiku) == len(opus) == 2 * 3 * 4
    assert all(r[4].startswith("refused: ") and "refused by the test" in r[4] for r in haiku), haiku
    # Opus's fallback path went through Haiku, whose second turn the fake refused.
    assert {r[3].strip() for r in opus if r[4].startswith("refused")} == {"fallback"}
    assert out.rstrip().splitlines()[-1] == f"{2 * 3 * 3} passed, {2 * 3 * 5} failed"


def test_a_changed_thinking_block_is_refused(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check would see an adapter that sent a turn back changed: the fake refuses it."""
    keep = live_matrix.assistant

    def changed(response: Any) -> dict[str, Any]:
        message: dict[str, Any] = keep(response)
        message["content"] = [
            {**b, "thinking": b["thinking"] + " (edited)"} if b.get("type") == "thinking" else b
            for b in message["content"]
        ]
        return message

    monkeypatch.setattr(live_matrix, "assistant", changed)
    assert _run(fake, "--yes", "--json", "--models", "claude-opus-5-5") == 1
    cells = json.loads(capsys.readouterr().out)["cells"]
    plain = [c for c in cells if c["path"] == "plain"]
    assert plain and all(c["status"] == "refused" and "signature" in c["detail"] for c in plain)


def test_without_yes_or_a_terminal_nothing_is_called(
    fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--base-url", fake.url]) == 2  # the live catalogue, read from the fake
    out = capsys.readouterr().out
    assert "estimated cost at most $" in out
    assert "not a terminal" in out
    assert fake.requests == []
    assert any(r.path.startswith("/v1/models") for r in fake.side_requests)


def test_without_a_key_it_says_how_to_set_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["--snapshot", "--yes"]) == 2
    assert "desktop-agent key set" in capsys.readouterr().err


def test_an_effort_the_catalogue_lacks_is_skipped() -> None:
    models = live_matrix.snapshot_models()
    for model in models:
        if model["id"] == "claude-haiku-5-5":
            model["capabilities"]["effort"]["max"] = {"supported": False}
    missing, combos = live_matrix.plan(live_matrix.Catalogue(models), ["claude-haiku-5-5", "x"])
    assert missing == ["x"]
    assert {(c.effort, c.offered) for c in combos} == {
        ("low", True),
        ("high", True),
        ("max", False),
    }
