"""Attachments of ``POST /v1/runs``: files in the JSON body, base64-encoded.

``"attachments": [{"name": "data.csv", "content_base64": "..."}]``. The body keeps the
limit of every body (``MAX_BODY_BYTES``, 1 MiB: about 750 KB of files once encoded), and
the files at most :data:`API_MAX_BYTES` decoded; larger files are for the CLI
(``desktop-agent run --attach``) or the app. The files are written to a temporary folder
and handed to ``Client.start_run`` under their names, which the client sanitises (a name
that is a path is refused: 400) and copies into the run's workspace; the temporary copies
are removed when the call ends, started or not.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from desktop_agent.client.attachments import AttachmentSource, safe_name
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.models import size_words
from desktop_agent.httpapi.inputs import MAX_BODY_BYTES, BodyTooLargeError

API_MAX_BYTES = MAX_BODY_BYTES * 3 // 4
"""The most bytes of files (decoded) one call may attach: what the body limit lets in."""

T = TypeVar("T")


class AttachmentsTooLargeError(BodyTooLargeError):
    """The files of one call are over :data:`API_MAX_BYTES` (413)."""

    def __init__(self, name: str) -> None:
        Exception.__init__(
            self,
            f"attachment {name} brings the files over the API's limit of "
            f"{size_words(API_MAX_BYTES)} in all: attach larger files with "
            "`desktop-agent run --attach` or in the app",
        )


def decoded(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The ``attachments`` of a body: (sanitised name, content) pairs, checked.

    Raises:
        InvalidInputError: not a list of ``{name, content_base64}`` objects, a name that is
            a path, content that is not base64.
        AttachmentsTooLargeError: the files together are over :data:`API_MAX_BYTES`.
    """
    items = body.get("attachments")
    if items is None:
        return []
    if not isinstance(items, list):
        raise InvalidInputError("'attachments' must be a list of {name, content_base64}")
    out: list[tuple[str, bytes]] = []
    total = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInputError(f"attachments[{i}] must be an object {{name, content_base64}}")
        name, data = item.get("name"), item.get("content_base64")
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"attachments[{i}].name is required: a file name")
        if not isinstance(data, str):
            raise InvalidInputError(f"attachments[{i}].content_base64 is required: base64 text")
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInputError(
                f"attachments[{i}] ({name}): content_base64 is not valid base64"
            ) from None
        total += len(content)
        if total > API_MAX_BYTES:
            raise AttachmentsTooLargeError(name)
        out.append((safe_name(name), content))
    return out


@contextmanager
def staged(files: list[tuple[str, bytes]]) -> Iterator[list[AttachmentSource]]:
    """The files written to a temporary folder, as sources for ``Client.start_run``."""
    if not files:
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="desktop-agent-upload-") as tmp:
        sources = []
        for i, (name, content) in enumerate(files):
            path = Path(tmp) / str(i)
            path.write_bytes(content)
            sources.append(AttachmentSource(path, name))
        yield sources


def with_files(files: list[tuple[str, bytes]], start: Callable[[list[AttachmentSource]], T]) -> T:
    """``start(sources)`` while the files are on disk (blocking: call it in a thread)."""
    with staged(files) as sources:
        return start(sources)
