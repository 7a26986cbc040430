"""Attachments: files the analyst gives a run at its start, copied into its workspace.

Each file is copied (never moved) to ``attachments/NAME`` in the run's workspace while its
SHA-256 is computed, and recorded in the run's definition
(:class:`~desktop_agent.domain.models.Attachment` in ``AgentSpec.attachments``), which
the engine names in the run's first user message.

The protocol, so that nothing is half-copied:

1. :func:`check_sources` looks at every file before anything is written: it exists, is a
   regular file, can be read, and fits the limits (:data:`LIMITS`: per file, in total,
   how many); its name is sanitised (:func:`safe_name`; a name that is a path is refused).
2. :func:`place` copies them into a hidden staging folder inside ``attachments/``, each
   checked against the limit again while it is read (a file may grow), then gives each
   its final name without overwriting anything (``a.csv``, else ``a-2.csv``, …).
3. If anything fails, or the caller's :meth:`Placed.undo` is called (the run could not
   be recorded), every file placed is removed again, with the staging folder and the
   folders made for it.

A file already in the workspace's ``attachments/`` folder is recorded where it is, not
copied again: "Run again" in the same workspace keeps its original's attachments that way.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.models import Attachment, size_words
from desktop_agent.domain.text import check_text

FOLDER = "attachments"
"""The workspace's folder of attachments."""

CHUNK = 1024 * 1024
"""Bytes read at a time while copying."""

MAX_NAME_CHARS = 200
"""The longest file name given to a copy (the extension is kept when a name is cut)."""

_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"|?*]')
_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Limits:
    """How much a run may be given.

    Attributes:
        per_file: the largest file, in bytes.
        total: all the files together, in bytes.
        files: how many files.
    """

    per_file: int = 100 * 2**20
    total: int = 500 * 2**20
    files: int = 100


LIMITS = Limits()
"""The limits ``Client.start_run`` applies (100 MB a file, 500 MB in all, 100 files)."""


@dataclass(frozen=True)
class AttachmentSource:
    """A file to attach under another name than its own (the HTTP API's uploads).

    Attributes:
        path: the file to copy.
        name: the name it gets in the workspace (sanitised; a path is refused).
    """

    path: Path
    name: str


AttachmentInput = str | os.PathLike[str] | AttachmentSource
"""What ``Client.start_run`` takes as an attachment: a file's path, or a path and a name."""


@dataclass(frozen=True)
class Checked:
    """A source that passed :func:`check_sources`."""

    path: Path
    name: str
    size: int


def safe_name(name: str) -> str:
    r"""``name`` as a file name in ``attachments/``: one name, no folders, portable.

    Characters Windows refuses and control characters become ``_``; trailing dots and
    spaces go; a device name (``CON``, ``NUL``…) gets a leading ``_``; a long name is cut
    to :data:`MAX_NAME_CHARS`, keeping its extension.

    Raises:
        InvalidInputError: the name is empty, ``.`` or ``..``, or holds a folder (``/`` or
            ``\\``), a drive or an absolute path.
    """
    text = check_text(name, "the attachment's name").strip()
    if not text:
        raise InvalidInputError("an attachment's name is empty")
    if (
        "/" in text
        or "\\" in text
        or PurePosixPath(text).is_absolute()
        or PureWindowsPath(text).drive
        or text in (".", "..")
    ):
        raise InvalidInputError(
            f"attachment name {name!r} is a path: give a plain file name (no folders, no '..')"
        )
    clean = _UNSAFE.sub("_", text).rstrip(". ")
    if not clean:
        raise InvalidInputError(f"attachment name {name!r} has no usable character")
    if _RESERVED.match(clean):
        clean = "_" + clean
    if len(clean) > MAX_NAME_CHARS:
        stem, dot, suffix = clean.rpartition(".")
        if dot and 0 < len(suffix) <= 16:
            clean = stem[: MAX_NAME_CHARS - len(suffix) - 1] + "." + suffix
        else:
            clean = clean[:MAX_NAME_CHARS]
    return clean


