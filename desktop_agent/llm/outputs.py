"""Files code execution wrote: found in an answer, downloaded into the run's workspace.

An answer's code execution results name the files the code wrote by ``file_id``
(``bash_code_execution_output`` and ``code_execution_output`` blocks, SDK 2.14); the Files
API serves their bytes (``GET /v1/files/{id}/content``; only files a tool made can be
downloaded). :func:`save_outputs` copies each into the workspace's ``outputs`` folder under
its own name, never over another file (``chart.png``, then ``chart-2.png``), and returns
what the model step lists: path, size, SHA-256 and file id.

A download is an effect between the answer and the step's outcome, which is written with
the run's next commit: a crash in between sends the model call again, and its answer
names new file ids. So that the replay never saves the same output under a second name,
each step first writes its plan (file id → path) to a small ledger under the workspace's
``.cache/outputs`` (named after the step's key, ``RUN:SEQ``), fsynced, before it downloads
anything: a replay of the step reads the plan and saves a file of the same name to the
same path (the earlier attempt's copy was never listed anywhere), and removes what the
earlier attempt saved that the replay does not make. Each file is written to a temporary
name beside the ledger and renamed into place once complete, so ``outputs`` never holds
half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from desktop_agent.domain import JSON

log = logging.getLogger(__name__)

OUTPUTS = "outputs"
"""The workspace folder that receives the files code execution wrote."""
LEDGER = ".cache/outputs"
"""Where each step's plan of downloads (and the downloads under way) are kept."""
MAX_NAME = 120
"""The longest file name kept (the extension is kept whole)."""

_RESULT_TYPES = frozenset({"bash_code_execution_tool_result", "code_execution_tool_result"})
_OUTPUT_TYPES = frozenset({"bash_code_execution_output", "code_execution_output"})


def produced_file_ids(content: Iterable[Mapping[str, Any]]) -> list[str]:
    """The file ids an answer's code execution results name, in order, each once."""
    out: list[str] = []
    for block in content:
        if block.get("type") not in _RESULT_TYPES:
            continue
        result = block.get("content")
        outputs = result.get("content") if isinstance(result, Mapping) else None
        for item in outputs if isinstance(outputs, list) else []:
            if isinstance(item, Mapping) and item.get("type") in _OUTPUT_TYPES:
                file_id = str(item.get("file_id") or "")
                if file_id and file_id not in out:
                    out.append(file_id)
    return out


def safe_name(raw: str, file_id: str) -> str:
    """A plain file name for ``raw`` (the name the code gave the file, any folders dropped)."""
    name = PurePosixPath(str(raw).replace("\\", "/")).name.strip().lstrip(".")
    name = "".join(c if c.isalnum() or c in "-_.+ ()" else "_" for c in name)
    if not name:
        return f"file-{file_id[-8:] or 'unnamed'}"
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return name[:MAX_NAME]
    return stem[: max(1, MAX_NAME - len(ext) - 1)] + "." + ext


def free_path(root: Path, name: str, taken: set[str]) -> str:
    """``outputs/NAME``, or ``NAME-2``, ``NAME-3`` … when a file or ``taken`` has it."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    n = 1
    while True:
        candidate = name if n == 1 else f"{stem}-{n}" + (f".{ext}" if ext else "")
        rel = f"{OUTPUTS}/{candidate}"
        if rel not in taken and not (root / candidate).exists():
            return rel
        n += 1


def ledger_path(workspace: Path, key: str) -> Path:
    """The plan of step ``key``'s downloads."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in key)
    return workspace / LEDGER / f"{safe}.json"


def _read_plan(path: Path) -> dict[str, list[str]]:
    """An earlier attempt's plan: each name → its paths, in order (empty when none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    plan: dict[str, list[str]] = {}
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and f.get("name") and str(f.get("path", "")).startswith(OUTPUTS):
            plan.setdefault(str(f["name"]), []).append(str(f["path"]))
    return plan


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_outputs(
    files: Any,
    workspace: str,
    key: str,
    file_ids: Sequence[str],
    betas: Sequence[str] = (),
) -> list[dict[str, JSON]]:
    """Download each of ``file_ids`` into ``workspace/outputs`` (see the module docstring).

    ``files`` is the SDK's ``client.beta.files``. A file that cannot be read (the API
    refuses, the network fails, the disk is full) is listed with its ``error`` and the
    others are still saved: the answer stands, and the analyst sees what is missing.
    """
    if not file_ids or not workspace:
        return []
    ws = Path(workspace)
    root = ws / OUTPUTS
    ledger = ledger_path(ws, key)
    earlier = _read_plan(ledger)
    extra: dict[str, Any] = {"betas": list(betas)} if betas else {}
    planned: list[dict[str, JSON]] = []
    taken: set[str] = set()
    for file_id in file_ids:
        try:
            meta = files.retrieve_metadata(file_id, **extra)
            name = safe_name(str(getattr(meta, "filename", "") or ""), file_id)
            media = str(getattr(meta, "mime_type", "") or "")
        except Exception as exc:  # the API's or the network's: listed, not raised
            planned.append({"file_id": file_id, "error": _why(exc)})
            continue
        mine = [p for p in earlier.get(name, []) if p not in taken]
        path = mine[0] if mine else free_path(root, name, taken | _kept(earlier))
        taken.add(path)
        planned.append({"file_id": file_id, "name": name, "path": path, "media_type": media})
    plan = {"key": key, "files": [p for p in planned if "path" in p]}
    _write_atomically(ledger, json.dumps(plan, indent=1).encode())
    for stale in _kept(earlier) - taken:
        # The earlier attempt's copy of a file this attempt does not make: never listed.
        with contextlib.suppress(OSError):
            (ws / stale).unlink()
    out: list[dict[str, JSON]] = []
    for entry in planned:
        if "path" not in entry:
            out.append(entry)
            continue
        try:
            size, sha = _download(files, str(entry["file_id"]), ws, str(entry["path"]), extra)
        except Exception as exc:
            log.warning("could not save %s from code execution: %s", entry["name"], exc)
            out.append({**entry, "error": _why(exc)})
            continue
        out.append({**entry, "size": size, "sha256": sha})
    return out


def _kept(earlier: Mapping[str, list[str]]) -> set[str]:
    """Paths an earlier attempt took: free for the files of the same name only."""
    return {p for paths in earlier.values() for p in paths}


def _download(
    files: Any, file_id: str, ws: Path, rel: str, extra: Mapping[str, Any]
) -> tuple[int, str]:
    """Stream one file to a temporary name, then rename it into place; (size, sha256)."""
    final = ws / rel
    part = ws / LEDGER / f"{''.join(c for c in file_id if c.isalnum() or c in '-_')}.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    with (
        files.with_streaming_response.download(file_id, **extra) as response,
        open(part, "wb") as f,
    ):
        for chunk in response.iter_bytes():
            f.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, final)
    _sync_dir(final.parent)
    return size, digest.hexdigest()


def _why(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "message", "") or exc).split())
    return text[:300] or "the file could not be read"
