"""A fork compared with its parent: the steps they share are counted once, apart.

The fork's own counters never held the shared steps' cost (the parent paid for them), so
totals that set the parent's whole cost against the fork's own read "B − A" as cheaper by
exactly the shared cost. The comparison now shows the shared steps on a row of their own
and each run's own work beside the other's.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from desktop_agent.cli.compare import print_comparison
from desktop_agent.cli.output import Out
from desktop_agent.client import forks as client_forks
from desktop_agent.client.api import Client
from desktop_agent.client.compare import compare_runs
from desktop_agent.domain import RunStatus
from desktop_agent.gui.diffview import word_diff
from tests.conftest import MakeExecutor, drain


def _finish(client: Client, make_executor: MakeExecutor, run_id: str) -> None:
    """Run ``run_id`` to its end, approving what it asks (the demo asks to overwrite)."""
    executor = make_executor()
    for _ in range(5):
        drain(client.store, executor)
        asked = [a for a in client.approvals() if a.run_id == run_id]
        if not asked:
            break
        for approval in asked:
            client.approve(approval.id)
    assert client.run(run_id).status == RunStatus.COMPLETED


def _fork_pair(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> tuple[str, str, int]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\nAlpha grew 4% in 2025.\n")
    (ws / "b.md").write_text("# B\nBeta churn fell.\n")
    parent = client.start_run("Summarise the notes", model="demo", workspace=str(ws))
    _finish(client, make_executor, parent.id)
    at = 5
    fork = client_forks.fork(client, parent.id, at, note="Be brief")
    _finish(client, make_executor, fork.id)
    return parent.id, fork.id, at


def test_the_shared_steps_are_counted_once_and_own_work_is_set_against_own_work(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    parent, fork, at = _fork_pair(client, make_executor, tmp_path)
    result = compare_runs(client, parent, fork)
    shared, own_a, own_b = result.shared, result.own_a, result.own_b
    assert shared is not None and own_a is not None and own_b is not None
    prefix = [s for s in client.steps(parent) if s.seq <= at]
    assert shared.steps == at
    assert shared.cost_usd == pytest.approx(sum(s.cost_usd for s in prefix))
    assert shared.cost_usd > 0
    # The parent's own work is what it did beyond the shared steps; the fork's is its own.
    assert own_a.cost_usd == pytest.approx(client.run(parent).cost_usd - shared.cost_usd)
    assert own_b.cost_usd == pytest.approx(client.run(fork).cost_usd)
    assert own_a.steps == client.run(parent).last_seq - at
    assert own_b.steps == client.run(fork).last_seq - at
    # The whole-run totals would have set $X of the parent against the fork's own work.
    naive = result.totals_b.cost_usd - result.totals_a.cost_usd
    fair = own_b.cost_usd - own_a.cost_usd
    assert fair - naive == pytest.approx(shared.cost_usd)

    # The same the other way round (the fork as A), and in the terminal.
    again = compare_runs(client, fork, parent)
    assert again.shared == shared and again.own_a == own_b and again.own_b == own_a
    out = io.StringIO()
    print_comparison(result, False, Out(False, out))
    text = out.getvalue()
    assert f"shared: steps 1–{at} of the parent" in text
    assert "B − A (own)" in text


def test_unrelated_runs_have_no_shared_row(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    parent, fork, _at = _fork_pair(client, make_executor, tmp_path)
    other = client_forks.run_again(client, parent)
    _finish(client, make_executor, other.id)
    result = compare_runs(client, fork, other.id)  # a fork of A against a re-run of A
    assert result.shared is None and result.own_a is None


def test_a_rewritten_line_shows_the_words_that_changed() -> None:
    old, new = word_diff("The market grew 4% in 2025.", "The market grew 5% in 2025.")
    assert old == "The market grew <s>4% </s>in 2025."
    assert new == "The market grew <b><u>5% </u></b>in 2025."
    same, also = word_diff("Nothing changed.", "Nothing changed.")
    assert same == also == "Nothing changed."
