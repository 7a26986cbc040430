"""Documents for Claude: a tool result that carries a file becomes a ``document`` block.

A tool that reads a PDF or a text file (``read_file``, ``web_fetch`` of a PDF) keeps its
text extraction as its result and adds a *descriptor* of the file to its data
(``tools/documents.py``); the engine copies the descriptor into the ``tool_result`` block
under the key ``document`` (with ``seq``, the step that read it, and ``file_id`` once the
file was uploaded, from the run's journal: ``engine/request.py``). This module turns it
into what the model reads, the same way on every request to one model:

* a model whose catalogue entry lists ``citations`` (and ``pdf_input`` for a PDF) gets the
  result's content as a short text line and a ``document`` block with
  ``citations: {"enabled": true}`` and the file's path or URL as ``title``; its source is
  the file itself (base64 for a PDF, the text for a text file) up to
  :data:`INLINE_MAX_BYTES`, and a ``file`` source (Files API) above it;
* any other model gets the tool's text, unchanged.

The key ``document`` is never sent. Uploads are the caller's (``llm/claude.py``): a file
is uploaded under a name made of the run and the file's SHA-256 (:func:`upload_name`), so
that a call repeated after a crash finds the upload in the API's list of files instead of
uploading again (:func:`find_upload`).

A run with code execution puts its attachments in the container the same way: the engine
adds a ``container_upload`` block holding a descriptor under ``upload`` (with the name the
file has in the container, which carries the start of its SHA-256); it is uploaded once
per run (:func:`pending_uploads` with ``container=True``) and sent as
``{"type": "container_upload", "file_id": ...}`` only while the request carries the code
execution tool (never without a file id: the block is left out until there is one).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop_agent.domain import JSON
from desktop_agent.domain.catalogue import ModelEntry

FILES_BETA = "files-api-2025-04-14"
"""Beta header of the Files API, also needed by a request naming a ``file_id``."""
INLINE_MAX_BYTES = 256 * 1024
"""Largest file sent inline; above it the file is uploaded once and named by ``file_id``.

Inline, every later request of the run carries the file again, base64 adding a third
(``bench/documents_bench.py``: at 256 KB a turn's request is already several times the
size of one naming a ``file_id``, and grows with the file; the upload is one extra
request, paid once per run).
"""
DOCUMENT_KEY = "document"
"""The key of a ``tool_result`` block holding a descriptor (never sent to the API)."""
UPLOAD_KEY = "upload"
"""The key of a ``container_upload`` block holding a descriptor (never sent to the API)."""
PDF = "application/pdf"
TEXT = "text/plain"


def takes_documents(entry: ModelEntry | None, media_type: str) -> bool:
    """Whether the model reads a file of ``media_type`` as a document with citations."""
    if entry is None or not entry.has("citations"):
        return False
    return media_type == TEXT or (media_type == PDF and entry.has("pdf_input"))


def upload_name(run_id: str, descriptor: Mapping[str, Any]) -> str:
    """The file name an upload of ``descriptor`` for ``run_id`` gets (one per run and file)."""
    run = "".join(c for c in run_id if c.isalnum() or c in "-_") or "run"
    ext = ".pdf" if descriptor.get("media_type") == PDF else ".txt"
    return f"desktop-agent-{run}-{str(descriptor.get('sha256', ''))[:32]}{ext}"


def read_blob(descriptor: Mapping[str, Any], workspace: str = "") -> bytes | None:
    """The file's bytes, if its copy is still there and still has its SHA-256.

    The copy's path is relative to the run's ``workspace`` (journals of an older version
    hold absolute paths: those are read as they are).
    """
    blob = Path(str(descriptor.get("blob", "")))
    if not blob.is_absolute():
        if not workspace or not str(blob) or ".." in blob.parts:
            return None
        blob = Path(workspace) / blob
    try:
        data = blob.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != descriptor.get("sha256"):
        return None
    return data


def descriptors(messages: Sequence[Mapping[str, JSON]]) -> list[Mapping[str, Any]]:
    """Every descriptor of the conversation, in order."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping) and isinstance(block.get(DOCUMENT_KEY), Mapping):
                out.append(block[DOCUMENT_KEY])
    return out


