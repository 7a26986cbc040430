"""A real demo run through the command line, then exported in the three formats."""

from __future__ import annotations

from pathlib import Path

from tests.export.conftest import bundle_members, cli, manifest_of


def test_a_demo_run_made_by_the_cli_exports_in_every_format(tmp_path: Path) -> None:
    db = tmp_path / "data" / "desktop-agent.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    made = cli(db, "run", "Summarise the notes", "--model", "demo", "--yes", "--workspace", str(ws))
    assert made.returncode == 0, made.stderr
    run_id = made.stdout.split("Run ", 1)[1].split(":", 1)[0]
    for fmt, name in (("html", f"{run_id}.html"), ("md", f"{run_id}.md")):
        result = cli(db, "export", run_id, "--format", fmt, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"wrote {tmp_path / name} (")
        assert "Summarise the notes" in (tmp_path / name).read_text()
    result = cli(db, "export", run_id, "--format", "bundle", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    members = bundle_members(tmp_path / f"{run_id}.tar.gz")
    assert manifest_of(members)["run_id"] == run_id and "files/report.md" in members
