"""Aligning two runs: the pairs found, what is marked as differing, totals and deltas."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop_agent.client import compare as cmp
from desktop_agent.client.api import Client
from desktop_agent.client.compare import RowKind, compare_runs, step_diff
from tests.compare.conftest import Pair, run_with
from tests.conftest import MakeExecutor
from tests.helpers.fakes import Reply


def shape(rows: tuple[cmp.CompareRow, ...]) -> list[tuple[str, int | None, int | None]]:
    return [(r.kind.value, r.a.seq if r.a else None, r.b.seq if r.b else None) for r in rows]


def test_a_run_compared_with_itself_is_the_same_everywhere(client: Client, pair: Pair) -> None:
    result = compare_runs(client, pair.a, pair.a)
    assert [r.kind for r in result.rows] == [RowKind.SAME] * result.totals_a.steps
    assert all(r.delta_cost == 0 and r.delta_tokens == 0 for r in result.rows)


def test_inserted_steps_are_only_in_b_and_changed_arguments_are_marked(
    client: Client, pair: Pair
) -> None:
    result = compare_runs(client, pair.a[:6], pair.b[:6])  # prefixes, as the CLI takes them
    assert shape(result.rows) == [
        ("same", 1, 1),  # "Reading." → read_file
        ("same", 2, 2),  # read_file source.md
        ("only_b", None, 3),  # "Listing." → list_files
        ("only_b", None, 4),  # list_files
        ("changed", 3, 5),  # "Noting." asks for another note
        ("changed", 4, 6),  # append_note alpha / beta
        ("same", 5, 7),  # "Done."
    ]
    model_row, note_row = result.rows[4], result.rows[5]
    assert (model_row.arguments_differ, model_row.result_differs) == (False, True)
    assert note_row.arguments_differ
    diff = step_diff(note_row)
    assert [(c.name, c.a, c.b) for c in diff.arguments] == [("text", '"alpha"', '"beta"')]
    answer = step_diff(model_row)
    assert any(
        line.startswith("-→ append_note") and "alpha" in line for line in answer.result_lines
    )
    assert any(line.startswith("+→ append_note") and "beta" in line for line in answer.result_lines)


def test_totals_come_from_the_runs_and_deltas_add_up(client: Client, pair: Pair) -> None:
    result = compare_runs(client, pair.a, pair.b)
    run_a, run_b = client.run(pair.a), client.run(pair.b)
    assert (result.totals_a.steps, result.totals_b.steps) == (5, 7)
    assert result.totals_a.cost_usd == pytest.approx(run_a.cost_usd) and run_a.cost_usd > 0
    assert result.totals_b.tokens == run_b.usage.input_tokens + run_b.usage.output_tokens
    step_cost_delta = sum(r.delta_cost for r in result.rows)
    assert step_cost_delta == pytest.approx(run_b.cost_usd - run_a.cost_usd)
    assert (
        sum(r.delta_tokens for r in result.rows) == result.totals_b.tokens - result.totals_a.tokens
    )


def test_a_different_result_is_a_change_of_result_only(
    client: Client, pair: Pair, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    # The same calls, in a workspace where the source says something else.
    ws = tmp_path / "c"
    ws.mkdir()
    (ws / "source.md").write_text("The supplier note mentions nickel prices.\n")
    other = run_with(
        client,
        make_executor,
        ws,
        [
            Reply("Reading.", [("read_file", {"path": "source.md"})]),
            Reply("Noting.", [("append_note", {"path": "notes.md", "text": "alpha"})]),
            Reply("Done."),
        ],
    )
    result = compare_runs(client, pair.a, other)
    changed = [r for r in result.rows if r.kind == RowKind.CHANGED]
    assert [(r.a and r.a.name, r.arguments_differ, r.result_differs) for r in changed] == [
        ("read_file", False, True)
    ]
    lines = step_diff(changed[0]).result_lines
    assert "-The supplier note mentions cobalt prices." in lines
    assert "+The supplier note mentions nickel prices." in lines


keys = st.lists(st.sampled_from(["m", "r", "w", "l"]), max_size=60)


@given(keys, keys, st.sampled_from(["exact", "greedy", "levels"]))
def test_every_step_appears_once_in_order_and_pairs_share_their_key(
    a: list[str], b: list[str], how: str
) -> None:
    if how == "greedy":  # the linear walk used for long middles
        pairs = cmp._greedy(a, b)
    elif how == "levels":  # specific keys (here: key and position mod 3) first
        pairs = cmp.align_steps(
            [[f"{k}{n % 3}" for n, k in enumerate(a)], a],
            [[f"{k}{n % 3}" for n, k in enumerate(b)], b],
        )
    else:
        pairs = cmp.align_keys(a, b)
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))
    assert all(a[i] == b[j] for i, j in pairs if i is not None and j is not None)


def test_the_greedy_walk_finds_the_pairs_of_an_edited_copy() -> None:
    a = [f"k{n % 7}-{n}" for n in range(3000)]
    b = [k for n, k in enumerate(a) if n % 50 != 10]  # every 50th removed
    b.insert(1500, "new")
    pairs = cmp._greedy(a, b)
    matched = sum(1 for i, j in pairs if i is not None and j is not None)
    assert matched == len(b) - 1  # everything but the inserted step


def test_text_arguments_of_several_lines_get_a_line_diff() -> None:
    a = {"path": "report.md", "content": "# Brief\nVendors hold 71%.\nDraft.\n"}
    b = {"path": "report.md", "content": "# Brief\nVendors hold 71%.\nPrices: Acme 49.\n"}
    (change,) = cmp.argument_changes(a, b)
    assert change.name == "content"
    assert "-Draft." in change.lines and "+Prices: Acme 49." in change.lines
    (short,) = cmp.argument_changes({"q": "cobalt"}, {"q": "nickel"})
    assert short.lines == ()  # one line each: shown side by side
