"""Render the app icon into the hicolor icon theme sizes that desktops look up.

    .venv/bin/python packaging/render_icons.py

Reads ``resources/icons/app.svg`` and writes ``resources/icons/hicolor/<N>x<N>/apps/`` PNGs
and ``scalable/apps/`` SVG, all named :data:`ICON_NAME` (the ``Icon=`` of the desktop
entry). The PNGs are committed: installing the desktop entry must not need Qt, and some
desktops (and the icon cache) use only the fixed sizes. Run this again after changing the
SVG. Qt draws offscreen, so no display is needed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "resources" / "icons" / "app.svg"
HICOLOR = ROOT / "resources" / "icons" / "hicolor"
ICON_NAME = "desktop-agent"
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def render(renderer: QSvgRenderer, size: int) -> QImage:
    """The icon drawn at ``size`` pixels square on a transparent background."""
    image = QImage(QSize(size, size), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def main() -> int:
    """Write every size; a failure names the file and exits non-zero."""
    _app = QGuiApplication(sys.argv[:1])  # QImage and QPainter need one
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        print(f"render_icons: {SOURCE} is not an SVG Qt can draw", file=sys.stderr)
        return 1
    for size in SIZES:
        target = HICOLOR / f"{size}x{size}" / "apps" / f"{ICON_NAME}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not render(renderer, size).save(str(target)):  # PNG, from the suffix
            print(f"render_icons: could not write {target}", file=sys.stderr)
            return 1
        print(target.relative_to(ROOT))
    scalable = HICOLOR / "scalable" / "apps" / f"{ICON_NAME}.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, scalable)
    print(scalable.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
