"""``show`` prints, under a model call, the sources its answer cites."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.client.api import Client
from tests.export.conftest import cli
from tests.report.journals import cited_run


def _journal(text: str) -> list[str]:
    """The journal's lines of ``show``'s output (before the report)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("[   1]"))
    end = next((i for i, line in enumerate(lines) if line.startswith("Report: ")), len(lines))
    return lines[first:end]


def test_show_prints_each_citation_under_the_step_that_cites_it(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace)
    result = cli(client.db_path, "show", run.run_id)
    assert result.returncode == 0, result.stderr
    journal = _journal(result.stdout)
    at = next(i for i, line in enumerate(journal) if line.startswith(f"[{run.answer:>4}]"))
    assert journal[at + 1 : at + 3] == [
        "        ↳ [1] alpha.pdf, pp. 3–4: “The market grew 4% in 2025.” (read at step 2)",
        "        ↳ [2] beta.txt, chars 120–142: “Churn fell by a third.” (read at step 3)",
    ]
    assert journal[at + 3].startswith(f"[{run.answer + 1:>4}]")
    assert sum("↳" in line for line in journal) == 2  # no other step cites anything


def test_a_citation_whose_source_is_unknown_keeps_its_title(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace, report=None, documents=[])
    result = cli(client.db_path, "show", run.run_id)
    assert result.returncode == 0, result.stderr
    cited = [line for line in _journal(result.stdout) if "↳" in line]
    assert cited == [
        "        ↳ [1] alpha.pdf, pp. 3–4: “The market grew 4% in 2025.”",
        "        ↳ [2] beta.txt, chars 120–142: “Churn fell by a third.”",
    ]
