"""``desktop-agent compare`` through the real command line, on two real runs."""

from __future__ import annotations

import json

from desktop_agent.client.api import Client
from tests.compare.conftest import Pair
from tests.search.test_cli_search import cli


def test_the_table_marks_inserted_and_changed_steps_and_ends_with_totals(
    client: Client, pair: Pair
) -> None:
    result = cli(client.db_path, "compare", pair.a, pair.b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"A: run {pair.a}  completed  Note what the source says")
    assert lines[1].startswith(f"B: run {pair.b}  completed")
    rows = [line for line in lines if line[:5].strip().isdigit() or line[:6].strip() == ""]
    only_b = [line for line in lines if " + " in line[38:44]]
    changed = [line for line in lines if " ~ " in line[38:44]]
    assert len(only_b) == 2 and "list_files" in only_b[1], result.stdout
    assert len(changed) == 2 and "args" in changed[1] and "append_note" in changed[1]
    assert rows, result.stdout
    steps = next(line for line in lines if line.strip().startswith("steps"))
    assert steps.split() == ["steps", "5", "7", "+2"]
    assert lines[-1].startswith("3 same, 2 changed, 0 only in A, 2 only in B")


def test_same_steps_fold_unless_all(client: Client, pair: Pair) -> None:
    folded = cli(client.db_path, "compare", pair.a, pair.a)
    assert folded.returncode == 0, folded.stderr
    assert "… 5 same steps (A #1–5, B #1–5)" in folded.stdout
    full = cli(client.db_path, "compare", pair.a, pair.a, "--all")
    assert "same steps" not in full.stdout
    assert sum(1 for line in full.stdout.splitlines() if line[:5].strip().isdigit()) == 5


def test_json_has_every_row_and_the_differences_of_changed_ones(client: Client, pair: Pair) -> None:
    result = cli(client.db_path, "compare", pair.a, pair.b, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"run_a", "run_b", "totals_a", "totals_b", "counts", "rows"}
    assert data["counts"] == {"same": 3, "changed": 2, "only_a": 0, "only_b": 2}
    note = next(r for r in data["rows"] if r["a"] and r["a"]["name"] == "append_note")
    assert note["diff"]["arguments"] == [
        {"name": "text", "a": '"alpha"', "b": '"beta"', "lines": []}
    ]
    assert data["totals_b"]["steps"] - data["totals_a"]["steps"] == 2


def test_an_unknown_run_is_one_line_and_exit_2(client: Client, pair: Pair) -> None:
    result = cli(client.db_path, "compare", pair.a, "nosuchrun")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "desktop-agent: error: no run 'nosuchrun'; `desktop-agent runs` lists them"
    )
    assert result.stdout == ""
