"""``desktop-agent install-desktop-entry``: the app in the Linux applications menu.

Installs, for the current user, the desktop entry, the app icon in the hicolor theme sizes
and the AppStream metainfo under ``$XDG_DATA_HOME`` (``~/.local/share`` by default), the
folders every freedesktop desktop reads. The entry starts the very command that installed
it, by its absolute path, so it works for a virtualenv that is not on ``PATH`` and for a
bundle. ``--uninstall`` removes exactly those files. No Qt here: the files are copied from
``resources/`` (icons rendered beforehand by ``packaging/render_icons.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from desktop_agent.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from desktop_agent.cli.output import Out

APP_ID = "io.desktopagent.DesktopAgent"
"""The reverse-DNS id: the desktop file's and the metainfo's name, AppStream's ``<id>``."""

ICON_NAME = "desktop-agent"
COMMAND = "desktop-agent"
ICON_SIZES = ("16x16", "22x22", "24x24", "32x32", "48x48", "64x64", "128x128", "256x256")
ICON_SIZES_LARGE = ("512x512",)

_EXEC_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
"""Characters that make an Exec argument need quotes (desktop entry spec, "The Exec key")."""


@dataclass(frozen=True)
class Piece:
    """One installed file: where it comes from in ``resources/`` and where it goes."""

    source: tuple[str, ...]
    target: Path


def data_home(prefix: str | None = None) -> Path:
    """``--prefix``, else ``$XDG_DATA_HOME`` (if absolute, per the spec), else ~/.local/share."""
    if prefix:
        return Path(prefix).expanduser().absolute()
    env = os.environ.get("XDG_DATA_HOME", "")
    if env and Path(env).is_absolute():
        return Path(env)
    return Path.home() / ".local" / "share"


def pieces(target: Path) -> list[Piece]:
    """Every file the entry consists of, with its place under ``target``."""
    icons = target / "icons" / "hicolor"
    found = [
        Piece(("desktop", f"{APP_ID}.desktop"), target / "applications" / f"{APP_ID}.desktop"),
        Piece(
            ("desktop", f"{APP_ID}.metainfo.xml"),
            target / "metainfo" / f"{APP_ID}.metainfo.xml",
        ),
    ]
    for size in ICON_SIZES + ICON_SIZES_LARGE:
        name = f"{ICON_NAME}.png"
        found.append(Piece(("icons", "hicolor", size, "apps", name), icons / size / "apps" / name))
    name = f"{ICON_NAME}.svg"
    found.append(
        Piece(("icons", "hicolor", "scalable", "apps", name), icons / "scalable" / "apps" / name)
    )
    return found


def _child(root: Traversable, parts: tuple[str, ...]) -> Traversable:
    for part in parts:
        root = root / part
    return root


def resource_root() -> Traversable:
    """The ``resources`` folder that holds every piece of the entry.

    Raises:
        InvalidInputError: no such folder (a broken install), naming what is missing.
    """
    from desktop_agent.resource_files import RESOURCES_ENV, resource_roots

    wanted = pieces(Path("."))
    for root in resource_roots():
        if all(_child(root, p.source).is_file() for p in wanted):
            return root
    raise InvalidInputError(
        f"the desktop entry's files (resources/desktop/{APP_ID}.desktop and the hicolor "
        "icons) are not part of this installation: reinstall desktop-agent, or set "
        f"{RESOURCES_ENV} to a folder that has them"
    )


def launch_command() -> Path:
    """The absolute path of the ``desktop-agent`` command the entry should start.

    The bundle's executable when frozen; the script this process was started as; the
    console script beside this Python (a virtualenv); else the one on ``PATH``.
    Symbolic links are kept: a link in ``~/.local/bin`` survives an upgrade of its target.
    """
    import shutil

    if getattr(sys, "frozen", False):
        return Path(os.path.abspath(sys.executable))
    candidates = []
    if sys.argv and Path(sys.argv[0]).name == COMMAND:
        candidates.append(Path(sys.argv[0]))
    candidates.append(Path(sys.executable).parent / COMMAND)
    on_path = shutil.which(COMMAND)
    if on_path:
        candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return Path(os.path.abspath(path))
    raise InvalidInputError(
        f"cannot find the {COMMAND} command for the desktop entry to start: install the "
        f"package (`pip install .`) so that the command exists, then run this again"
    )


def exec_argument(arg: str) -> str:
    """``arg`` written as one argument of an ``Exec`` value, per the desktop entry spec.

    Quoted (with double quote, backtick, dollar and backslash escaped by a backslash) when
    it holds a reserved character; ``%`` doubled (a literal percent, not a field code);
    then escaped once more as any string value is (each backslash doubled).

    Raises:
        InvalidInputError: the argument holds a control character no desktop can launch.
    """
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in arg):
        raise InvalidInputError(
            f"the path {arg!r} holds a control character a desktop entry cannot hold: "
            "move desktop-agent to a folder with a plain name"
        )
    quoted = arg.replace("%", "%%")
    if any(c in _EXEC_RESERVED for c in arg):
        for c in '\\"`$':
            quoted = quoted.replace(c, "\\" + c)
        quoted = f'"{quoted}"'
    return quoted.replace("\\", "\\\\")


