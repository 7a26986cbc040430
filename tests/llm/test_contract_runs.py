"""Research runs with default settings on every current model, against the contract fake.

The fake refuses what the API refuses (per model: thinking types, effort, sampling, the
prefix check on every thinking block sent back …). Each journey here is a run with tool
calls that must complete without a single refused request: plain, after two compactions
(on the server and with our own summary), across a fallback switch, in a fork, after a
crash in the middle of a model call, and after a restore from a backup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind
from desktop_agent.engine.compaction import SUMMARY_PROMPT
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import ClaudeModel
from desktop_agent.persistence import backup
from tests.conftest import MakeExecutor, drain
from tests.helpers.claude_contract import MODELS as CONTRACT
from tests.helpers.fake_anthropic import (
    Compaction,
    FakeAnthropic,
    Reply,
    Status,
    Stream,
    Text,
    Thinking,
    ToolUse,
)
from tests.llm.conftest import MakeModel, StartFake

CURRENT = [
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-2",
]
WINDOW = 1_000_000
HIGH = 850_000
"""A prompt this large (of a 1M window) makes the engine compact before the next call."""


class Research:
    """A scripted research agent: lists files, reads them in turn, then answers.

    Every reply carries a thinking block and a progress sentence before its tool use (on
    the 2026 models the fake returns that sentence as thinking too), so that every later
    request sends signed blocks back and the prefix check runs on each of them.

    Args:
        turns: tool-using turns before the final answer.
        high_at: turns whose reported prompt size makes the engine compact next.
        fail: a function of the request body returning an error reply, or None.
    """

    def __init__(
        self,
        turns: int = 12,
        high_at: tuple[int, ...] = (),
        fail: Callable[[dict[str, Any]], Reply | None] | None = None,
    ) -> None:
        self.turns = turns
        self.high_at = high_at
        self.fail = fail
        self.turn = 0

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        if "compaction" in body:
            return Stream([Compaction(f"SUMMARY after turn {self.turn}: read files 1-{self.turn}")])
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and str(last[-1].get("text", "")).startswith(SUMMARY_PROMPT):
            return Stream([Text(f"SUMMARY after turn {self.turn}: read files 1-{self.turn}.")])
        failed = self.fail(body) if self.fail is not None else None
        if failed is not None:
            return failed
        self.turn += 1
        tokens = HIGH if self.turn in self.high_at else 2_000
        if self.turn > self.turns:
            return Stream(
                [Text("The market grew 4% in 2025 (notes/file3.md).")], input_tokens=2_000
            )
        tool = (
            ToolUse("list_files", {"path": "notes"})
            if self.turn == 1
            else ToolUse("read_file", {"path": f"notes/file{(self.turn - 1) % 4 + 1}.md"})
        )
        return Stream(
            [
                Thinking(f"Turn {self.turn}: what to read next."),
                Text(f"Reading the next source (turn {self.turn})."),
                tool,
            ],
            input_tokens=tokens,
        )


@pytest.fixture
def notes(workspace: Path) -> Path:
    """A workspace with four short notes."""
    folder = workspace / "notes"
    folder.mkdir()
    for i in range(1, 5):
        (folder / f"file{i}.md").write_text(f"Note {i}: the market grew {i}% in 2025.\n")
    return workspace


class Journey(NamedTuple):
    """What every journey here uses: the database, the engine, the fake API, the notes."""

    client: Client
    make_executor: MakeExecutor
    start_fake: StartFake
    make_model: MakeModel
    notes: Path


@pytest.fixture
def lab(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    notes: Path,
) -> Journey:
    """The fixtures of a journey, together."""
    return Journey(client, make_executor, start_fake, make_model, notes)


def _no_refusal(fake: FakeAnthropic) -> None:
    refused = [(r.status, r.error) for r in fake.requests if r.error is not None]
    assert refused == [], refused


def _thinking_sent_back(fake: FakeAnthropic) -> int:
    """Thinking blocks the run sent back to the API over all its requests."""
    return sum(
        1
        for r in fake.requests
        for m in r.body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "thinking"
    )


def _without_server_compaction(model: str) -> Catalogue:
    """The shipped catalogue, with ``model`` not offering on-demand compaction."""
    models = snapshot_models()
    for entry in models:
        if entry["id"] == model:
            entry["capabilities"]["compaction"] = {
                "supported": False,
                "summarize": {"supported": False},
            }
            entry["capabilities"]["context_management"]["compact_20260112"] = {"supported": False}
    return Catalogue(models)


# --------------------------------------------------------------------------- journeys


@pytest.mark.parametrize("model", CURRENT)
def test_a_default_research_run_completes_on_every_current_model(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    fake = start_fake(Research(turns=6))
    run = client.start_run("What did the market do in 2025?", model=model, workspace=notes)
    drain(client.store, make_executor(make_model(fake)))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert "4% in 2025" in done.status_message
    _no_refusal(fake)
    assert _thinking_sent_back(fake) > 0  # the prefix check ran on the blocks sent back
    first = fake.requests[0].body
    # Defaults the model takes: no sampling, no prefill, thinking it accepts, readable.
    assert "temperature" not in first and first["messages"][-1]["role"] == "user"
    thinking = first.get("thinking", {})
    accepted = CONTRACT[model].thinking_types
    assert thinking.get("type", "adaptive") in accepted
    if thinking.get("type") == "adaptive":
        assert thinking["display"] == "summarized"
    # Progress sentences between tool calls reach the timeline, whatever block carries them.
    partial = " ".join(str(s.output.get("thinking", "")) for s in client.steps(run.id) if s.output)
    assert "Reading the next source" in partial or "what to read next" in partial


@pytest.mark.parametrize("mode", ["server", "client"])
@pytest.mark.parametrize("model", CURRENT)
def test_two_compactions_keep_every_request_valid(
    model: str,
    mode: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    fake = start_fake(Research(turns=14, high_at=(5, 10)))
    claude = make_model(fake)
    if mode == "client":
        claude.catalogue = _without_server_compaction(model)
    on_server = claude.compacts_on_server(model)
    run = client.start_run("Survey the notes", model=model, workspace=notes)
    drain(client.store, make_executor(claude))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    _no_refusal(fake)
    compactions = [s for s in client.steps(run.id) if s.kind == StepKind.COMPACTION]
    assert len(compactions) == 2
    assert {c.output["mode"] for c in compactions} == {"server" if on_server else "client"}
    last = fake.requests[-1].body["messages"]
    if on_server:
        # The signed summary stands first; the kept turns follow with their thinking.
        assert last[0]["content"][0]["type"] == "compaction"
        assert "anthropic-beta" in fake.requests[-1].headers
        assert any(
            b.get("type") == "thinking"
            for m in last[1:]
            for b in m["content"]
            if isinstance(b, dict)
        )
    else:
        assert "SUMMARY after turn 10" in json.dumps(last[0])
        # Our own summary: the turns kept across it carry no thinking bound to the old prefix.
        second = [
            i for i, r in enumerate(fake.requests) if "SUMMARY after turn 10" in json.dumps(r.body)
        ]
        assert second


@pytest.mark.parametrize("mode", ["server", "client"])
def test_a_run_with_attachments_compacts_on_the_same_first_message(
    mode: str, lab: Journey, tmp_path: Path
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    model = "claude-sonnet-5-5"
    fake = start_fake(Research(turns=14, high_at=(5, 10)))
    claude = make_model(fake)
    if mode == "client":
        claude.catalogue = _without_server_compaction(model)
    attached = tmp_path / "figures.csv"
    attached.write_text("region,revenue\nnorth,12\n")
    run = client.start_run("Survey the notes", model=model, workspace=notes, attachments=[attached])
    drain(client.store, make_executor(claude))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    _no_refusal(fake)
    assert len([s for s in client.steps(run.id) if s.kind == StepKind.COMPACTION]) == 2
    firsts = [  # the first message's text, whatever cache marker a request put on it
        json.dumps([b.get("text") for b in r.body["messages"][0]["content"]]) for r in fake.requests
    ]
    # Every request that opens with the goal (the compaction calls too) names the file.
    with_goal = [f for f in firsts if "Goal: Survey the notes" in f]
    assert len(with_goal) >= 3
    assert all("attachments/figures.csv" in f for f in with_goal)
    # The requests before the first summary, the summary call among them, share one prefix.
    cut = next((i for i, f in enumerate(firsts) if "SUMMARY" in f), len(firsts))
    before = [f for f in firsts[:cut] if "Goal: Survey the notes" in f]
    assert len(before) >= 3 and len(set(before)) == 1


@pytest.mark.parametrize("model", CURRENT)
def test_a_fallback_switch_and_back_keeps_every_request_valid(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    fallback = "claude-opus-5-5" if model != "claude-opus-5-5" else "claude-sonnet-5-5"
    overloads = {"left": 2}
    now = [1_000.0]

    def overloaded(body: dict[str, Any]) -> Reply | None:
        # The run's model is overloaded twice in a row at its fourth turn; once the
        # fallback has answered, the cooldown passes and the run's model is used again.
        if body["model"] == fallback:
            now[0] += 301.0
        if body["model"] == model and research.turn == 3 and overloads["left"] > 0:
            overloads["left"] -= 1
            return Status(529, "overloaded_error", "Overloaded")
        return None

    research = Research(turns=8, fail=overloaded)
    fake = start_fake(research)
    claude = make_model(fake, fallback=fallback, fallback_after=2, max_retries=3)
    claude.clock = lambda: now[0]
    run = client.start_run("Survey the notes", model=model, workspace=notes)
    drain(client.store, make_executor(claude))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    refused = [r for r in fake.requests if r.error is not None and r.status != 529]
    assert refused == []
    used = [r.body["model"] for r in fake.requests if r.error is None]
    assert fallback in used and used[-1] == model  # switched, then back
    switched = next(r for r in fake.requests if r.body["model"] == fallback and r.error is None)
    # The fallback never receives the run model's thinking (a model reads only its own).
    for message in switched.body["messages"]:
        if message["role"] == "assistant":
            assert not [b for b in message["content"] if b.get("type") == "thinking"]


@pytest.mark.parametrize("model", CURRENT)
def test_a_fork_continues_with_every_request_valid(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    from desktop_agent.client.forks import fork

    fake = start_fake(Research(turns=5))
    run = client.start_run("Survey the notes", model=model, workspace=notes)
    executor = make_executor(make_model(fake))
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    # Fork after the third tool call with a note: the fork sends the parent's turns back.
    third_tool = [s.seq for s in client.steps(run.id) if s.kind == StepKind.TOOL_CALL][2]
    child = fork(client, run.id, third_tool, note="Also check file4.md")
    drain(client.store, executor)

    assert client.run(child.id).status == RunStatus.COMPLETED
    _no_refusal(fake)
    sent = [r.body for r in fake.requests if "Also check file4.md" in json.dumps(r.body)]
    assert sent and any(
        b.get("type") == "thinking"
        for m in sent[0]["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
    )


class _Crash(BaseException):
    pass


@pytest.mark.parametrize("model", CURRENT)
def test_a_crash_in_the_middle_of_a_model_call_resumes_with_every_request_valid(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    fake = start_fake(Research(turns=6))

    def crash(point: str) -> None:
        # In the middle of the third model call's answer, after some of it was saved.
        if point == "mid_stream" and len(fake.requests) == 3:
            raise _Crash(point)

    claude = make_model(fake)
    run = client.start_run("Survey the notes", model=model, workspace=notes)
    config = EngineConfig(crash_hook=crash, partial_flush_s=0.0, settings=client.settings)
    crashing = make_executor(claude, config=config)
    with pytest.raises(_Crash):
        crashing.execute(run.id)
    drain(client.store, make_executor(claude))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    _no_refusal(fake)
    # The interrupted call was issued again with the very same conversation.
    assert fake.requests[3].body["messages"] == fake.requests[2].body["messages"]


@pytest.mark.parametrize("model", CURRENT)
def test_a_restore_from_a_backup_resumes_with_every_request_valid(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    research = Research(turns=8)
    fake = start_fake(research)
    claude = make_model(fake)
    run = client.start_run("Survey the notes", model=model, workspace=notes)
    stop_at = {"n": 0}

    class _Stop(BaseException):
        pass

    def stop(point: str) -> None:
        if point == "after_outcome":
            stop_at["n"] += 1
            if stop_at["n"] == 6:
                raise _Stop(point)

    with pytest.raises(_Stop):
        make_executor(
            claude, config=EngineConfig(crash_hook=stop, settings=client.settings)
        ).execute(run.id)
    made = backup.make_backup(client.db_path)
    drain(client.store, make_executor(claude))
    assert client.run(run.id).status == RunStatus.COMPLETED
    db_path = client.db_path
    client.close()

    backup.restore(db_path, made.path)
    restored = Client(db_path, Settings.load(db_path))
    try:
        research.turn = 3  # the agent picks up where the backup left it
        drain(restored.store, make_executor_for(restored, claude))
        assert restored.run(run.id).status == RunStatus.COMPLETED, restored.run(
            run.id
        ).status_message
    finally:
        restored.close()
    _no_refusal(fake)


def make_executor_for(client: Client, model: ClaudeModel) -> Any:
    """An engine over ``client``'s database (the fixture's is bound to the first client)."""
    from desktop_agent.worker.compose import build_executor

    return build_executor(
        client.store,
        client.settings,
        model_for=lambda _name: model,
        config=EngineConfig(settings=client.settings),
    )


def test_the_tool_list_sent_first_is_sent_for_the_whole_run(
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    from desktop_agent.engine.loop import EngineConfig as Config
    from tests.helpers.fakes import FakeClock

    replies: list[Reply] = [
        Stream(
            [Thinking("Wait for the feed."), Text("Waiting."), ToolUse("wait", {"seconds": 60})]
        ),
        Stream([Text("Done after the wait.")]),
    ]
    fake = start_fake(replies)
    clock = FakeClock()
    claude = make_model(fake)
    run = client.start_run(
        "Watch the feed",
        model="claude-sonnet-5-5",
        workspace=notes,
        tools=["read_file", "wait", "web_search"],
    )
    settings = client.settings
    drain(client.store, make_executor(claude, clock=clock, config=Config(settings=settings)))
    assert client.run(run.id).status == RunStatus.WAITING
    # While it waits, the analyst turns web search on: the run's tools stay as they were
    # (its thinking is bound to them), new runs get the new list.
    clock.advance(61)
    changed = Config(settings=settings.updated({"web_search": True}))
    drain(client.store, make_executor(claude, clock=clock, config=changed), clock=clock)

    assert client.run(run.id).status == RunStatus.COMPLETED, client.run(run.id).status_message
    _no_refusal(fake)
    first, second = (r.body for r in fake.requests)
    assert second["tools"] == first["tools"]
    assert "web_search" not in json.dumps(first["tools"])


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"])
def test_an_edited_approval_and_a_steer_note_keep_every_request_valid(
    model: str,
    lab: Journey,
) -> None:
    client, make_executor, start_fake, make_model, notes = lab
    fake = start_fake(Research(turns=4))
    run = client.start_run(
        "Survey the notes",
        model=model,
        workspace=notes,
        tools=["list_files", "read_file"],
        approval_overrides={"read_file": "ask"},
    )
    executor = make_executor(make_model(fake))
    drain(client.store, executor)
    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING, waiting.status_message
    (pending,) = client.approvals()
    # The analyst reads another file than the one asked for, and adds a note.
    client.approve(pending.id, {"path": "notes/file4.md"}, "file4 is the newer note")
    client.steer(run.id, "Prefer the figures of file4.")
    for _ in range(6):
        drain(client.store, executor)
        for approval in client.approvals():
            client.approve(approval.id)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    _no_refusal(fake)
    sent = json.dumps(fake.requests[-1].body)
    assert "Prefer the figures of file4." in sent and "Note 4" in sent
