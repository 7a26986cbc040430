"""docs/ARCHITECTURE.md names only files that exist, and names every package.

The page is the one a newcomer reads first: a module it names that was renamed or removed
sends them the wrong way, and a package it leaves out is one they never hear of. Every
path-like piece of inline code (``gui/poller.py``, ``client/``, ``tests/unit/...``, a bare
``name.py``) must exist, relative to the repository or to ``desktop_agent/``; every package
under ``desktop_agent/``, every module at its top level and every module of
``desktop_agent/cli/`` must be named.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"

FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
"""A fenced block (the diagram): its contents are drawings, not references."""

INLINE = re.compile(r"`([^`\n]+)`")
"""Inline code."""

PATH = re.compile(r"[\w][\w.-]*(?:/[\w][\w.-]*)*/?")
"""Something shaped like a relative path: names joined by slashes, no spaces, no options."""

CLI_ROW = re.compile(r"^\| `cli/` \|.*$", re.MULTILINE)
"""The row of the package table that describes ``cli/``."""


def inline_code(text: str) -> list[str]:
    """The inline code spans of ``text``, outside fenced blocks."""
    return INLINE.findall(FENCED.sub("", text))


def path_refs(text: str) -> list[str]:
    """The references to files or folders in ``text``: a slash in them, or a ``.py`` name.

    ``GET /v1/models`` (a space), ``/v1/runs`` (leading slash) or ``engine.ports`` (a
    module's dotted name) are not paths.
    """
    return [
        span
        for span in inline_code(text)
        if PATH.fullmatch(span) and ("/" in span or span.endswith(".py"))
    ]


def exists(ref: str, root: Path) -> bool:
    """Whether ``ref`` is a file or folder of the repository at ``root``.

    A path with a slash is read from the repository's root or from ``desktop_agent/``; a
    bare ``name.py`` (named in a package's row, say) must be a module somewhere in the
    package or at the root.
    """
    package = root / "desktop_agent"
    if "/" in ref:
        return (root / ref).exists() or (package / ref).exists()
    return (root / ref).is_file() or any(package.rglob(ref))


def missing_refs(text: str, root: Path = ROOT) -> list[str]:
    """The paths ``text`` names that do not exist under ``root`` (each once, in order)."""
    missing = [ref for ref in path_refs(text) if not exists(ref, root)]
    return list(dict.fromkeys(missing))


def packages(root: Path = ROOT) -> list[str]:
    """Every package under ``desktop_agent/``, as ``gui/dialogs/`` (not the root itself)."""
    package = root / "desktop_agent"
    found = {
        init.parent.relative_to(package).as_posix() + "/"
        for init in package.rglob("__init__.py")
        if init.parent != package
    }
    return sorted(found)


def unnamed_packages(text: str, root: Path = ROOT) -> list[str]:
    """Packages ``text`` never names as inline code (``gui/`` or ``desktop_agent/gui/``)."""
    named = set(path_refs(text))
    return [p for p in packages(root) if p not in named and f"desktop_agent/{p}" not in named]


def unnamed_top_modules(text: str, root: Path = ROOT) -> list[str]:
    """Modules at the top of ``desktop_agent/`` that ``text`` never names."""
    named = set(path_refs(text))
    modules = sorted(
        p.name for p in (root / "desktop_agent").glob("*.py") if p.name != "__init__.py"
    )
    return [m for m in modules if m not in named and f"desktop_agent/{m}" not in named]


def cli_modules(root: Path = ROOT) -> list[str]:
    """The modules of ``desktop_agent/cli/``, by name (``commands``, ``output``, ...)."""
    found = (root / "desktop_agent" / "cli").glob("*.py")
    return sorted(p.stem for p in found if p.stem != "__init__")


def unlisted_cli_modules(text: str, root: Path = ROOT) -> list[str]:
    """Modules of ``cli/`` missing from the ``cli/`` row of the package table.

    A module is listed by its name (``serve``) or its path (``cli/serve.py``) in inline
    code. With no such row, every module is missing.
    """
    row = CLI_ROW.search(text)
    listed = set(inline_code(row.group(0))) if row else set()
    return [m for m in cli_modules(root) if m not in listed and f"cli/{m}.py" not in listed]


# --------------------------------------------------------------------------- the page


def test_every_path_named_exists() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert len(path_refs(doc)) > 100, "the page should name the code it describes"
    assert missing_refs(doc) == [], "paths named in docs/ARCHITECTURE.md that do not exist"


def test_every_package_is_named() -> None:
    found = packages()
    assert "gui/dialogs/" in found and "worker/" in found, found
    assert unnamed_packages(DOC.read_text(encoding="utf-8")) == []


def test_every_top_level_module_is_named() -> None:
    assert unnamed_top_modules(DOC.read_text(encoding="utf-8")) == []


def test_the_cli_row_lists_every_cli_module() -> None:
    assert "commands" in cli_modules()
    assert unlisted_cli_modules(DOC.read_text(encoding="utf-8")) == []


# --------------------------------------------------------------------------- the checks


def test_a_module_that_does_not_exist_is_reported() -> None:
    page = (
        "The poller (`gui/poller.py`) reads the store; the claim is "
        "`persistence/workers.py`, the keyring `desktop_agent/secrets.py`, the API "
        "`client/`, its test `tests/unit/test_architecture_doc.py`. Moved: "
        "`worker/wakeups.py` and `desktop_agent/engine/nowhere/`, and `gone_for_good.py`."
    )
    assert missing_refs(page) == [
        "worker/wakeups.py",
        "desktop_agent/engine/nowhere/",
        "gone_for_good.py",
    ]


def test_what_is_not_a_path_is_not_checked() -> None:
    page = (
        "`GET /v1/models`, `/v1/runs/ID`, `engine.ports`, `usage --cap/--resume-held`, "
        "`RUN_ID:SEQ`, `agent.db.effects`, and in a diagram:\n```\nnot/a/module.py\n```\n"
    )
    assert path_refs(page) == []
    assert missing_refs(page) == []


def test_a_package_or_cli_module_left_out_is_reported() -> None:
    page = "| `cli/` | `commands`, `output` | `client` |\n\n`gui/` and `desktop_agent/worker/`"
    left_out = unnamed_packages(page)
    assert "engine/" in left_out and "gui/dialogs/" in left_out
    assert "gui/" not in left_out and "worker/" not in left_out
    unlisted = unlisted_cli_modules(page)
    assert "serve" in unlisted and "commands" not in unlisted and "output" not in unlisted
    assert unlisted_cli_modules("no table here") == cli_modules()