def _string_value(text: str) -> str:
    """``text`` as a desktop entry string value (each backslash doubled)."""
    return text.replace("\\", "\\\\")


def desktop_file(template: str, command: Path) -> str:
    """The template with ``Exec`` and ``TryExec`` set to ``command``."""
    lines = []
    for line in template.splitlines():
        if line.startswith("Exec="):
            line = "Exec=" + exec_argument(str(command))
        elif line.startswith("TryExec="):
            exec_argument(str(command))  # the same checks
            line = "TryExec=" + _string_value(str(command))
        lines.append(line)
    return "\n".join(lines) + "\n"


def install(target: Path, command: Path) -> list[Path]:
    """Write every piece under ``target``; returns the files written.

    Each file is written beside its place and renamed over it, so a desktop never reads a
    half-written one. If one cannot be written, those written before it are removed again.

    Raises:
        InvalidInputError: a file could not be written (says which and why).
    """
    root = resource_root()
    written: list[Path] = []
    try:
        for piece in pieces(target):
            data = _child(root, piece.source).read_bytes()
            if piece.target.suffix == ".desktop":
                data = desktop_file(data.decode("utf-8"), command).encode("utf-8")
            _write(piece.target, data)
            written.append(piece.target)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        where = exc.filename or target
        why = (
            "a file is where a folder must be"
            if isinstance(exc, (FileExistsError, NotADirectoryError))
            else exc.strerror or str(exc)
        )
        undone = "; the files written before it were removed" if written else ""
        raise InvalidInputError(
            f"cannot write {where} ({why}): the desktop entry was not installed{undone}; "
            "choose a folder you can write with --prefix DIR"
        ) from None
    return written


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_bytes(data)
        partial.chmod(0o644)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def uninstall(target: Path) -> list[Path]:
    """Remove the pieces installed under ``target`` (nothing else); returns those removed.

    Raises:
        InvalidInputError: a file could not be removed.
    """
    removed: list[Path] = []
    for piece in pieces(target):
        try:
            piece.target.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise InvalidInputError(
                f"cannot remove {piece.target} ({exc.strerror or exc}); "
                f"{len(removed)} file(s) were removed before it"
            ) from None
        removed.append(piece.target)
    return removed


def refresh_caches(target: Path) -> list[str]:
    """Run the desktop's cache tools that exist here; returns a note for each that failed.

    Desktops without these tools read the folders directly, so a missing tool is fine.
    """
    import shutil
    import subprocess

    notes = []
    for argv in (
        ["update-desktop-database", "-q", str(target / "applications")],
        ["gtk-update-icon-cache", "-q", "-f", "-t", str(target / "icons" / "hicolor")],
    ):
        if shutil.which(argv[0]) is None or not Path(argv[-1]).is_dir():
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{argv[0]} did not run ({exc}); the menu may update at next login")
            continue
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            notes.append(f"{argv[0]} failed ({why}); the menu may update at next login")
    return notes


def _read_by_desktops(target: Path) -> bool:
    """Whether desktops look in ``target`` (the user's data folder or a system one)."""
    dirs = os.environ.get("XDG_DATA_DIRS", "") or "/usr/local/share:/usr/share"
    known = [data_home(), *(Path(d) for d in dirs.split(":") if d)]
    return any(target == k.absolute() for k in known)


def add_parser(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Register ``install-desktop-entry`` (``add`` is the CLI's subparser factory)."""
    p = add(
        "install-desktop-entry",
        "put desktop-agent in your Linux applications menu (icon, launcher, metainfo)",
    )
    p.add_argument("--uninstall", action="store_true", help="remove what it installed")
    p.add_argument(
        "--prefix",
        metavar="DIR",
        help="install under DIR instead of $XDG_DATA_HOME (default ~/.local/share)",
    )


def cmd(args: argparse.Namespace, out: Out) -> int:
    """Run ``install-desktop-entry [--uninstall] [--prefix DIR]``."""
    target = data_home(args.prefix)
    if args.uninstall:
        removed = uninstall(target)
        notes = refresh_caches(target) if removed else []
        lines = [f"removed {p}" for p in removed] or [f"no desktop entry was installed in {target}"]
        out.emit(
            "\n".join(lines + notes),
            {"removed": [str(p) for p in removed], "notes": notes},
        )
        return 0
    command = launch_command()
    written = install(target, command)
    notes = refresh_caches(target)
    menu = target / "applications"
    if _read_by_desktops(target):
        hint = (
            f"desktop-agent is in your applications menu and starts {command}; if the menu "
            f"does not show it, log out and in again (some desktops read {menu} at login only)"
        )
    else:
        hint = (
            f"{target} is not a folder desktops read: add it to XDG_DATA_DIRS, or run this "
            "again without --prefix"
        )
    out.emit(
        "\n".join([f"wrote {p}" for p in written] + notes + [hint]),
        {
            "written": [str(p) for p in written],
            "exec": str(command),
            "notes": notes,
            "hint": hint,
        },
    )
    return 0
