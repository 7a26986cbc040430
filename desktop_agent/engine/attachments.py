"""The first user message names the files the analyst attached to the run.

The files are copied into the workspace when the run is started (``client/attachments.py``)
and recorded in its definition (``AgentSpec.attachments``); :func:`with_attachments` adds
their list to the goal's message of every request the same way, so the prefix the model
saw stays the same from turn to turn.

A run with code execution also puts its attachments into the container:
:func:`with_container_uploads` adds a ``container_upload`` block per file to the same
message, holding a descriptor under ``upload`` (the file's path, SHA-256 and size, and its
file id once the model port uploaded it, from the journal); the port sends the block as
the API takes it (``{"type": "container_upload", "file_id": ...}``) and never the key.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from desktop_agent.domain.models import Attachment

UPLOAD_KEY = "upload"
"""The key of a ``container_upload`` block holding a descriptor (never sent to the API)."""


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


def container_name(attachment: Attachment) -> str:
    """The name an attachment has in the code execution container (and the Files API).

    The file's own name with the start of its SHA-256 (``sales-3fa2b1c4.csv``): uploads
    are found again by name and size after a crash, so two different files must never
    share a name.
    """
    path = PurePosixPath(attachment.name or attachment.path or "file")
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in path.stem) or "file"
    return f"{stem}-{attachment.sha256[:8]}{path.suffix}"


def with_container_uploads(
    messages: list[dict[str, Any]],
    attachments: tuple[Attachment, ...],
    uploads: dict[str, str],
    *,
    first_is_goal: bool,
) -> list[dict[str, Any]]:
    """``messages`` whose goal message also puts the attachments in the code container.

    One ``container_upload`` block per attachment (its descriptor naming the upload the
    journal has for the file, by SHA-256) and a line telling the model the files' names
    in the container, after the attachments' note, the same way on every request.
    """
    if not attachments or not messages or not first_is_goal:
        return messages
    first = messages[0]
    content = first.get("content")
    if first.get("role") != "user" or not isinstance(content, list):
        return messages
    blocks: list[dict[str, Any]] = []
    for a in attachments:
        descriptor: dict[str, Any] = {
            "upload_name": container_name(a),
            "path": a.path,
            "blob": a.path,
            "sha256": a.sha256,
            "size": a.size,
        }
        if a.sha256 in uploads:
            descriptor["file_id"] = uploads[a.sha256]
        blocks.append({"type": "container_upload", UPLOAD_KEY: descriptor})
    names = ", ".join(f"{a.path} as {container_name(a)}" for a in attachments)
    note = {
        "type": "text",
        "text": "The same files are in the code execution container's input directory: "
        f"{names}. Files your code creates there are copied into the workspace's outputs "
        "folder.",
    }
    return [{**first, "content": [*content, note, *blocks]}, *messages[1:]]
