"""The Claude Agent SDK's side of an Agent SDK run: options, hooks, and what its messages hold.

A worker's driver (``worker/agent_sdk.py``) runs one connection of the SDK's
``ClaudeSDKClient`` per activation; this module knows the SDK and nothing of the journal:

* :func:`session_options`: the ``ClaudeAgentOptions`` of a connection: the run's
  workspace, model and effort, the session store (``resume`` once the session is known),
  a fresh ``CLAUDE_CONFIG_DIR`` (nothing is read from a worker's own disk: a resumed session
  comes from the store), the non-essential traffic of the Claude Code CLI turned off, and
  the ``PreToolUse`` hook desktop-agent registers.
* The answer to a call the session *replays*. A call the analyst had to approve is
  deferred (the hook answers ``defer``: the CLI stops, the call kept in its transcript);
  resuming the session runs the ``PreToolUse`` hooks for it again, and the CLI may do so
  before the SDK has registered its in-process hooks (seen with the bundled CLI, as
  claude-agent-sdk-python issue 993 reports). So the decision is also given as a command
  hook in the ``--settings`` of that connection (:func:`replay_settings`), which the CLI
  reads at start: it answers the replayed call's id, and nothing else.
* :func:`block_json`, :func:`usage_of`, :func:`result_text`: the SDK's message objects as
  the journal's JSON; :class:`Transcript`: what a stored session says of tool results and
  deferred calls (after a crash, the store is the one truth of what the session did).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ServerToolResultBlock,
    ServerToolUseBlock,
    SessionStore,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

from desktop_agent.domain import JSON, Usage

QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
"""The Claude Code CLI's variables that keep it to the model calls of the session (no
telemetry, error reports, update checks or other non-essential requests)."""

CONTINUE_PROMPT = "Continue from where you left off."
"""What a resumed session is told when the analyst has no note for it."""

Hook = Callable[[HookInput, str | None, HookContext], Any]


def allow(updated: Mapping[str, JSON] | None = None) -> dict[str, Any]:
    """The ``PreToolUse`` answer that runs the call (with ``updated`` arguments, if given)."""
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": "allow"}
    if updated is not None:
        out["updatedInput"] = dict(updated)
    return out


def deny(reason: str) -> dict[str, Any]:
    """The ``PreToolUse`` answer that refuses the call; the model reads ``reason``."""
    return {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }


def defer() -> dict[str, Any]:
    """The ``PreToolUse`` answer that stops the session with the call kept for later."""
    return {"hookEventName": "PreToolUse", "permissionDecision": "defer"}


def hook_output(answer: Mapping[str, Any]) -> HookJSONOutput:
    """A ``PreToolUse`` answer as a hook callback returns it."""
    return cast(HookJSONOutput, {"hookSpecificOutput": dict(answer)})


@dataclass(frozen=True)
class Replay:
    """The analyst's decision about the deferred call a resumed session runs again."""

    tool_use_id: str
    answer: dict[str, Any]


def replay_settings(replay: Replay, folder: Path) -> str:
    """Settings (inline JSON) whose command hook answers ``replay``'s call, and only it.

    The answer and a small POSIX shell script go into ``folder`` (the connection's own).
    """
    answer = folder / "replay-answer.json"
    answer.write_text(json.dumps({"hookSpecificOutput": replay.answer}), encoding="utf-8")
    script = folder / "replay-hook.sh"
    script.write_text(
        "# The PreToolUse hook of a resumed session: the analyst's decision for the call\n"
        "# it replays; no opinion ({}) on any other call.\n"
        f"if grep -F -- {shlex.quote(replay.tool_use_id)} >/dev/null; then\n"
        f"  cat {shlex.quote(str(answer))}\n"
        "else\n"
        "  echo '{}'\n"
        "fi\n",
        encoding="utf-8",
    )
    command = f"sh {shlex.quote(str(script))}"
    hooks = {"PreToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": command}]}]}
    return json.dumps({"hooks": hooks})


GUARD_PARENT_ENV = "DESKTOP_AGENT_CLI_PARENT"
"""The worker's process id, for the CLI's launcher (see :func:`guarded_cli`)."""

_LAUNCHER = """
import ctypes, os, sys
# Die with the worker: a CLI left behind by a killed worker would go on spending.
ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
if os.getppid() != int(os.environ.get("{parent}", "0") or 0):
    sys.exit("the worker that started the Claude Code CLI is gone")
os.execv({cli!r}, [{cli!r}, *sys.argv[1:]])
"""


def claude_cli() -> str | None:
    """The Claude Code CLI the SDK runs: the one its wheel bundles, else ``claude``."""
    import claude_agent_sdk

    name = "claude.exe" if sys.platform == "win32" else "claude"
    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / name
    return str(bundled) if bundled.is_file() else shutil.which("claude")