def container_descriptors(messages: Sequence[Mapping[str, JSON]]) -> list[Mapping[str, Any]]:
    """Every descriptor of a file for the code execution container, in order."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, Mapping) and isinstance(block.get(UPLOAD_KEY), Mapping):
                out.append(block[UPLOAD_KEY])
    return out


def pending_uploads(
    messages: Sequence[Mapping[str, JSON]],
    entry: ModelEntry | None,
    file_ids: Mapping[str, str],
    *,
    container: bool = False,
) -> list[Mapping[str, Any]]:
    """Descriptors that need an upload first (one per file).

    The documents the model reads that are too large to send inline and, with
    ``container``, the files for the code execution container without a file id.
    """
    out: dict[str, Mapping[str, Any]] = {}
    for d in container_descriptors(messages) if container else []:
        sha = str(d.get("sha256", ""))
        if not d.get("file_id") and sha not in file_ids and sha not in out:
            out[sha] = d
    for d in descriptors(messages):
        sha = str(d.get("sha256", ""))
        if (
            takes_documents(entry, str(d.get("media_type", "")))
            and int(d.get("size", 0) or 0) > INLINE_MAX_BYTES
            and not d.get("file_id")
            and sha not in file_ids
            and sha not in out
        ):
            out[sha] = d
    return list(out.values())


@dataclass
class Prepared:
    """The messages as sent, and the documents they hold in ``document_index`` order.

    Attributes:
        messages: copies where a descriptor was (the caller's are unchanged).
        documents: per document block, ``{"seq", "path", "title", "media_type",
            "file_id", "sha256"}``.
        files: whether a ``file`` source is sent (the request needs :data:`FILES_BETA`).
        uploads: per ``container_upload`` block sent, ``{"name", "path", "sha256",
            "file_id"}``.
    """

    messages: list[dict[str, JSON]]
    documents: list[dict[str, JSON]] = field(default_factory=list)
    files: bool = False
    uploads: list[dict[str, JSON]] = field(default_factory=list)


def prepare(
    messages: Sequence[Mapping[str, JSON]],
    entry: ModelEntry | None,
    file_ids: Mapping[str, str],
    workspace: str = "",
    *,
    container: bool = False,
) -> Prepared:
    """``messages`` as the model reads them (see the module docstring).

    ``file_ids`` (SHA-256 → file id) wins over a descriptor's own ``file_id`` (a file
    uploaded again after it expired). A large file without a file id, or a copy that is
    gone, stays the tool's text. ``container``: whether the request carries the code
    execution tool (without it, ``container_upload`` blocks are left out).
    """
    out = Prepared([])
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(
            isinstance(b, Mapping) and (DOCUMENT_KEY in b or UPLOAD_KEY in b) for b in content
        ):
            out.messages.append(dict(message))
            continue
        blocks: list[JSON] = []
        for block in content:
            if isinstance(block, Mapping) and DOCUMENT_KEY in block:
                blocks.append(_result_block(block, entry, file_ids, out, workspace))
            elif isinstance(block, Mapping) and UPLOAD_KEY in block:
                sent = _upload_block(block[UPLOAD_KEY], file_ids, out) if container else None
                if sent is not None:
                    blocks.append(sent)
            else:
                blocks.append(block)
        out.messages.append({**message, "content": blocks})
    return out


def _upload_block(d: Any, file_ids: Mapping[str, str], out: Prepared) -> dict[str, JSON] | None:
    """A ``container_upload`` block for descriptor ``d``, or None while it has no file id."""
    if not isinstance(d, Mapping):
        return None
    sha = str(d.get("sha256", ""))
    file_id = file_ids.get(sha) or (str(d["file_id"]) if d.get("file_id") else None)
    if not file_id:
        return None
    out.files = True
    out.uploads.append(
        {
            "name": str(d.get("upload_name", "")),
            "path": str(d.get("path", "")),
            "sha256": sha,
            "file_id": file_id,
        }
    )
    return {"type": "container_upload", "file_id": file_id}


def _result_block(
    block: Mapping[str, Any],
    entry: ModelEntry | None,
    file_ids: Mapping[str, str],
    out: Prepared,
    workspace: str,
) -> dict[str, JSON]:
    plain = {k: v for k, v in block.items() if k != DOCUMENT_KEY}
    d = block[DOCUMENT_KEY]
    if not isinstance(d, Mapping) or block.get("is_error"):
        return plain
    media = str(d.get("media_type", ""))
    if not takes_documents(entry, media):
        return plain
    sha = str(d.get("sha256", ""))
    file_id = file_ids.get(sha) or (str(d["file_id"]) if d.get("file_id") else None)
    source: dict[str, JSON]
    if file_id:
        source = {"type": "file", "file_id": file_id}
        out.files = True
    elif (
        int(d.get("size", 0) or 0) <= INLINE_MAX_BYTES
        and (data := read_blob(d, workspace)) is not None
    ):
        if media == PDF:
            source = {"type": "base64", "media_type": PDF, "data": base64.b64encode(data).decode()}
        else:
            source = {"type": "text", "media_type": TEXT, "data": data.decode("utf-8", "replace")}
    else:
        return plain
    title = str(d.get("title") or d.get("path") or "document")[:500]
    note = (
        f"{title}: {media}, {int(d.get('size', 0) or 0)} bytes [file sha256: {sha[:16]}]. "
        "The document follows; cite it."
    )
    document: dict[str, JSON] = {
        "type": "document",
        "source": source,
        "title": title,
        "citations": {"enabled": True},
    }
    out.documents.append(
        {
            "seq": int(d.get("seq", 0) or 0),
            "path": str(d.get("path") or title),
            "title": title,
            "media_type": media,
            "file_id": file_id,
            "sha256": sha,
        }
    )
    return {**plain, "content": [{"type": "text", "text": note}, document]}


def find_upload(files: Any, name: str, size: int) -> str | None:
    """The id of a live file called ``name`` of ``size`` bytes in the API's list, if any.

    ``files`` is the SDK's ``client.beta.files``; the list is read page by page.
    """
    for meta in files.list(limit=1000, betas=[FILES_BETA]):
        if getattr(meta, "filename", None) != name or getattr(meta, "size_bytes", -1) != size:
            continue
        if getattr(meta, "expires_at", None) is not None and _expired(meta.expires_at):
            continue
        return str(meta.id)
    return None


def _expired(when: Any) -> bool:
    import datetime as dt

    try:
        return bool(when <= dt.datetime.now(dt.UTC))
    except TypeError:
        return False
