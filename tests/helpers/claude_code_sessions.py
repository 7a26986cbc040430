"""A Claude Code sessions folder with real-shaped transcripts, written for tests.

Claude Code keeps each session as a JSON Lines file in
``<config>/projects/<project>/<session id>.jsonl``, where ``<config>`` is
``CLAUDE_CONFIG_DIR`` (by default ``~/.claude``) and ``<project>`` the session's working
folder with every character other than a letter or a digit made a ``-``. A subagent's
transcript is ``<session id>/subagents/agent-<agent id>.jsonl`` beside it, with an
``agent-<agent id>.meta.json`` naming the ``tool_use`` that started it. Each line is one
entry: ``type`` (``user``, ``assistant``, or bookkeeping such as ``summary`` and
``custom-title``), ``uuid`` and ``parentUuid`` (the conversation is the chain of parents),
``sessionId``, ``timestamp`` (ISO 8601), ``cwd``, ``version``, ``gitBranch`` and
``message``: the Messages API's message, whose content blocks (``text``, ``thinking``,
``tool_use``, ``tool_result``) and ``usage`` are those of the API. An assistant response is
written one entry per content block, the entries sharing ``message.id``; a tool's result is
a ``user`` entry whose parent is the entry of its call.

Everything here is written from that description (the Claude Agent SDK's reader,
``claude_agent_sdk._internal.sessions``, reads it back in the tests); no real transcript
was copied.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VERSION = "2.1.40"
"""The Claude Code version the entries claim (any string: nothing reads it)."""

MODEL = "claude-sonnet-4-5-20250929"


def project_folder_name(cwd: Path) -> str:
    """The folder Claude Code keeps a project's sessions in: the path, non-alphanumerics as -."""
    return re.sub(r"[^a-zA-Z0-9]", "-", str(cwd.resolve()))


def iso(t: float) -> str:
    """``t`` (seconds since the epoch) as the transcripts write it: UTC, milliseconds, Z."""
    return (
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{int(t * 1000) % 1000:03d}Z"
    )


def usage(
    input_tokens: int = 12,
    output_tokens: int = 180,
    cache_write: int = 0,
    cache_read: int = 0,
    *,
    one_hour: bool = False,
) -> dict[str, Any]:
    """A Messages API ``usage`` object as Claude Code records it."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 0 if one_hour else cache_write,
            "ephemeral_1h_input_tokens": cache_write if one_hour else 0,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    """A thinking content block (with the signature the API adds)."""
    return {"type": "thinking", "thinking": value, "signature": "RXVzaWduYXR1cmU="}


def tool_use(name: str, arguments: dict[str, Any], use_id: str | None = None) -> dict[str, Any]:
    """A tool_use content block."""
    return {
        "type": "tool_use",
        "id": use_id or "toolu_" + uuid.uuid4().hex[:24],
        "name": name,
        "input": arguments,
    }


@dataclass
class Transcript:
    """One transcript file being written, entry by entry (appended, as Claude Code does).

    Attributes:
        path: the ``.jsonl`` file.
        session_id: the session's id (a UUID).
        cwd: the working folder the entries record.
        clock: the time of the next entry (seconds since the epoch; each entry moves it).
        sidechain: entries of a subagent (``isSidechain``, ``agentId``).
        agent_id: the subagent's id ("" for the main session).
    """

    path: Path
    session_id: str
    cwd: Path
    clock: float
    sidechain: bool = False
    agent_id: str = ""
    step_s: float = 3.0
    last: str | None = None
    owner_of: dict[str, str] = field(default_factory=dict)
    """The uuid of the entry that holds each tool_use id."""

    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> str:
        self.clock += self.step_s
        entry_id = str(uuid.uuid4())
        parent = extra.pop("parent", self.last)
        entry: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": self.sidechain,
            "userType": "external",
            "cwd": str(self.cwd),
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
        }
        if self.agent_id:
            entry["agentId"] = self.agent_id
        entry.update({"type": kind, "message": message, "uuid": entry_id})
        entry["timestamp"] = iso(self.clock)
        entry.update(extra)
        self.write_line(entry)
        self.last = entry_id
        return entry_id

    def write_line(self, entry: dict[str, Any]) -> None:
        """Append one JSON line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def user(self, prompt: str) -> str:
        """The person's prompt."""
        return self._entry("user", {"role": "user", "content": prompt})

    def assistant(
        self,
        *blocks: dict[str, Any],
        model: str = MODEL,
        spent: dict[str, Any] | None = None,
        stop_reason: str | None = None,
        cost_usd: float | None = None,
    ) -> list[str]:
        """One response: an entry per content block, all with the response's id and usage."""
        message_id = "msg_" + uuid.uuid4().hex[:24]
        out = []
        for block in blocks:
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": spent or usage(),
            }
            extra: dict[str, Any] = {"requestId": "req_" + message_id[4:]}
            if cost_usd is not None:
                extra["costUSD"] = cost_usd
            entry_id = self._entry("assistant", message, **extra)
            if block.get("type") == "tool_use":
                self.owner_of[str(block["id"])] = entry_id
            out.append(entry_id)
        return out

    def result(self, use_id: str, content: str, *, is_error: bool = False) -> str:
        """The result of a tool call, under the entry that made the call."""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": content}
        if is_error:
            block["is_error"] = True
        owner = self.owner_of[use_id]
        return self._entry(
            "user",
            {"role": "user", "content": [block]},
            parent=owner,
            toolUseResult={"stdout": content, "stderr": "", "interrupted": False},
            sourceToolAssistantUUID=owner,
        )

    def compact(self, summary: str) -> str:
        """A compaction: a boundary that starts the chain again, and the summary under it."""
        boundary = self._entry(
            "system",
            {"role": "system", "content": "Conversation compacted"},
            parent=None,
            subtype="compact_boundary",
            logicalParentUuid=self.last,
            compactMetadata={"trigger": "auto", "preTokens": 155_000},
        )
        return self._entry(
            "user", {"role": "user", "content": summary}, parent=boundary, isCompactSummary=True
        )

    def title(self, value: str) -> None:
        """The title the person gave the session (``/rename``)."""
        self.write_line(
            {"type": "custom-title", "customTitle": value, "sessionId": self.session_id}
        )


