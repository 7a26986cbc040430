"""Runs on the real engine and SQLite journal, with Claude through the SDK and the fake API."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage, WaitReason
from desktop_agent.engine.compaction import SUMMARY_PROMPT
from desktop_agent.engine.loop import EngineConfig, RunExecutor, restore_state
from desktop_agent.engine.state import AgentState, apply_step
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy
from desktop_agent.llm.pacing import RateLimitPacer
from desktop_agent.secrets import KeyStore
from desktop_agent.worker.worker import Worker
from tests.conftest import MakeExecutor, drain
from tests.helpers.fake_anthropic import Reply, Status, Stream, Text, Thinking, ToolUse
from tests.helpers.fakes import FakeClock, MemoryKeyring
from tests.helpers.polling import wait_status, wait_until
from tests.llm.conftest import KEY, FallbackSettings, MakeModel, StartFake

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

SONNET = "claude-sonnet-4-5"
HAIKU = "claude-haiku-4-5"


def tiny_window(model: str, window: int) -> Catalogue:
    """The shipped catalogue with ``model``'s context window made ``window`` tokens."""
    models = snapshot_models()
    for entry in models:
        if entry["id"] == model:
            entry["max_input_tokens"] = window
    return Catalogue(models)


def test_multi_turn_tool_run_has_exact_costs_and_cache_usage(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = start_fake(
        [
            Stream(
                [Text("I'll list the sources."), ToolUse("list_files", {"path": "."})],
                input_tokens=1200,
                cache_write=3000,
                output_tokens=150,
            ),
            Stream(
                [
                    Thinking("alpha looks relevant", signature="sig-1"),
                    Text("Reading alpha."),
                    ToolUse("read_file", {"path": "alpha.md"}),
                ],
                input_tokens=300,
                cache_write=500,
                cache_read=3000,
                output_tokens=200,
            ),
            Stream(
                [Text("Alpha says the market grew 4% in 2025.")],
                input_tokens=200,
                cache_write=400,
                cache_read=3500,
                output_tokens=100,
            ),
        ]
    )
    run = client.start_run(
        "Find the growth figure", model=SONNET, workspace=workspace, thinking_budget=2048
    )
    drain(client.store, make_executor(make_model(fake)))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert done.status_message == "Alpha says the market grew 4% in 2025."
    steps = client.steps(run.id)
    assert [(s.kind, s.name) for s in steps] == [
        (StepKind.MODEL_CALL, SONNET),
        (StepKind.TOOL_CALL, "list_files"),
        (StepKind.MODEL_CALL, SONNET),
        (StepKind.TOOL_CALL, "read_file"),
        (StepKind.MODEL_CALL, SONNET),
    ]
    calls = [s for s in steps if s.kind == StepKind.MODEL_CALL]
    # Sonnet 4.5 per million tokens: $3 input, $15 output, $3.75 cache write, $0.30 cache read.
    assert [c.cost_usd for c in calls] == pytest.approx([0.0171, 0.006675, 0.00465], abs=1e-12)
    assert [c.usage for c in calls] == [
        Usage(1200, 150, 3000, 0),
        Usage(300, 200, 500, 3000),
        Usage(200, 100, 400, 3500),
    ]
    assert done.cost_usd == pytest.approx(0.028425, abs=1e-12)
    assert done.usage == Usage(1700, 450, 3900, 6500)
    # The thought of the step is the model's thinking; its signed block stays in the content.
    assert calls[1].output["thinking"] == "alpha looks relevant"
    signature = calls[1].output["content"][0]["signature"]
    assert isinstance(signature, str) and signature

    # What the API got: the whole conversation, thinking block included, cached up to the
    # newest message.
    third = fake.requests[2].body
    assert [m["role"] for m in third["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert third["messages"][3]["content"][0] == {
        "type": "thinking",
        "thinking": "alpha looks relevant",
        "signature": signature,
    }
    result = third["messages"][4]["content"][0]
    # A text file read reaches a model that takes documents as one, with citations.
    assert result["type"] == "tool_result" and "market grew 4%" in json.dumps(result["content"])
    # The run may wait (it can ask the analyst, set a timer): its prefix is kept an hour.
    assert result["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" in third["messages"][2]["content"][-1]
    assert "cache_control" in third["tools"][-1] and "cache_control" in third["system"][0]
    assert json.dumps(third).count("cache_control") == 4

    # `desktop-agent show` prints the totals.
    capsys.readouterr()
    assert cli.main(["--db", str(client.db_path), "show", run.id]) == 0
    shown = capsys.readouterr().out
    assert "cost:      $0.03" in shown
    assert "tokens in 1700, out 450, cache write 3900, cache read 6500" in shown
    assert cli.main(["--db", str(client.db_path), "show", run.id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cost_usd"] == pytest.approx(0.028425, abs=1e-9)
    assert data["usage"]["cache_read_tokens"] == 6500


def test_429_with_retry_after_120_hibernates_the_run_without_a_thread(
    client: Client, make_executor: MakeExecutor, start_fake: StartFake
) -> None:
    clock = FakeClock()
    fake = start_fake(
        [
            Status(
                429, "rate_limit_error", "Number of request tokens exceeded", {"retry-after": "120"}
            ),
            Stream([Text("Done after the wait.")]),
        ]
    )
    model = ClaudeModel(
        lambda: KEY,
        FallbackSettings(),
        base_url=fake.url,
        pacer=RateLimitPacer(clock.now),
        clock=clock.now,
    )
    run = client.start_run("Rate limited", model=SONNET)
    executor = make_executor(model, clock=clock)
    threads_before = threading.active_count()
    drain(client.store, executor, clock=clock)

    # Nothing slept through the 120 s: the run hibernates with its wake-up 120 s ahead on
    # the (frozen) clock, and the API saw the one request, not a retry after a wait.
    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.wait_reason == WaitReason.RATE_LIMIT
    assert waiting.wake_at == pytest.approx(clock.now() + 120, abs=1)
    assert "Rate limited" in waiting.status_message and "retrying in 120s" in waiting.status_message
    assert threading.active_count() <= threads_before  # the drained worker left no thread
    assert len(fake.requests) == 1

    clock.advance(60)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.WAITING  # not due yet
    assert len(fake.requests) == 1
    clock.advance(61)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.COMPLETED
    failed, ok = client.steps(run.id)
    assert failed.status == StepStatus.FAILED and "429 rate_limit_error" in (failed.error or "")
    assert failed.output["error_code"] == "rate_limited"
    assert ok.status == StepStatus.COMPLETED
    assert len(fake.requests) == 2


def test_rejected_key_waits_for_credentials_and_resumes_after_key_set(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    memory_keyring: MemoryKeyring,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = "sk-ant-api03-the-good-one-000000000"
    fake = start_fake([Stream([Text("All done.")])], accept_keys={good})
    keys = KeyStore()
    keys.set("sk-ant-api03-revoked-key-111111111")
    model = ClaudeModel(keys.get, FallbackSettings(), base_url=fake.url, pacer=RateLimitPacer())
    executor = make_executor(model)
    run = client.start_run("Needs a key", model=SONNET)
    drain(client.store, executor)

    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.wait_reason == WaitReason.CREDENTIALS
    assert waiting.status_message == (
        "The API refused the API key: set a valid one in Settings > API key, with "
        "`desktop-agent key set`, or in ANTHROPIC_API_KEY (401 authentication_error: "
        "invalid x-api-key)"
    )
    assert "revoked" not in waiting.status_message
    drain(client.store, executor)  # nothing changes without a key
    assert client.run(run.id).status == RunStatus.WAITING
    assert len(fake.requests) == 1

    monkeypatch.setattr("sys.stdin", io.StringIO(good + "\n"))
    assert cli.main(["--db", str(client.db_path), "key", "set"]) == 0
    assert "resuming 1 run(s) that were waiting for a key" in capsys.readouterr().out
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert fake.requests[-1].key == good


def test_no_key_at_all_says_how_to_set_one(
    client: Client, make_executor: MakeExecutor, start_fake: StartFake
) -> None:
    fake = start_fake()
    model = ClaudeModel(
        KeyStore().get, FallbackSettings(), base_url=fake.url, pacer=RateLimitPacer()
    )
    run = client.start_run("No key", model=SONNET)
    drain(client.store, make_executor(model))
    waiting = client.run(run.id)
    assert waiting.wait_reason == WaitReason.CREDENTIALS
    assert "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY" in (
        waiting.status_message
    )
    assert fake.requests == []


def test_streamed_text_is_visible_in_the_journal_before_the_call_finishes(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    run_worker_thread: Callable[[RunExecutor], Worker],
) -> None:
    gate = threading.Event()
    answer = "The first part of a long answer, then the rest of it arrives later."
    fake = start_fake([Stream([Text(answer, chunk=4)], delay=0.05, hold_after=10, gate=gate)])
    run = client.start_run("Slow answer", model=SONNET)
    run_worker_thread(make_executor(make_model(fake)))

    def live_partial() -> bool:
        steps = client.steps(run.id)
        return bool(steps) and steps[0].status == StepStatus.STARTED and bool(steps[0].partial_text)

    wait_until(live_partial, what="partial text of the streaming call")
    (step,) = client.steps(run.id)
    assert step.status == StepStatus.STARTED  # the call is still in flight
    assert answer.startswith(step.partial_text)
    assert len(step.partial_text) < len(answer)
    gate.set()
    wait_status(client, run.id, RunStatus.COMPLETED, what="completion")
    (step,) = client.steps(run.id)
    assert step.output["content"] == [{"type": "text", "text": answer}]


def test_cancel_interrupts_a_streaming_call(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    run_worker_thread: Callable[[RunExecutor], Worker],
) -> None:
    fake = start_fake([Stream([Text("word " * 400, chunk=5)], delay=0.02)])
    run = client.start_run("Cancel me", model=SONNET)
    run_worker_thread(make_executor(make_model(fake)))
    wait_until(lambda: bool(client.steps(run.id) and client.steps(run.id)[0].partial_text))
    client.cancel(run.id)
    wait_status(client, run.id, RunStatus.CANCELLED, what="cancellation")
    first = client.steps(run.id)[0]
    assert first.status == StepStatus.FAILED and first.error == "cancelled"
    # Cut mid-answer, not after the whole answer: part of the text, and the server was
    # still streaming when the client closed the connection.
    assert first.output["partial"].startswith("word word")
    assert len(first.output["partial"]) < len("word " * 400)
    wait_until(lambda: fake.disconnects > 0, what="the stream to be closed")
    assert fake.disconnects == 1


def test_compaction_near_a_tiny_window_continues_from_the_summary(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = "SUMMARY: the workspace holds alpha.md, beta.txt and gamma.md."

    def script(body: dict[str, Any], i: int) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and last[-1].get("text", "").startswith(SUMMARY_PROMPT[:20]):
            return Stream([Text(summary)], input_tokens=3000, output_tokens=60)
        if "Summary of the work so far" in json.dumps(body["messages"][0]):
            return Stream([Text("Finished from the summary.")], input_tokens=900)
        # Five turns of tool use; the fifth prompt nears the (patched) 4000-token window.
        return Stream(
            [Text(f"Turn {i + 1}."), ToolUse("list_files", {"path": "."})],
            input_tokens=3500 if i == 4 else 500,
        )

    fake = start_fake(script)
    model = make_model(fake)
    model.catalogue = tiny_window(HAIKU, 4000)
    assert model.context_window(HAIKU) == 4000  # the adapter reports the catalogue's window
    run = client.start_run("Survey", model=HAIKU, workspace=workspace)
    drain(client.store, make_executor(model))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    steps = client.steps(run.id)
    kinds = [s.kind for s in steps]
    assert kinds == [StepKind.MODEL_CALL, StepKind.TOOL_CALL] * 5 + [
        StepKind.COMPACTION,
        StepKind.MODEL_CALL,
    ]
    compaction = steps[10]
    assert compaction.status == StepStatus.COMPLETED
    assert compaction.output["summary"] == summary
    assert compaction.output["keep_messages"] == 5
    assert compaction.cost_usd > 0

    summarize, resumed = fake.requests[5].body, fake.requests[6].body
    # The summary call saw the older turns (with the tool definitions they need) and the
    # request to summarize.
    assert len(summarize["messages"]) == 6
    assert summarize["messages"][-1]["content"][0]["text"] == SUMMARY_PROMPT
    assert summarize["tools"]
    # The next call starts from the summary and keeps the recent turns verbatim.
    first = resumed["messages"][0]["content"][0]["text"]
    assert first.startswith("Goal: Survey") and summary in first
    assert [m["role"] for m in resumed["messages"]] == ["user"] + ["assistant", "user"] * 3
    assert resumed["messages"][1]["content"][0]["text"] == "Turn 3."
    assert done.cost_usd == pytest.approx(sum(s.cost_usd for s in steps))


def test_fallback_model_is_recorded_as_the_model_used(
    client: Client, make_executor: MakeExecutor, start_fake: StartFake
) -> None:
    def script(body: dict[str, Any], i: int) -> Reply:
        if body["model"] == SONNET:
            return Status(529, "overloaded_error", "Overloaded", {"retry-after": "0"})
        return Stream([Text("Answer from haiku.")], input_tokens=1000, output_tokens=100)

    fake = start_fake(script)
    model = ClaudeModel(
        lambda: KEY,
        FallbackSettings(HAIKU),
        base_url=fake.url,
        pacer=RateLimitPacer(),
        policy=RetryPolicy(backoff_s=0.01),
    )
    run = client.start_run("Overloaded", model=SONNET)
    drain(client.store, make_executor(model))
    assert client.run(run.id).status == RunStatus.COMPLETED
    (step,) = client.steps(run.id)
    assert step.name == SONNET  # the run's model
    assert step.output["model"] == HAIKU  # the model that answered, and priced
    assert step.cost_usd == pytest.approx((1000 * 1.0 + 100 * 5.0) / 1e6, abs=1e-12)


def test_state_after_a_compaction_is_the_same_restored_or_folded(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def script(body: dict[str, Any], i: int) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and last[-1].get("text", "").startswith(SUMMARY_PROMPT[:20]):
            # The summary call reads nearly the whole window too.
            return Stream([Text("SUMMARY")], input_tokens=3400, output_tokens=40)
        if i > 5:
            return Status(400, "invalid_request_error", "stop here")
        return Stream(
            [Text(f"Turn {i + 1}."), ToolUse("list_files", {"path": "."})],
            input_tokens=3500 if i == 4 else 500,
        )

    fake = start_fake(script)
    run = client.start_run("Survey", model=HAIKU, workspace=workspace)
    model = make_model(fake)
    model.catalogue = tiny_window(HAIKU, 4000)
    executor = make_executor(model, config=EngineConfig(snapshot_every=1))
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.NEEDS_ATTENTION  # the call after compacting
    assert client.steps(run.id)[10].kind == StepKind.COMPACTION

    restored, _ = restore_state(client.store, client.run(run.id))
    full = AgentState.initial(run.goal)
    for step in client.steps(run.id):
        apply_step(full, step)
    assert restored.scalars.to_json() == full.scalars.to_json()
    assert restored.conversation.messages == full.conversation.messages
    # Until a call measures the compacted prompt, nothing calls for another compaction.
    assert full.scalars.last_prompt_tokens == 0