def check_sources(items: Iterable[AttachmentInput], limits: Limits | None = None) -> list[Checked]:
    """Look at every file before anything is copied (see the module's docstring, 1).

    The same file named twice is attached once.

    Raises:
        InvalidInputError: a file is missing, not a regular file, unreadable, over the
            limit per file, or the files together are over the total or too many; the
            message names the file and the limit.
    """
    limits = limits or LIMITS
    out: list[Checked] = []
    seen: set[Path] = set()
    total = 0
    for item in items:
        if isinstance(item, AttachmentSource):
            path, name = Path(item.path), safe_name(item.name)
            shown = item.name
        else:
            path = Path(os.fspath(item)).expanduser()
            name, shown = safe_name(path.name), str(item)
        real = Path(os.path.realpath(path))
        if real in seen:
            continue
        try:
            info = path.stat()
            if path.is_dir():
                raise InvalidInputError(f"cannot attach {shown}: it is a folder, not a file")
            if not path.is_file():
                raise InvalidInputError(f"cannot attach {shown}: it is not a regular file")
            with path.open("rb"):
                pass
        except FileNotFoundError:
            raise InvalidInputError(f"cannot attach {shown}: no such file") from None
        except PermissionError:
            raise InvalidInputError(f"cannot attach {shown}: permission denied") from None
        except OSError as exc:
            raise InvalidInputError(f"cannot attach {shown}: {exc.strerror or exc}") from None
        if info.st_size > limits.per_file:
            raise InvalidInputError(
                f"cannot attach {shown}: it is {size_words(info.st_size)}, over the limit of "
                f"{size_words(limits.per_file)} per file"
            )
        total += info.st_size
        if total > limits.total:
            raise InvalidInputError(
                f"cannot attach {shown}: with it the attachments come to {size_words(total)}, "
                f"over the limit of {size_words(limits.total)} in all"
            )
        seen.add(real)
        out.append(Checked(path, name, info.st_size))
        if len(out) > limits.files:
            raise InvalidInputError(
                f"cannot attach {shown}: a run takes at most {limits.files} attachments"
            )
    return out


@dataclass
class Placed:
    """The attachments copied for one run, and how to take them back."""

    records: tuple[Attachment, ...] = ()
    files: list[Path] = field(default_factory=list)
    """Files this call created (copies; never a file recorded in place)."""
    folders: list[Path] = field(default_factory=list)
    """Folders this call created, innermost first."""

    def undo(self) -> None:
        """Remove what was placed (the run was not recorded).

        The copies go, then the folders made for them if they are empty.
        """
        for path in self.files:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: another run's files stay
        self.files.clear()
        self.folders.clear()


def place(
    workspace: Path,
    checked: Sequence[Checked],
    *,
    fresh_workspace: bool = False,
    limits: Limits | None = None,
) -> Placed:
    """Copy ``checked`` into ``workspace/attachments/`` (see the module's docstring, 2-3).

    ``fresh_workspace``: the folder was just made for this run, and is removed with the
    rest if it is left empty.

    Raises:
        InvalidInputError: a file could not be read or written, or grew over the limit
            while it was copied; nothing is left behind.
    """
    limits = limits or LIMITS
    placed = Placed()
    if fresh_workspace:
        placed.folders.append(workspace)
    if not checked:
        placed.folders.clear()
        return placed
    folder = workspace / FOLDER
    staging: Path | None = None
    try:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise InvalidInputError(
                f"cannot attach files: {folder} is not a folder of the workspace "
                "(move it away, or choose another workspace)"
            )
        if not folder.exists():
            folder.mkdir()
            placed.folders.insert(0, folder)
        staging = folder / f".incoming-{uuid.uuid4().hex[:12]}"
        staging.mkdir()
        placed.folders.insert(0, staging)
        records: list[Attachment] = []
        real_folder = Path(os.path.realpath(folder))
        for i, item in enumerate(checked):
            if Path(os.path.realpath(item.path)).parent == real_folder:
                size, digest = _hash(item, limits)
                name = item.path.name
                records.append(Attachment(name, f"{FOLDER}/{name}", size, digest))
                continue
            staged = staging / f"{i}"
            size, digest = _copy(item, staged, limits)
            final = _claim_name(folder, item.name, staged)
            placed.files.append(final)
            records.append(Attachment(item.name, f"{FOLDER}/{final.name}", size, digest))
        staging.rmdir()
        placed.folders.remove(staging)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        placed.undo()
        raise
    placed.records = tuple(records)
    return placed