@dataclass
class ClaudeCodeFolder:
    """A Claude Code configuration folder (what ``CLAUDE_CONFIG_DIR`` names) under a test's tmp.

    Attributes:
        root: the folder (``projects/`` is inside).
    """

    root: Path

    @property
    def projects(self) -> Path:
        """The folder of every project's sessions."""
        return self.root / "projects"

    def session(
        self, cwd: Path, start: float = 1_790_000_000.0, session_id: str | None = None
    ) -> Transcript:
        """A new, empty session of the project in ``cwd``."""
        cwd.mkdir(parents=True, exist_ok=True)
        sid = session_id or str(uuid.uuid4())
        path = self.projects / project_folder_name(cwd) / f"{sid}.jsonl"
        return Transcript(path=path, session_id=sid, cwd=cwd.resolve(), clock=start)

    def subagent(
        self, parent: Transcript, use_id: str, agent_type: str, agent_id: str | None = None
    ) -> Transcript:
        """The transcript of a subagent the ``tool_use`` ``use_id`` of ``parent`` started."""
        aid = agent_id or uuid.uuid4().hex[:17]
        folder = parent.path.with_suffix("") / "subagents"
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"agentType": agent_type, "toolUseId": use_id}
        (folder / f"agent-{aid}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
        return Transcript(
            path=folder / f"agent-{aid}.jsonl",
            session_id=parent.session_id,
            cwd=parent.cwd,
            clock=parent.clock,
            sidechain=True,
            agent_id=aid,
            step_s=1.0,
        )

    def files(self) -> dict[Path, tuple[bytes, int]]:
        """Every file under the folder with its bytes and modification time (nanoseconds)."""
        return {
            p: (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
        }


def research_session(
    folder: ClaudeCodeFolder, cwd: Path, start: float = 1_790_000_000.0
) -> Transcript:
    """A small finished session: a prompt, thinking, a Grep, a Bash run, an Explore subagent.

    The Bash result holds the phrase ``fourteen flaky assertions``, the subagent's Read the
    phrase ``connection pool of eight``.
    """
    s = folder.session(cwd, start)
    s.user("Find out why the integration tests are flaky and summarise it")
    s.assistant(
        thinking("The flakiness is probably timing; look at the test runner first."),
        text("I'll look at the test configuration first."),
        tool_use("Grep", {"pattern": "retry", "path": "tests"}, "toolu_grep01"),
        spent=usage(10, 120, 2048, 0, one_hour=True),
    )
    s.result("toolu_grep01", "tests/conftest.py:12: retry = 3")
    s.assistant(
        tool_use(
            "Bash",
            {"command": "pytest -q tests/integration", "description": "Run them"},
            "toolu_bash01",
        ),
        spent=usage(8, 60, 0, 2048),
    )
    s.result("toolu_bash01", "2 failed, 40 passed: fourteen flaky assertions in test_sync.py")
    agent = tool_use(
        "Task",
        {"description": "Read the pool setup", "prompt": "Read db.py", "subagent_type": "Explore"},
        "toolu_task01",
    )
    s.assistant(agent, spent=usage(6, 40, 0, 2100))
    sub = folder.subagent(s, "toolu_task01", "Explore", agent_id="a1b2c3")
    sub.clock = s.clock
    sub.user("Read db.py")
    sub.assistant(
        tool_use("Read", {"file_path": str(cwd / "db.py")}, "toolu_read01"),
        model="claude-haiku-4-5-20251001",
        spent=usage(30, 20, 0, 500),
    )
    sub.result("toolu_read01", "POOL = Pool(size=8)  # a connection pool of eight")
    sub.assistant(
        text("db.py sets up a connection pool of eight."),
        model="claude-haiku-4-5-20251001",
        spent=usage(40, 15, 0, 520),
    )
    s.clock = sub.clock + 1
    s.result("toolu_task01", "The pool holds eight connections.")
    s.assistant(
        text("The tests share a pool of eight connections and time out under load."),
        spent=usage(5, 90, 0, 2200),
        stop_reason="end_turn",
    )
    return s
