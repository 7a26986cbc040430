"""Files to attach, outside any workspace."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    """Two files of the analyst's, in a folder of their own."""
    folder = tmp_path / "analyst"
    folder.mkdir()
    report = folder / "report.pdf"
    report.write_bytes(b"%PDF-1.4 quarterly report\n" * 40)
    data = folder / "data.csv"
    data.write_text("region,revenue\nnorth,12\nsouth,7\n")
    return report, data
