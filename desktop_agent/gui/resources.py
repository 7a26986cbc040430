"""Icons: SVG files under ``resources/icons``, tinted to follow the palette.

Action icons draw with ``currentColor``; they are rendered in the palette's text color, so
they stay readable in light and dark themes. Status icons carry their own colors.

The ``resources`` folder lives at the top of the source tree and ships inside the wheel as
``desktop_agent/resources`` (pyproject.toml maps it into the package).
"""

from __future__ import annotations

import logging
from functools import cache, lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

from desktop_agent.resource_files import resource_roots

log = logging.getLogger(__name__)

_SIZES = (16, 20, 24, 32, 48, 64)


@cache
def resource_dir() -> Path | None:
    """The folder holding ``icons/``, or None when it cannot be found."""
    for path in resource_roots():
        if (path / "icons").is_dir():
            return path
    log.warning("resources not found (looked in %s)", ", ".join(map(str, resource_roots())))
    return None


def icon_path(name: str) -> Path | None:
    """The SVG file of icon ``name``, if present."""
    root = resource_dir()
    if root is None:
        return None
    path = root / "icons" / f"{name}.svg"
    return path if path.is_file() else None


@cache
def _svg(name: str) -> str | None:
    path = icon_path(name)
    if path is None:
        log.warning("icon %s not found", name)
        return None
    return path.read_text(encoding="utf-8")


def _render(svg: str, size: int, ratio: float) -> QPixmap:
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    pix = QPixmap(QSize(round(size * ratio), round(size * ratio)))
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, pix.width(), pix.height()))
    painter.end()
    pix.setDevicePixelRatio(ratio)
    return pix


def _ratio() -> float:
    screen = QGuiApplication.primaryScreen()
    return screen.devicePixelRatio() if screen is not None else 1.0


def _tints(palette: QPalette | None) -> tuple[str, str, str]:
    """The colors icons are tinted with: normal, disabled and selected text."""
    pal = palette or QGuiApplication.palette()
    normal = pal.color(QPalette.ColorGroup.Active, QPalette.ColorRole.WindowText)
    disabled = pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
    selected = pal.color(QPalette.ColorGroup.Active, QPalette.ColorRole.HighlightedText)
    return normal.name(), disabled.name(), selected.name()


def icon(name: str, palette: QPalette | None = None) -> QIcon:
    """Icon ``name`` tinted with ``palette`` (the application palette by default)."""
    return _tinted(name, *_tints(palette), _ratio())


@cache
def _tinted(name: str, color: str, disabled: str, selected: str, ratio: float) -> QIcon:
    svg = _svg(name)
    result = QIcon()
    if svg is None:
        return result
    tinted = "currentColor" in svg
    for size in _SIZES:
        result.addPixmap(_render(svg.replace("currentColor", color), size, ratio))
        # Colored (status) icons keep their colors on a selected row; line icons follow
        # the selection's text color.
        chosen = svg.replace("currentColor", selected) if tinted else svg
        result.addPixmap(_render(chosen, size, ratio), QIcon.Mode.Selected)
        faded = (
            svg.replace("currentColor", disabled)
            if tinted
            else svg.replace("<svg ", '<svg opacity="0.4" ', 1)
        )
        result.addPixmap(_render(faded, size, ratio), QIcon.Mode.Disabled)
    return result


def app_icon() -> QIcon:
    """The application's icon."""
    return icon("app")


def badge_icon(name: str, count: int, palette: QPalette | None = None) -> QIcon:
    """Icon ``name`` with a red count badge in its corner (no badge at zero).

    Badges are drawn once per count and palette: the inbox count changes with every
    approval asked or decided, and drawing four pixmaps each time stalled the window.
    """
    if count <= 0:
        return icon(name, palette)
    return _badged(name, str(count) if count < 100 else "99+", _tints(palette), _ratio())


@lru_cache(maxsize=256)
def _badged(name: str, text: str, tints: tuple[str, str, str], ratio: float) -> QIcon:
    base = _tinted(name, *tints, ratio)
    result = QIcon()
    for size in (16, 24, 32, 48):
        pix = base.pixmap(QSize(size, size))
        painter = QPainter(pix)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        d = size * 0.62
        rect = QRectF(size - d, 0, d, d)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor("#d32f2f"))
        painter.drawEllipse(rect)
        font = painter.font()
        font.setPixelSize(max(6, int(d * (0.7 if len(text) == 1 else 0.5))))
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(QColor("#ffffff"))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.end()
        result.addPixmap(pix)
    return result
