"""An imported Claude Code session's spend: in usage, by agent, never against the cap.

Claude Code spent those dollars before desktop-agent saw them; the monthly cap limits what
desktop-agent's own runs may spend, so an import must not stop them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code
from desktop_agent.persistence.usage import MonthSpend
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, research_session
from tests.search.test_cli_search import cli


def test_an_imported_session_is_in_usage_by_agent_and_outside_the_monthly_cap(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "repo", start=time.time() - 3600)
    import_claude_code(client)
    (run,) = client.runs()
    assert run.cost_usd > 0

    usage = client.usage(0.0)
    assert usage.total.cost_usd == pytest.approx(run.cost_usd)
    assert set(usage.by_agent) == {"Claude Code"}
    assert usage.by_agent["Claude Code"].cost_usd == pytest.approx(run.cost_usd)
    assert usage.month == 0.0  # this month's, as the cap counts it

    cap = MonthSpend(client.store.db, lambda: run.cost_usd / 2)
    assert cap.month_spent_usd(time.time()) == 0.0
    assert cap.reserve("another-run", run.cost_usd / 4, time.time(), hold=False).granted

    done = cli(client.db_path, "usage")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("per agent:")
    assert lines[at + 1].lstrip().startswith("Claude Code")
    data = json.loads(cli(client.db_path, "usage", "--json").stdout)
    assert data["by_agent"]["Claude Code"]["cost_usd"] == pytest.approx(run.cost_usd, abs=1e-6)
    assert data["month"]["cost_usd"] == 0.0
