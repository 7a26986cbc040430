"""Headless Chromium, to open an exported page as an analyst's browser would.

The exports are read by browsers, not by our parser: a page Chromium lays out differently
(an anchor it does not find, a section it hides) would pass an HTML-parser check and still
fail the analyst. :func:`rendered_dom` returns the DOM Chromium built from the file, and
:func:`screenshot` what it drew.

Chromium is a Debian package (``chromium``) that ``packaging/dev.sh test`` installs and then
requires (``DESKTOP_AGENT_REQUIRE_CHROMIUM=1``); elsewhere a test that needs it is skipped
with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium() -> str:
    """The browser's executable; skips the test (or fails it, when required) without one."""
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    why = "headless Chromium is not installed (Debian: apt-get install chromium)"
    if os.environ.get("DESKTOP_AGENT_REQUIRE_CHROMIUM") == "1":
        pytest.fail(why)
    pytest.skip(why)


def _run(args: list[str], timeout_s: float = 120.0) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",  # as root (CI) Chromium refuses to start sandboxed
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": "disabled:"},
        )
    if done.returncode != 0:
        raise AssertionError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def rendered_dom(page: Path) -> str:
    """The DOM Chromium built from ``page``, serialized (``--dump-dom``)."""
    return _run(["--dump-dom", page.resolve().as_uri()])


def screenshot(page: Path, out: Path, width: int = 1200, height: int = 1500) -> Path:
    """What Chromium draws of ``page`` in a window of that size, as a PNG at ``out``."""
    _run([f"--window-size={width},{height}", f"--screenshot={out}", page.resolve().as_uri()])
    if not out.is_file() or out.stat().st_size == 0:
        raise AssertionError(f"chromium wrote no screenshot at {out}")
    return out
