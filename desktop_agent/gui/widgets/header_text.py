"""The run header's words: a call, a duration, a status message, a path, in few characters.

Pure functions (no Qt): what the header shows is tested without a window.
"""

from __future__ import annotations

import json
from pathlib import Path

from desktop_agent.domain import Approval, Run
from desktop_agent.domain.agents import AgentKind


def call_summary(approval: Approval, keep: int = 60) -> str:
    """The call in a few words: the tool and its first arguments (``write_file report.md``)."""
    args = approval.arguments if isinstance(approval.arguments, dict) else {}
    parts = []
    for key in ("path", "to", "url", "query", "name", "command"):
        value = args.get(key)
        if value:
            parts.append(value if isinstance(value, str) else json.dumps(value))
    if not parts and args:
        key, value = next(iter(args.items()))
        parts.append(f"{key}={value if isinstance(value, str) else json.dumps(value)}")
    text = " ".join(" ".join(parts).split())
    text = text if len(text) <= keep else text[: keep - 1] + "…"
    return f"{approval.tool} {text}".strip()


def span(seconds: float) -> str:
    """A duration as a person reads it: ``45s``, ``3m 12s``, ``2h 05m``, ``3d 04h``."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {(s % 3600) // 60:02d}m"
    return f"{s // 86400}d {(s % 86400) // 3600:02d}h"


TOKENS_EXPLAINED = (
    "Tokens the run's model calls read and wrote. Cache: the share of the prompt read from "
    "the prompt cache (cheaper and faster than reading it afresh)."
)
TIME_EXPLAINED = "Time the run worked, as its time budget counts it: waits for you are not counted."
WALL_EXPLAINED = "Time since the run started, waits included: its time budget counts them."


def without_repeat(label: str, message: str) -> str:
    """``message`` without a leading ``label`` it repeats ("Cancelled — Cancelled; …").

    "Cancelled; partial report: r.md" under "Cancelled" reads "partial report: r.md";
    a message that is only the label reads as nothing more.
    """
    if not message.lower().startswith(label.lower()):
        return message
    rest = message[len(label) :]
    if rest and rest[0].isalnum():  # "Cancelled by you" is not a repeat of "Cancel"
        return message
    return rest.lstrip(" ;:,.—-")


def ratio(used: float, limit: float | None) -> float | None:
    """How much of ``limit`` ``used`` is (None: no limit)."""
    return None if not limit else used / limit


def short_workspace(path: str, keep: int = 48) -> str:
    """A workspace path with the home folder as ``~``, its start elided when long."""
    home = str(Path.home())
    if path == home or path.startswith(home.rstrip("/") + "/"):
        path = "~" + path[len(home.rstrip("/")) :]
    return path if len(path) <= keep else "…" + path[-(keep - 1) :]


def agent_label(run: Run) -> str:
    """The other Claude agent that drives ``run`` (``Claude Code``), or "" for our own loop."""
    if not run.spec.agent:
        return ""
    try:
        return AgentKind(run.spec.agent).label
    except ValueError:
        return run.spec.agent


def agent_words(run: Run) -> str:
    """What the header says of a run another agent drives ("" for our own runs).

    A Claude Code session is imported from its transcript: read-only here, never executed.
    """
    label = agent_label(run)
    if not label:
        return ""
    session = run.spec.session_id[:8]
    if run.spec.agent == AgentKind.CLAUDE_CODE:
        return f"{label} session {session} · read-only"
    return f"{label} session {session}" if session else f"driven by {label}"