def guarded_cli(folder: Path) -> str | None:
    """A launcher of the Claude Code CLI that dies with the worker, on Linux (else None).

    A worker killed with SIGKILL cannot stop the CLI it started; the CLI would finish its
    turn alone (model calls nobody records). The launcher asks the kernel to kill the
    CLI when its parent dies (``PR_SET_PDEATHSIG``), then becomes the CLI (``execv``).
    """
    cli = claude_cli()
    if sys.platform != "linux" or getattr(sys, "frozen", False) or cli is None:
        return None
    launcher = folder / "claude"
    launcher.write_text(
        f"#!{sys.executable} -I\n" + _LAUNCHER.format(parent=GUARD_PARENT_ENV, cli=cli),
        encoding="utf-8",
    )
    launcher.chmod(0o700)
    return str(launcher)


def session_options(
    *,
    workspace: str,
    model: str,
    effort: str,
    system_prompt: str,
    store: object,
    resume: str | None,
    hook: Hook,
    folder: Path,
    api_key: str | None,
    replay: Replay | None = None,
    stderr: Callable[[str], None] | None = None,
) -> ClaudeAgentOptions:
    """The options of one connection of the run's session (see the module).

    Args:
        workspace: the run's folder (the session's working directory).
        model: the run's model id.
        effort: the run's effort ("" for the model's default).
        system_prompt: added to Claude Code's own ("" for none).
        store: the session store (``persistence/sdk_sessions.py``).
        resume: the session to resume (None: a new session).
        hook: desktop-agent's ``PreToolUse`` hook.
        folder: an empty folder of this connection (``CLAUDE_CONFIG_DIR``, the replay's
            hook); the caller removes it afterwards.
        api_key: the Anthropic API key (None: the CLI finds its own credentials).
        replay: the decision for the deferred call this connection runs again.
        stderr: told each line the CLI writes to its standard error.
    """
    env = {
        **QUIET_ENV,
        "CLAUDE_CONFIG_DIR": str(folder / "config"),
        GUARD_PARENT_ENV: str(os.getpid()),
    }
    if api_key:
        env["ANTHROPIC_API_KEY"] = api_key
    preset: dict[str, Any] = {"type": "preset", "preset": "claude_code"}
    if system_prompt.strip():
        preset["append"] = system_prompt
    return ClaudeAgentOptions(
        cwd=workspace,
        model=model,
        effort=cast(Any, effort) if effort else None,
        system_prompt=cast(Any, preset),
        session_store=cast(SessionStore, store),
        session_store_flush="eager",
        resume=resume,
        env=env,
        setting_sources=[],
        settings=replay_settings(replay, folder) if replay is not None else None,
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[hook], on_failure="block")]},
        stderr=stderr,
        cli_path=guarded_cli(folder),
    )


# --------------------------------------------------------------------------- messages


def block_json(block: object) -> dict[str, Any] | None:
    """A content block of an assistant message as the journal keeps it (None: not kept)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ServerToolUseBlock):
        return {
            "type": "server_tool_use",
            "id": block.id,
            "name": str(block.name),
            "input": block.input,
        }
    if isinstance(block, ServerToolResultBlock):
        return {
            "type": str(block.content.get("type") or "server_tool_result"),
            "tool_use_id": block.tool_use_id,
            "content": block.content,
        }
    return None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(raw: Mapping[str, Any] | None) -> tuple[Usage, int, dict[str, int]]:
    """A message's usage: tokens, those written to the cache for an hour, server tool uses."""
    raw = raw or {}
    usage = Usage(
        _int(raw.get("input_tokens")),
        _int(raw.get("output_tokens")),
        _int(raw.get("cache_creation_input_tokens")),
        _int(raw.get("cache_read_input_tokens")),
    )
    creation = raw.get("cache_creation")
    hour = _int(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, dict) else 0
    servers = raw.get("server_tool_use")
    counts = (
        {str(k): _int(v) for k, v in servers.items() if _int(v)}
        if isinstance(servers, dict)
        else {}
    )
    return usage, hour, counts


def result_text(content: object) -> str:
    """A tool result's content as text (its text blocks, or the JSON of anything else)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(b.get("text", "")) if isinstance(b, dict) and b.get("type") == "text" else ""
            for b in content
        ]
        if any(parts):
            return "\n".join(p for p in parts if p)
    return json.dumps(content, ensure_ascii=False)


def tool_results(content: object) -> list[ToolResultBlock]:
    """The tool results a user message of the session carries."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, ToolResultBlock)]


@dataclass
class Transcript:
    """What a stored session's main transcript says of its tool calls.

    Attributes:
        results: each answered tool use's result: its text and whether it is an error.
        deferred: the calls the ``PreToolUse`` hook deferred, in order.
    """

    results: dict[str, tuple[str, bool]] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, entries: Sequence[Mapping[str, Any]]) -> Transcript:
        """Read the transcript's lines (the session store's entries)."""
        found = cls()
        for entry in entries:
            attachment = entry.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "hook_deferred_tool":
                found.deferred.append(str(attachment.get("toolUseID")))
            message = entry.get("message")
            if entry.get("type") != "user" or not isinstance(message, dict):
                continue
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    text = result_text(block.get("content"))
                    found.results[str(block.get("tool_use_id"))] = (
                        text,
                        bool(block.get("is_error")),
                    )
        return found

    @property
    def waiting(self) -> str | None:
        """The deferred call the session will run again when resumed, if one waits."""
        if self.deferred and self.deferred[-1] not in self.results:
            return self.deferred[-1]
        return None
