"""Workspace file tools: list, read, search, write, append a note."""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path

from pydantic import Field

from desktop_agent.domain import JSON, EffectClass
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.tools import documents
from desktop_agent.tools.base import ToolArgs, TypedTool, result
from desktop_agent.tools.workspace import confine, relative

MAX_READ_CHARS = 100_000
MAX_LIST = 500
_TEXT_SUFFIXES = {
    ".md",
    ".txt",
    ".csv",
    ".json",
    ".html",
    ".htm",
    ".rst",
    ".py",
    ".yaml",
    ".yml",
    ".xml",
    ".log",
    ".tsv",
}


MAX_FILE_BYTES = 50_000_000


def _read_text(path: Path) -> str:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ToolInputError(f"{path.name} is larger than {MAX_FILE_BYTES // 1_000_000} MB")
    if path.suffix.lower() == ".pdf":
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError

        try:
            reader = PdfReader(str(path))
            return "\n\n".join((page.extract_text() or "") for page in reader.pages)
        except (PyPdfError, ValueError, KeyError) as exc:
            raise ToolInputError(f"{path.name} cannot be read as a PDF: {exc}") from None
    data = path.read_bytes()
    if b"\x00" in data[:4096]:
        raise ToolInputError(f"{path.name} is a binary file")
    return data.decode("utf-8", errors="replace")


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ListArgs(ToolArgs):
    """Arguments of list_files."""

    path: str = Field(default=".", description="folder relative to the workspace")


class ListFiles(TypedTool[ListArgs]):
    """List the files of the workspace."""

    name = "list_files"
    description = "List files in the workspace (recursively), one per line with its size."
    args_model = ListArgs

    def call(self, args: ListArgs, ctx: ToolContext) -> ToolResult:
        """List files under ``args.path``."""
        root = confine(ctx.workspace, args.path)
        if not root.is_dir():
            return result(f"{args.path!r} is not a folder", error=True)
        lines: list[str] = []
        skipped: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                p = Path(dirpath) / name
                try:
                    rel = relative(ctx.workspace, p)
                    confine(ctx.workspace, rel)
                    size = p.stat().st_size
                except RuntimeError:  # Path.resolve() on a symlink loop
                    skipped.append(f"[skipped {_shown(ctx.workspace, p)}: a symlink loop]")
                    continue
                except (ToolInputError, OSError, ValueError):
                    continue
                lines.append(f"{rel}  {size} bytes")
                if len(lines) >= MAX_LIST:
                    lines.append(f"[listing stopped at {MAX_LIST} files]")
                    return result("\n".join(lines + skipped))
        return result("\n".join(lines + skipped) if lines or skipped else "(no files)")


def _shown(workspace: Path, path: Path) -> str:
    """``path`` as the model knows it (relative to the workspace), without resolving it."""
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return path.name


class ReadArgs(ToolArgs):
    """Arguments of read_file."""

    path: str = Field(description="file relative to the workspace")
    offset: int = Field(default=0, ge=0, description="character offset to start at")


