"""``run --estimate`` and ``batch start --estimate``: the forecast printed, nothing started."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.llm.pricing import BATCH_DISCOUNT
from tests.forecast.history import past_run
from tests.helpers.timed_journal import Clock

Capture = pytest.CaptureFixture[str]

HISTORY = [(0.40, 300.0), (0.55, 420.0), (0.32, 240.0), (0.90, 900.0), (0.47, 360.0)]


def run_cli(client: Client, capsys: Capture, *args: str) -> tuple[int, str, str]:
    """``desktop-agent --db DB ARGS`` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = cli.main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


@pytest.fixture
def history(client: Client) -> list[str]:
    """Five completed streamed Sonnet 5.5 runs at its default effort; their ids."""
    clock = Clock(1_790_000_000.0)
    return [past_run(client, clock, cost=c, duration=d).id for c, d in HISTORY]


def test_run_estimate_prints_the_forecast_and_starts_nothing(
    client: Client, capsys: Capture, history: list[str]
) -> None:
    code, out, err = run_cli(
        client, capsys, "run", "Summarise the notes", "--model", "claude-sonnet-5-5", "--estimate"
    )
    assert code == 0, err
    median = statistics.median(c for c, _ in HISTORY)
    lines = out.splitlines()
    assert lines[0] == "Forecast for Claude Sonnet 5.5 at high effort:"
    assert lines[1].startswith(
        f" → streamed:  ≈ ${median:.2f} (90%: ${p90([c for c, _ in HISTORY]):.2f})"
    )
    assert lines[2].startswith(f"   economy:   ≈ ${median * BATCH_DISCOUNT:.2f}")
    assert lines[2].endswith("(derived)")
    assert "from 5 completed runs on Claude Sonnet 5.5 at high effort" in out
    assert lines[-1] == "Nothing was started."
    assert sorted(r.id for r in client.runs()) == sorted(history)  # no run row was made


def test_run_estimate_json_in_economy_mode(
    client: Client, capsys: Capture, history: list[str]
) -> None:
    code, out, err = run_cli(
        client, capsys, "run", "x", "--model", "claude-sonnet-5-5", "--estimate", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    costs = [c for c, _ in HISTORY]
    assert (data["basis"], data["based_on"], data["economy"], data["items"]) == (
        "history",
        5,
        False,
        1,
    )
    assert data["cost_usd"]["median"] == pytest.approx(statistics.median(costs))
    assert data["duration_s"]["p90"] == pytest.approx(p90([d for _, d in HISTORY]))
    economy = data["modes"]["economy"]
    assert economy["derived"]
    assert economy["cost_usd"]["median"] == pytest.approx(statistics.median(costs) * BATCH_DISCOUNT)
    assert len(client.runs()) == len(history)


def test_run_estimate_refuses_what_starting_would_refuse(client: Client, capsys: Capture) -> None:
    code, _, err = run_cli(client, capsys, "run", "x", "--model", "gpt-9", "--estimate")
    assert code == 2 and "unknown model 'gpt-9'" in err
    code, _, err = run_cli(
        client, capsys, "run", "x", "--model", "claude-sonnet-5-5", "--effort", "huge", "--estimate"
    )
    assert code == 2 and "huge" in err
    assert client.runs() == []


def test_batch_start_estimate_covers_every_item_and_makes_no_batch(
    client: Client, capsys: Capture, history: list[str], tmp_path: Path
) -> None:
    lines = tmp_path / "companies.txt"
    lines.write_text("Acme\nGlobex\n\nInitech\nUmbrella\nHooli\n")  # five items
    code, out, err = run_cli(
        client,
        capsys,
        *("batch", "start", "Profile {item}", "--lines", str(lines)),
        *("--model", "claude-sonnet-5-5", "--concurrency", "2", "--streamed"),
        *("--estimate", "--json"),
    )
    assert code == 0, err
    data = json.loads(out)
    costs = [c for c, _ in HISTORY]
    median, high = statistics.median(costs), p90(costs)
    assert (data["items"], data["concurrency"]) == (5, 2)
    assert data["cost_usd"]["median"] == pytest.approx(5 * median)
    assert data["cost_usd"]["p90"] == pytest.approx(5 * median + math.sqrt(5) * (high - median))
    assert data["modes"]["economy"]["cost_usd"]["median"] == pytest.approx(
        5 * median * BATCH_DISCOUNT
    )
    durations = [d for _, d in HISTORY]
    assert data["items_duration_s"]["median"] == pytest.approx(3 * statistics.median(durations))
    assert Scheduling(client).batches() == [] and len(client.runs()) == len(history)

    code, out, err = run_cli(
        client,
        capsys,
        *("batch", "start", "Profile {item}", "--lines", str(lines)),
        *("--model", "claude-sonnet-5-5", "--estimate"),
    )
    assert code == 0, err
    # Without --streamed a batch is in economy mode, every item at once (their turns share
    # batches): economy leads.
    assert out.startswith("Forecast for Claude Sonnet 5.5 at high effort, 5 items (5 at a time):")
    assert "all items" in out and " → economy:" in out


def test_show_gives_the_forecast_the_run_was_started_with(
    client: Client, capsys: Capture, history: list[str]
) -> None:
    run = client.start_run("Summarise the notes", model="claude-sonnet-5-5")
    costs = [c for c, _ in HISTORY]
    code, out, err = run_cli(client, capsys, "show", run.id)
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("  forecast:")]
    assert line.startswith(
        f"  forecast:  ≈ ${statistics.median(costs):.2f} (90%: ${p90(costs):.2f}) · "
    )
    assert line.endswith("· from 5 runs")
    code, out, err = run_cli(client, capsys, "show", run.id, "--json")
    assert code == 0, err
    kept = json.loads(out)["forecast"]
    assert (kept["basis"], kept["based_on"]) == ("history", 5)
    code, out, _ = run_cli(client, capsys, "show", history[0], "--json")
    assert json.loads(out)["forecast"] is None  # written into the store directly: none kept
