"""Journals of runs that read documents and cite them, written straight into the store.

The model steps' outputs have the shape the engine records: the API's ``content`` blocks,
text blocks carrying ``citations``, and ``documents`` naming the step that read each
document, in ``document_index`` order. Nothing here needs the model adapter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop_agent.client.api import Client
from desktop_agent.domain import EffectClass, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome

ALPHA = {"seq": 2, "path": "alpha.pdf", "title": "alpha.pdf", "media_type": "application/pdf",
         "file_id": None}  # fmt: skip
BETA = {"seq": 3, "path": "beta.txt", "title": "beta.txt", "media_type": "text/plain",
        "file_id": None}  # fmt: skip
GREW = {
    "type": "page_location",
    "cited_text": "The market grew 4% in 2025.",
    "document_index": 0,
    "document_title": "alpha.pdf",
    "start_page_number": 3,
    "end_page_number": 5,
}
FELL = {
    "type": "char_location",
    "cited_text": "Churn fell by a third.",
    "document_index": 1,
    "document_title": "beta.txt",
    "start_char_index": 120,
    "end_char_index": 142,
}
CITED_ANSWER: list[dict[str, Any]] = [
    {"type": "text", "text": "According to Alpha, "},
    {"type": "text", "text": "the market grew 4% in 2025", "citations": [GREW]},
    {"type": "text", "text": ". Beta adds that "},
    {"type": "text", "text": "churn fell by a third", "citations": [FELL]},
    {"type": "text", "text": ". Three vendors lead the field."},
]
"""An answer as the API cuts it at its citations: the last sentence cites nothing."""
REPORT = (
    "# Q3 market\n\n"
    "_Drafted from the notes._\n\n"
    "The market grew 4% in 2025, says Alpha. Churn fell by a third over the year.\n"
    "Three vendors lead the field.\n\n"
    "- The **market grew 4% in 2025**, again.\n"
)
"""A report file: two sentences match cited blocks, three claims do not."""


@dataclass(frozen=True)
class Cited:
    """A run written by :func:`cited_run` and its step numbers."""

    run_id: str
    answer: int
    """The model step whose answer cites the documents."""
    write: int | None
    """The write of the report file (None: the run wrote none)."""
    last: int
    """The last step."""


def _model(client: Client, run_id: str, seq: int, content: list[dict[str, Any]],
           documents: list[dict[str, Any]] | None = None) -> None:  # fmt: skip
    store = client.store
    store.commit(run_id, intents=[StepIntent(seq, StepKind.MODEL_CALL, "claude-sonnet-4-5",
                                             {"model": "claude-sonnet-4-5"})])  # fmt: skip
    output: dict[str, Any] = {"content": content, "stop_reason": "end_turn"}
    if documents is not None:
        output["documents"] = documents
    done = StepOutcome(seq, StepStatus.COMPLETED, output, usage=Usage(900, 60), cost_usd=0.002)
    store.commit(run_id, outcome=done)


def _tool(client: Client, run_id: str, seq: int, name: str, args: dict[str, Any], out: str) -> None:
    client.store.commit(
        run_id,
        intents=[
            StepIntent(
                seq,
                StepKind.TOOL_CALL,
                name,
                {"tool_use_id": f"tu{seq}", "arguments": args},
                effect=EffectClass.READ_ONLY if name == "read_file" else EffectClass.IDEMPOTENT,
                status=StepStatus.COMPLETED,
                output={"content": out, "is_error": False},
            )
        ],
    )


def cited_run(
    client: Client,
    workspace: Path,
    *,
    report: str | None = REPORT,
    answer: list[dict[str, Any]] | None = None,
    documents: list[dict[str, Any]] | None = None,
    goal: str = "Size the Q3 market",
    model: str = "demo",
) -> Cited:
    """A completed run: it reads two documents, answers citing them, writes a report.

    Unless ``report`` is None it writes ``report.md``, then says it is done.

    Args:
        client: the client whose store is written.
        workspace: the run's workspace.
        report: the report file's text (None: no file; the cited answer is the last).
        answer: the cited answer's blocks (default :data:`CITED_ANSWER`).
        documents: the answer's ``documents`` (default alpha.pdf read at step 2, beta.txt at 3).
        goal: the run's goal.
        model: the run's model (only its label: nothing calls it).
    """
    run = client.start_run(goal, model=model, workspace=workspace)
    store = client.store
    store.commit(run.id, patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()))
    uses: list[dict[str, Any]] = [{"type": "text", "text": "Reading both sources."}]
    for seq, path in ((2, "alpha.pdf"), (3, "beta.txt")):
        uses.append({"type": "tool_use", "id": f"tu{seq}", "name": "read_file",
                     "input": {"path": path}})  # fmt: skip
    _model(client, run.id, 1, uses)
    _tool(client, run.id, 2, "read_file", {"path": "alpha.pdf"}, "The market grew 4% in 2025.")
    _tool(client, run.id, 3, "read_file", {"path": "beta.txt"}, "Churn fell by a third.")
    docs = [ALPHA, BETA] if documents is None else documents
    _model(client, run.id, 4, list(CITED_ANSWER if answer is None else answer), docs)
    seq, write = 5, None
    if report is not None:
        _tool(client, run.id, 5, "write_file", {"path": "report.md", "content": report}, "written")
        (workspace / "report.md").write_text(report, encoding="utf-8")
        _model(client, run.id, 6, [{"type": "text", "text": "Done: the report is in report.md."}])
        seq, write = 6, 5
    store.commit(run.id, patch=RunPatch(status=RunStatus.COMPLETED, finished_at=time.time()))
    return Cited(run.id, 4, write, seq)
