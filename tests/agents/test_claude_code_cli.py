"""``desktop-agent import claude-code`` in a terminal, and ``import FILE`` beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from desktop_agent.client.api import Client
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, research_session


def _cli(
    db: Path, claude_home: ClaudeCodeFolder, *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DESKTOP_AGENT_DB"}
    env["CLAUDE_CONFIG_DIR"] = str(claude_home.root)
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=180,
        check=False,
    )


def test_import_claude_code_reports_new_grown_and_unchanged_sessions(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "one")
    s = research_session(claude_home, tmp_path / "two", start=1_790_200_000.0)
    first = _cli(client.db_path, claude_home, "import", "claude-code", "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    done = json.loads(first.stdout)
    assert (done["sessions"], done["new"], done["steps_added"]) == (2, 2, 20)
    s.user("one more question")
    human = _cli(client.db_path, claude_home, "import", "claude-code", cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    assert "2 Claude Code session(s) from" in human.stdout
    assert "0 new, 1 grown, 1 unchanged; 1 step(s) added" in human.stdout
    one = _cli(
        client.db_path,
        claude_home,
        "import",
        "claude-code",
        "--project",
        str(tmp_path / "one"),
        "--since",
        "2026-01-01",
        "--json",
        cwd=tmp_path,
    )
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["unchanged"] == 1
    listed = _cli(client.db_path, claude_home, "runs", "--json", cwd=tmp_path)
    assert {r["id"][:3] for r in json.loads(listed.stdout)} == {"cc-"}


def test_the_word_claude_code_means_claude_code_and_a_path_means_a_bundle(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "proj")
    (tmp_path / "claude-code").write_text("not a bundle")
    sessions = _cli(client.db_path, claude_home, "import", "claude-code", cwd=tmp_path)
    assert sessions.returncode == 0, sessions.stderr
    assert "give ./claude-code" in sessions.stderr
    assert "1 new" in sessions.stdout
    bundle = _cli(client.db_path, claude_home, "import", "./claude-code", cwd=tmp_path)
    assert bundle.returncode == 2 and "bundle" in bundle.stderr.lower(), bundle.stderr
    mixed = _cli(
        client.db_path, claude_home, "import", "./claude-code", "--project", ".", cwd=tmp_path
    )
    assert mixed.returncode == 2 and "go with `import claude-code`" in mixed.stderr


def test_a_missing_sessions_folder_is_said_plainly(client: Client, tmp_path: Path) -> None:
    nowhere = ClaudeCodeFolder(tmp_path / "no-claude-here")
    done = _cli(client.db_path, nowhere, "import", "claude-code", cwd=tmp_path)
    assert done.returncode == 2
    assert f"no Claude Code sessions folder at {nowhere.projects}" in done.stderr
    assert "Traceback" not in done.stderr