def _hash(item: Checked, limits: Limits) -> tuple[int, str]:
    """Size and SHA-256 of a file recorded where it is."""
    digest = hashlib.sha256()
    size = 0
    try:
        with item.path.open("rb") as src:
            while chunk := src.read(CHUNK):
                size += len(chunk)
                _within(item, size, limits)
                digest.update(chunk)
    except OSError as exc:
        raise InvalidInputError(f"cannot attach {item.path}: {exc.strerror or exc}") from None
    return size, digest.hexdigest()


def _copy(item: Checked, target: Path, limits: Limits) -> tuple[int, str]:
    """Copy ``item`` to ``target`` (a new file), hashing it; its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    try:
        with item.path.open("rb") as src, target.open("xb") as dst:
            while chunk := src.read(CHUNK):
                size += len(chunk)
                _within(item, size, limits)
                digest.update(chunk)
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
    except OSError as exc:
        raise InvalidInputError(f"cannot attach {item.path}: {exc.strerror or exc}") from None
    with contextlib.suppress(OSError):
        shutil.copystat(item.path, target)  # keep the file's times, as a copy should
    return size, digest.hexdigest()


def _within(item: Checked, size: int, limits: Limits) -> None:
    if size > limits.per_file:
        raise InvalidInputError(
            f"cannot attach {item.path}: it grew over the limit of "
            f"{size_words(limits.per_file)} per file while it was copied"
        )


def _claim_name(folder: Path, name: str, staged: Path) -> Path:
    """Give ``staged`` the first free name of ``name``, ``stem-2.ext``, …; never overwrite."""
    stem, dot, suffix = name.rpartition(".")
    if not stem or not dot:  # no extension, or a name such as ".env"
        stem, suffix = name, ""
    for n in range(1, 10_000):
        candidate = folder / (name if n == 1 else f"{stem}-{n}{'.' + suffix if suffix else ''}")
        try:
            os.link(staged, candidate)  # fails if the name is taken: nothing is overwritten
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            if not _reserve_and_replace(staged, candidate):
                continue
            return candidate
        staged.unlink()
        return candidate
    raise InvalidInputError(f"cannot attach {name}: too many files of that name in {folder}")


def _reserve_and_replace(staged: Path, candidate: Path) -> bool:
    """Where hard links are not taken: create ``candidate`` exclusively, then move onto it."""
    try:
        os.close(os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    os.replace(staged, candidate)
    return True


def describe(attachments: Sequence[Attachment]) -> str:
    """``a.pdf, b.csv`` (the names in the workspace), or "" when none."""
    return ", ".join(PurePosixPath(a.path).name for a in attachments)


def details(attachments: Sequence[Attachment]) -> list[str]:
    """One line per attachment: ``attachments/a.pdf · 2.4 MB · sha256 1f3c…``."""
    return [
        f"{a.path}"
        + (f" (given as {a.name})" if a.name != PurePosixPath(a.path).name else "")
        + f" · {a.size_words} · sha256 {a.sha256}"
        for a in attachments
    ]


def attachment_json(a: Attachment) -> dict[str, object]:
    """An attachment as plain data (the CLI's ``--json`` and the HTTP API)."""
    return {"name": a.name, "path": a.path, "size": a.size, "sha256": a.sha256}
