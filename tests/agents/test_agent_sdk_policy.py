"""The analyst's approval rules for the tools of an Agent SDK session (Claude Code's)."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.agents.sdk_policy import decide, effect_of
from desktop_agent.config import Settings
from desktop_agent.domain import EffectClass


def test_reads_run_writes_over_content_and_actions_are_asked_about(tmp_path: Path) -> None:
    rules = Settings()
    (tmp_path / "kept.md").write_text("old")
    assert decide("Read", {"file_path": "kept.md"}, {}, rules, tmp_path).verdict == "allow"
    assert decide("Bash", {"command": "ls"}, {}, rules, tmp_path).verdict == "ask"
    assert decide("mcp__crm__update", {}, {}, rules, tmp_path).verdict == "ask"
    over = decide("Write", {"file_path": "kept.md", "content": "new"}, {}, rules, tmp_path)
    assert over.verdict == "ask" and "kept.md" in over.rule
    same = {"file_path": str(tmp_path / "kept.md"), "content": "old"}
    assert decide("Write", same, {}, rules, tmp_path).verdict == "allow"
    fresh = {"file_path": "new.md", "content": "x"}
    assert decide("Write", fresh, {}, rules, tmp_path).verdict == "allow"
    calm = Settings(ask_unsafe=False, ask_overwrite=False)
    assert decide("Bash", {}, {}, calm, tmp_path).verdict == "allow"
    assert (effect_of("Read"), effect_of("Edit"), effect_of("Bash")) == (
        EffectClass.READ_ONLY,
        EffectClass.IDEMPOTENT,
        EffectClass.UNSAFE,
    )


def test_per_tool_policies_win_and_a_star_names_every_other_tool(tmp_path: Path) -> None:
    calm = Settings(ask_unsafe=False)
    assert decide("Read", {}, {"Read": "ask"}, calm, tmp_path).verdict == "ask"
    refused = decide("Bash", {}, {"Bash": "never"}, calm, tmp_path)
    assert refused.verdict == "deny" and "disabled" in refused.rule
    every = {"*": "ask", "Read": "always"}
    assert decide("Glob", {}, every, calm, tmp_path).verdict == "ask"
    assert decide("Read", {}, every, calm, tmp_path).verdict == "allow"
