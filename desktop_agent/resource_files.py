"""Where the ``resources`` folder (icons, desktop entry, metainfo) is, without Qt.

The folder lives at the top of the source tree and ships inside the wheel as
``desktop_agent/resources`` (pyproject.toml maps it into the package) and inside a
PyInstaller bundle at its root. The app's icons (``gui/resources.py``) and the desktop-entry
installer (``cli/desktop_entry.py``) both look for it here, in one order.
"""

from __future__ import annotations

import importlib.resources
import os
import sys
from pathlib import Path

RESOURCES_ENV = "DESKTOP_AGENT_RESOURCES"
"""A folder to use instead (a packager's or a test's)."""


def _installed() -> Path | None:
    """``resources`` inside the installed package, when it is a folder on disk.

    Icons are handed to Qt and to the desktop by path, so a package imported from a zip (no
    folder on disk) does not count.
    """
    root = importlib.resources.files("desktop_agent") / "resources"
    return root if isinstance(root, Path) else None


def resource_roots() -> list[Path]:
    """Folders that may be ``resources``, most specific first (they may not exist).

    The installed package comes before the checkout's guess: beside an installed package,
    ``<site-packages>/../resources`` is not ours and could be any folder of that name.
    """
    found = []
    env = os.environ.get(RESOURCES_ENV)
    if env:
        found.append(Path(env))
    installed = _installed()
    if installed is not None:
        found.append(installed)
    # A source checkout or editable install: <repo>/resources beside the package.
    found.append(Path(__file__).resolve().parents[1] / "resources")
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        found.append(Path(bundle) / "resources")
    return found