class ReadFile(TypedTool[ReadArgs]):
    """Read a text, Markdown or PDF file."""

    name = "read_file"
    description = (
        "Read a file of the workspace as text (Markdown, text, CSV, PDF...). Long files are "
        f"returned {MAX_READ_CHARS} characters at a time; pass offset to continue."
    )
    args_model = ReadArgs

    def call(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        """Read the file."""
        path = confine(ctx.workspace, args.path)
        if not path.is_file():
            return result(f"no file {args.path!r} in the workspace", error=True)
        try:
            text = _read_text(path)
        except OSError as exc:
            return result(f"cannot read {args.path}: {exc.strerror}", error=True)
        chunk = text[args.offset : args.offset + MAX_READ_CHARS]
        if args.offset + MAX_READ_CHARS < len(text):
            rest = len(text) - args.offset - MAX_READ_CHARS
            chunk += f"\n[... {rest} more characters; offset={args.offset + MAX_READ_CHARS}]"
        digest = sha256_of(path)
        data: dict[str, JSON] = {"sha256": digest}
        if args.offset == 0:
            chunk += f"\n[file sha256: {digest[:16]}]"
            document = _document(path, args.path, ctx)
            if document is not None:
                data["document"] = document
        return result(chunk, data=data)


def _document(path: Path, shown: str, ctx: ToolContext) -> dict[str, JSON] | None:
    """The file as a document for models that read one (``tools/documents.py``)."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        media = documents.PDF
    elif suffix in _TEXT_SUFFIXES:
        media = documents.TEXT
    else:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return documents.descriptor(ctx.workspace, data, path=shown, media_type=media)


class SearchArgs(ToolArgs):
    """Arguments of search_files."""

    query: str = Field(
        min_length=1, max_length=500, description="text to look for (case-insensitive)"
    )
    path: str = Field(default=".", description="folder to search in")


class SearchFiles(TypedTool[SearchArgs]):
    """Find lines containing a text."""

    name = "search_files"
    description = "Search the workspace's text files for a phrase; returns file:line: text."
    args_model = SearchArgs

    def call(self, args: SearchArgs, ctx: ToolContext) -> ToolResult:
        """Search."""
        root = confine(ctx.workspace, args.path)
        needle = args.query.lower()
        hits: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                p = Path(dirpath) / name
                if p.suffix.lower() not in _TEXT_SUFFIXES:
                    continue
                try:
                    confine(ctx.workspace, relative(ctx.workspace, p))
                    lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
                except (ToolInputError, OSError, ValueError):
                    continue
                for i, line in enumerate(lines, start=1):
                    if needle in line.lower():
                        hits.append(f"{relative(ctx.workspace, p)}:{i}: {line.strip()[:300]}")
                        if len(hits) >= 50:
                            return result("\n".join([*hits, "[stopped at 50 matches]"]))
        return result("\n".join(hits) if hits else f"no match for {args.query!r}")


class WriteArgs(ToolArgs):
    """Arguments of write_file."""

    path: str = Field(description="file relative to the workspace")
    content: str = Field(description="the whole new content")
    expected_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-fA-F]{8,64}$",
        description=(
            "only overwrite if the file still has this SHA-256 (or its first characters), "
            "as read_file reported it"
        ),
    )


def _atomic_write(path: Path, content: str, ctx: ToolContext) -> None:
    """Replace ``path`` with ``content`` atomically, if this worker still holds the run.

    The content goes to a temporary file of this writer's own (named after the step's
    idempotency key and the process), which is synced and then renamed over ``path``. The
    rename is the point of no return: the lease is checked right before it, so a worker
    that was frozen while the run moved on to another worker never replaces what the new
    owner wrote since (:class:`~desktop_agent.domain.errors.LeaseLost` is raised and the
    temporary file removed). A temporary file of the same step left by a process that died
    before its rename is removed by the step's repeat, so none stays in the workspace.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() else "-" for c in ctx.idempotency_key)
    stem = f".{path.name}.{safe}"
    for stray in path.parent.glob(f"{glob.escape(stem)}.*.tmp"):
        if stray.name.removeprefix(f"{stem}.").removesuffix(".tmp").isdigit():
            stray.unlink(missing_ok=True)  # an earlier attempt's, never renamed
    tmp = path.with_name(f"{stem}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        ctx.check_lease()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class WriteFile(TypedTool[WriteArgs]):
    """Write a whole file; writing the same content again changes nothing."""

    name = "write_file"
    description = "Create or replace a file of the workspace with the given content."
    args_model = WriteArgs
    effect = EffectClass.IDEMPOTENT

    def needs_approval(self, args: WriteArgs, ctx: ToolContext) -> str | None:
        """Ask before overwriting different content."""
        path = confine(ctx.workspace, args.path)
        if path.is_file():
            try:
                same = path.read_text(encoding="utf-8") == args.content
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                return f"would overwrite {args.path} ({path.stat().st_size} bytes)"
        return None

    def check(self, args: WriteArgs, ctx: ToolContext) -> str | None:
        """Re-check before an approved write: still a file, still the version expected."""
        path = confine(ctx.workspace, args.path)
        if path.is_dir():
            return f"{args.path} is now a folder"
        return _changed(path, args)

    def call(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        """Write the file atomically."""
        path = confine(ctx.workspace, args.path)
        if path.is_dir():
            return result(f"{args.path} is a folder", error=True)
        changed = _changed(path, args)
        if changed and not _same_content(path, args.content):
            return result(f"not written: {changed}", error=True)
        digest = hashlib.sha256(args.content.encode()).hexdigest()[:12]
        wrote = f"wrote {args.path} ({len(args.content.encode())} bytes, sha {digest})"
        if _same_content(path, args.content):
            # On a repeat after a crash the content is this step's own earlier write.
            if ctx.attempt > 1:
                return result(wrote)
            return result(f"{args.path} already has this content (sha {digest}); unchanged")
        _atomic_write(path, args.content, ctx)
        return result(wrote)


def _same_content(path: Path, content: str) -> bool:
    try:
        return path.is_file() and path.read_text(encoding="utf-8") == content
    except (OSError, UnicodeDecodeError):
        return False


def _changed(path: Path, args: WriteArgs) -> str | None:
    """Why the file is not the version the model meant to overwrite, if it is not."""
    if args.expected_sha256 is None:
        return None
    expected = args.expected_sha256.lower()
    if not path.is_file():
        return f"{args.path} no longer exists (expected sha256 {expected})"
    actual = sha256_of(path)
    if not actual.startswith(expected):
        return f"{args.path} changed since it was read (sha256 now {actual[:16]}, not {expected})"
    return None


class AppendArgs(ToolArgs):
    """Arguments of append_note."""

    path: str = Field(default="notes.md", description="notes file relative to the workspace")
    text: str = Field(min_length=1, description="text to append")


class AppendNote(TypedTool[AppendArgs]):
    """Append to a notes file.

    Safe to repeat after a crash: the repeat of an append (attempt 2 or more) that finds
    its own text already at the end of the file does not append it again (nothing else can
    have written after it: it was the run's last effect). A first attempt always appends.
    """

    name = "append_note"
    description = "Append text to a notes file in the workspace (default notes.md)."
    args_model = AppendArgs
    effect = EffectClass.IDEMPOTENT

    def call(self, args: AppendArgs, ctx: ToolContext) -> ToolResult:
        """Append, unless the same text already ends the file."""
        path = confine(ctx.workspace, args.path)
        text = args.text if args.text.endswith("\n") else args.text + "\n"
        existing = path.read_text(encoding="utf-8") if path.is_file() else ""
        appended = f"appended {len(text)} characters to {args.path}"
        if ctx.attempt > 1 and existing.endswith(text):
            return result(appended)  # this step's own append, before the crash
        _atomic_write(path, existing + text, ctx)
        return result(appended)
