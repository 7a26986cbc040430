"""Descriptors of the files a tool read, for models that read documents with citations.

``read_file`` (a PDF or a text file) and ``web_fetch`` (a PDF) return their text
extraction as before, and add ``data["document"]``, a descriptor of the file: the model
adapter sends the file itself as a ``document`` block to a model that takes one, and the
text to any other (``llm/documents.py``). The file's bytes are kept, addressed by their
SHA-256, under ``<workspace>/.cache/documents/`` so that every later request of the run
(and an upload) reads exactly the bytes the tool read, even if the file changes.

Descriptor keys: ``path`` (the workspace path or the URL), ``title`` (the same),
``media_type`` (``application/pdf`` or ``text/plain``), ``sha256``, ``size`` (bytes) and
``blob`` (the kept copy's path, relative to the workspace).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from desktop_agent.domain import JSON
from desktop_agent.engine.ports import ToolInputError
from desktop_agent.tools.workspace import confine

CACHE_DIR = ".cache/documents"
PDF = "application/pdf"
TEXT = "text/plain"
MAX_PDF_BYTES = 32 * 1024 * 1024
"""Largest PDF offered as a document (the Messages API's request limit; the Files API
takes larger files, but a model reads at most a few hundred pages of one)."""
MAX_TEXT_BYTES = 2 * 1024 * 1024
"""Largest text file offered as a document."""


def descriptor(
    workspace: Path, data: bytes, *, path: str, media_type: str
) -> dict[str, JSON] | None:
    """A descriptor of ``data`` (kept under the workspace), or None when it cannot be one.

    None: too large, not a PDF (for a PDF), not UTF-8 text (for a text file), or no place
    to keep the copy.
    """
    limit = MAX_PDF_BYTES if media_type == PDF else MAX_TEXT_BYTES
    if not data or len(data) > limit:
        return None
    if media_type == PDF and not data.startswith(b"%PDF-"):
        return None
    if media_type == TEXT:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    sha = hashlib.sha256(data).hexdigest()
    ext = ".pdf" if media_type == PDF else ".txt"
    try:
        blob = confine(workspace, f"{CACHE_DIR}/{sha}{ext}")
    except ToolInputError:  # .cache made into a link leading out
        return None
    if not _keep(blob, data):
        return None
    return {
        "path": path,
        "title": path,
        "media_type": media_type,
        "sha256": sha,
        "size": len(data),
        "blob": f"{CACHE_DIR}/{sha}{ext}",  # under the workspace: no machine's folder
    }


def _keep(blob: Path, data: bytes) -> bool:
    """Write the copy once (atomically); True when it is there.

    The temporary file is named after the copy, not at random: a read killed between
    writing it and renaming it is repeated under the same name, which takes it over, so
    no stray file is left in the workspace. Two runs keeping the same file at once write
    the same bytes; whichever renames second finds the copy already there.
    """
    tmp = blob.with_name(f".tmp-{blob.name}")
    try:
        if blob.is_file() and blob.stat().st_size == len(data):
            return True
        blob.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, blob)
    except OSError:
        tmp.unlink(missing_ok=True)
        return blob.is_file() and blob.stat().st_size == len(data)
    return True
