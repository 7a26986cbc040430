"""Keyring and network failures: clear messages, nothing lost, the run goes on afterwards.

* A keyring backend that breaks (a D-Bus error, a locked keyring, a file backend that
  wants a password and finds no terminal: ``EOFError``) never crashes the CLI: ``key set``
  saves nothing and says why, ``key status`` says the keyring failed, and
  a Claude run with no other key waits for one with a clear message.
* The model API unreachable (connection refused on 127.0.0.1): the run waits and says so,
  the failed call is in the journal, and once the API answers again the run finishes.
* A web page unreachable: ``web_fetch`` returns an error result the model reads.
"""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors
import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy
from desktop_agent.secrets import KeyStore
from tests.conftest import MakeExecutor
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, ToolUse
from tests.helpers.fakes import Reply as ScriptReply
from tests.helpers.fakes import ScriptedModel

KEY = "sk-ant-api03-faults-0123456789abcdef"
SONNET = "claude-sonnet-5-5"


class BrokenKeyring(keyring.backend.KeyringBackend):
    """A keyring whose every call raises the given error."""

    priority = 1

    def __init__(self, error: Exception) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.error = error

    def get_password(self, service: str, username: str) -> str | None:
        raise self.error

    def set_password(self, service: str, username: str, password: str) -> None:
        raise self.error

    def delete_password(self, service: str, username: str) -> None:
        raise self.error


@pytest.fixture(
    params=[
        RuntimeError("org.freedesktop.DBus.Error.ServiceUnknown"),
        keyring.errors.KeyringLocked("the keyring is locked"),
        EOFError("EOF when reading a line"),
    ],
    ids=["dbus", "locked", "no-terminal"],
)
def broken_keyring(request: pytest.FixtureRequest) -> Iterator[Exception]:
    previous = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring(request.param))
    yield request.param
    keyring.set_keyring(previous)
    KeyStore().delete()  # forget the session key this test set


def test_broken_keyring_gives_clear_messages_and_never_a_traceback(
    client: Client,
    broken_keyring: Exception,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = str(client.db_path)
    assert cli.main(["--db", db, "key", "status"]) == 0
    out = capsys.readouterr().out
    assert "the OS keyring failed" in out and str(broken_keyring) in out
    assert type(broken_keyring).__name__ not in out  # its words, not its class

    monkeypatch.setattr("sys.stdin", io.StringIO(KEY + "\n"))
    assert cli.main(["--db", db, "key", "set"]) == 2  # a CLI process cannot keep it
    err = capsys.readouterr().err
    assert "the OS keyring failed (" in err and "the key was not saved" in err
    assert "ANTHROPIC_API_KEY" in err and KEY not in err
    assert KeyStore().get() is None  # nothing claimed, nothing kept

    assert cli.main(["--db", db, "key", "delete"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_claude_run_without_a_readable_key_waits_for_one(
    client: Client, make_executor: MakeExecutor, broken_keyring: Exception, workspace: Path
) -> None:
    model = ClaudeModel(KeyStore().get, base_url="http://127.0.0.1:9", policy=RetryPolicy(0))
    run = client.start_run("Needs a key", model=SONNET, workspace=workspace)
    assert make_executor(model).execute(run.id) == RunStatus.WAITING
    waiting = client.run(run.id)
    assert waiting.wait_reason == WaitReason.CREDENTIALS
    assert "no API key" in waiting.status_message
    assert "desktop-agent key set" in waiting.status_message


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_model_api_unreachable_waits_with_a_message_then_finishes(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    script: list[Reply] = [
        Stream([Text("Reading alpha."), ToolUse("read_file", {"path": "alpha.md"})]),
        Stream([Text("Alpha: the market grew 4%.")]),
    ]
    run = client.start_run("Read alpha", model=SONNET, workspace=workspace)
    with FakeAnthropic(script) as fake:
        # First the API answers one call; then the network goes away.
        first = ClaudeModel(lambda: KEY, base_url=fake.url, policy=RetryPolicy(0))
        calls = {"n": 0}
        dead = ClaudeModel(
            lambda: KEY, base_url=f"http://127.0.0.1:{_closed_port()}", policy=RetryPolicy(0)
        )

        def route(_name: str) -> ClaudeModel:
            calls["n"] += 1
            return first if calls["n"] == 1 else dead

        executor = make_executor(first)
        executor.model_for = route
        assert executor.execute(run.id) == RunStatus.WAITING
        waiting = client.run(run.id)
        assert waiting.wait_reason == WaitReason.RATE_LIMIT and waiting.wake_at is not None
        assert waiting.status_message.startswith("Model API unavailable: cannot reach")
        assert "retrying in" in waiting.status_message
        steps = client.steps(run.id)
        assert [(s.kind, s.status) for s in steps] == [
            (StepKind.MODEL_CALL, StepStatus.COMPLETED),
            (StepKind.TOOL_CALL, StepStatus.COMPLETED),
            (StepKind.MODEL_CALL, StepStatus.FAILED),
        ]
        before = [(s.seq, s.output) for s in steps[:2]]

        # The network is back: the analyst wakes the run now (or the wake time comes).
        client.resume(run.id)
        assert make_executor(first).execute(run.id) == RunStatus.COMPLETED
    done = client.steps(run.id)
    assert [(s.seq, s.output) for s in done[:2]] == before
    assert done[-1].status == StepStatus.COMPLETED
    assert len(fake.requests) == 2  # the failed call never reached the API


def test_unreachable_web_page_is_an_error_result_the_model_reads(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    client.settings.allow_private_fetch = True
    url = f"http://127.0.0.1:{_closed_port()}/report"
    model = ScriptedModel(
        [ScriptReply("Fetching.", [("web_fetch", {"url": url})]), ScriptReply("It is down.")]
    )
    run = client.start_run("Fetch", model="claude-haiku-4-5", workspace=workspace)
    assert make_executor(model).execute(run.id) == RunStatus.COMPLETED
    (result,) = [
        b for b in model.requests[1].messages[-1]["content"] if b.get("type") == "tool_result"
    ]
    assert result["is_error"]
    assert "refused" in result["content"].lower() or "connect" in result["content"].lower()
