"""Fakes for the things that cannot run here (Claude) or that tests must control (time).

Everything else in the tests is real: SQLite files, the worker, the tools, the CLI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import keyring.backend

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass, Usage
from desktop_agent.domain.errors import RunCancelled
from desktop_agent.engine.ports import (
    CancelToken,
    ModelRequest,
    ModelResponse,
    ToolContext,
    ToolResult,
)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds


Decide = Callable[[ModelRequest], "Reply"]


class Reply:
    """One scripted model answer: text and tool calls, or an exception to raise."""

    def __init__(
        self,
        text: str = "",
        calls: list[tuple[str, dict[str, JSON]]] | None = None,
        *,
        raises: BaseException | None = None,
        usage: Usage | None = None,
        cost: float = 0.001,
        stop_reason: str | None = None,
    ) -> None:
        self.text = text
        self.calls = calls or []
        self.raises = raises
        self.usage = usage or Usage(100, 20)
        self.cost = cost
        self.stop_reason = stop_reason


class ScriptedModel:
    """A model port answering from a script, recording every request it gets."""

    def __init__(self, replies: list[Reply] | Decide, *, delay: float = 0.0) -> None:
        self.replies = replies
        self.requests: list[ModelRequest] = []
        self.delay = delay
        self.window = 200_000
        self._lock = threading.Lock()

    def context_window(self, model: str) -> int:
        return self.window

    def compacts_on_server(self, model: str) -> bool:
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        return 0.01

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        with self._lock:
            self.requests.append(request)
            if callable(self.replies):
                reply = self.replies(request)
            else:
                index = len(self.requests) - 1
                reply = self.replies[min(index, len(self.replies) - 1)]
        if self.delay and cancel.wait(self.delay):
            raise RunCancelled("cancelled")
        if reply.raises is not None:
            raise reply.raises
        if reply.text:
            on_text(reply.text)
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        key = idempotency_key.replace(":", "_")
        for i, (name, args) in enumerate(reply.calls):
            content.append({"type": "tool_use", "id": f"tu_{key}_{i}", "name": name, "input": args})
        return ModelResponse(
            content=content,
            stop_reason=reply.stop_reason or ("tool_use" if reply.calls else "end_turn"),
            usage=reply.usage,
            cost_usd=reply.cost,
            model=request.model,
        )


class QuietTool:
    """What a test tool needs beside ``name``, ``description``, ``effect`` and ``run``.

    No arguments, no rule of its own for asking, no pre-run check, no probe; a subclass
    overrides what it tests.
    """

    version = "1"
    input_schema: Mapping[str, JSON] = {"type": "object", "properties": {}}
    approval = ApprovalPolicy.ALWAYS

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        return None


def call_once(tool: str, *, saying: str, then: str) -> Callable[[ModelRequest], Reply]:
    """A model script: call ``tool`` until its result comes back, then say ``then``."""

    def script(request: ModelRequest) -> Reply:
        answered = any(
            isinstance(b, dict) and b.get("type") == "tool_result"
            for m in request.messages
            for b in m["content"]
        )
        return Reply(then) if answered else Reply(saying, [(tool, {})])

    return script


class UnsafeTool(QuietTool):
    """An unsafe effect (like sending an e-mail) that logs each execution to a file."""

    name = "send_message"
    description = "Send a message to someone (cannot be undone)."
    input_schema: Mapping[str, JSON] = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "required": ["to", "text"],
    }
    effect = EffectClass.UNSAFE

    def __init__(self, outbox: Path, probe_answer: bool | None = None) -> None:
        self.outbox = outbox
        self.probe_answer = probe_answer

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        with self.outbox.open("a", encoding="utf-8") as f:
            f.write(f"{ctx.idempotency_key} {args.get('to')} {args.get('text')}\n")
        return ToolResult(f"sent to {args.get('to')}")

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        if self.probe_answer is not None:
            return self.probe_answer
        if not self.outbox.exists():
            return False
        return any(
            line.startswith(ctx.idempotency_key + " ")
            for line in self.outbox.read_text(encoding="utf-8").splitlines()
        )


class MemoryKeyring(keyring.backend.KeyringBackend):
    """An in-memory keyring for tests (installed with ``keyring.set_keyring``)."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.store:
            import keyring.errors

            raise keyring.errors.PasswordDeleteError("no such password")
        del self.store[(service, username)]
