"""The first user message names the files the analyst attached to the run.

The files are copied into the workspace when the run is started (``client/attachments.py``)
and recorded in its definition (``AgentSpec.attachments``); :func:`with_attachments` adds
their list to the goal's message of every request the same way, so the prefix the model
saw stays the same from turn to turn.
"""

from __future__ import annotations

from typing import Any

from desktop_agent.domain.models import Attachment


def attachments_text(attachments: tuple[Attachment, ...]) -> str:
    """What the first user message says of the files the analyst attached."""
    lines = [
        "The analyst attached these files; copies are in the workspace (read them with "
        "read_file, paths relative to the workspace):"
    ]
    lines += [f"- {a.path} ({a.size_words})" for a in attachments]
    return "\n".join(lines)


def with_attachments(
    messages: list[dict[str, Any]],
    attachments: tuple[Attachment, ...],
    *,
    first_is_goal: bool,
) -> list[dict[str, Any]]:
    """``messages`` whose first one (the goal) also names the run's attachments.

    The note is a second text block of the goal's message, added to every request the
    same way (the prefix stays the same from turn to turn, and after a compaction of our
    own, whose fresh first message is the goal again). A conversation that starts with
    the API's compaction block has no goal message: its summary carries them. The
    conversation itself is not changed.
    """
    if not attachments or not messages or not first_is_goal:
        return messages
    first = messages[0]
    content = first.get("content")
    if first.get("role") != "user" or not isinstance(content, list):
        return messages
    note = {"type": "text", "text": attachments_text(attachments)}
    return [{**first, "content": [*content, note]}, *messages[1:]]
