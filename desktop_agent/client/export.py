"""A run as a document to hand on: one self-contained HTML file, or Markdown for notes.

The HTML needs nothing beside it (styles inline, the timeline an inline SVG, no script, no
link to fetch): a colleague opens it in any browser, offline. Both carry the run's goal,
status, model, spend, plan, every step with what it did, its cost and duration, and the
report the run wrote (``report.md`` in its workspace, when there is one). Neither ever
carries the API key: everything written passes through the same redaction as archives
and the search index (anything shaped like a key is replaced), and the key itself is
never in the journal to begin with.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.views import StepEntry, plan_from_output, step_summary, timeline_entries
from desktop_agent.domain import Run, StepKind
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.persistence.redaction import redact

REPORT_FILE = "report.md"
REPORT_CHARS = 200_000
"""The most characters of the run's report embedded."""

SUMMARY_CHARS = 200
_KIND_COLORS = {
    StepKind.MODEL_CALL: "#5b7fd6",
    StepKind.TOOL_CALL: "#3f9f6a",
    StepKind.APPROVAL: "#d69a2d",
    StepKind.SLEEP: "#9a9a9a",
    StepKind.QUESTION: "#c0609a",
    StepKind.BUDGET: "#c05050",
    StepKind.ERROR: "#c03030",
}


@dataclass(frozen=True)
class RunDocument:
    """What an export holds, read once: the run, its steps, plan and report."""

    run: Run
    steps: Sequence[StepEntry]
    plan: Sequence[tuple[str, bool]]
    report: str | None


def read_document(client: Client, run_id: str) -> RunDocument:
    """Read what an export of ``run_id`` (id or unique prefix) holds.

    Raises:
        NotFoundError: no such run.
    """
    run = client.run(run_id)
    steps = timeline_entries(client, run.id)
    plan: list[tuple[str, bool]] = []
    for entry in reversed(steps):
        if entry.name == "update_plan" and entry.kind == StepKind.TOOL_CALL:
            found = plan_from_output(entry.output())
            if found is not None:
                plan = [(i.text, i.done) for i in found]
                break
    report_path = Path(run.workspace) / REPORT_FILE
    report = None
    if report_path.is_file():
        report = report_path.read_text(encoding="utf-8", errors="replace")[:REPORT_CHARS]
    return RunDocument(run, steps, plan, report)


def _safe(text: str) -> str:
    result: str = redact(text)
    return result


def _facts(run: Run) -> list[tuple[str, str]]:
    u = run.usage
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at))
    return [
        ("Status", run.status.value + (f": {run.status_message}" if run.status_message else "")),
        ("Model", run.model + (" (offline demo, simulated cost)" if run.is_demo else "")),
        ("Started", when),
        ("Cost", format_usd(run.cost_usd)),
        ("Tokens", f"{u.input_tokens:,} in, {u.output_tokens:,} out"),
        ("Worked", format_duration(run.active_seconds)),
        ("Steps", str(run.last_seq)),
        ("Run id", run.id),
    ]


def _duration(entry: StepEntry) -> str:
    seconds = entry.duration_s
    if seconds is None:
        return "open"
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


# --------------------------------------------------------------------------- Markdown


def to_markdown(doc: RunDocument) -> str:
    """The run as Markdown."""
    run = doc.run
    lines = [f"# {_safe(run.title or run.goal)}", "", f"> {_safe(run.goal)}", ""]
    lines += ["| | |", "|---|---|"]
    lines += [f"| {k} | {_safe(v)} |" for k, v in _facts(run)]
    if doc.plan:
        lines += ["", "## Plan", ""]
        lines += [f"- [{'x' if done else ' '}] {_safe(text)}" for text, done in doc.plan]
    lines += ["", "## Steps", "", "| # | step | status | time | cost |", "|---|---|---|---|---|"]
    for e in doc.steps:
        what = _safe(step_summary(e, SUMMARY_CHARS)).replace("|", "\\|")
        lines.append(
            f"| {e.seq} | {e.kind.value} {e.name}: {what} | {e.status.value} | "
            f"{_duration(e)} | {format_usd(e.cost_usd) if e.cost_usd else ''} |"
        )
    if doc.report:
        lines += ["", "## Report", "", _safe(doc.report)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- HTML


def timeline_svg(steps: Sequence[StepEntry], width: int = 960, lane: int = 14) -> str:
    """The steps on a time axis, one lane per kind: an inline SVG."""
    timed = [e for e in steps if e.started_at]
    if not timed:
        return ""
    start = min(e.started_at for e in timed)
    end = max((e.finished_at or e.started_at) for e in timed)
    span = max(end - start, 1e-6)
    kinds = [k for k in StepKind if any(e.kind == k for e in timed)]
    label_w = 110
    scale = (width - label_w - 10) / span
    height = lane * len(kinds) + 24
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"role='img' aria-label='timeline of the run'>"
    ]
    for row, kind in enumerate(kinds):
        y = row * lane + 4
        parts.append(f"<text x='0' y='{y + lane - 4}' font-size='11'>{kind.value}</text>")
        color = _KIND_COLORS.get(kind, "#777777")
        for e in (e for e in timed if e.kind == kind):
            x = label_w + (e.started_at - start) * scale
            w = max(1.0, ((e.finished_at or end) - e.started_at) * scale)
            title = html.escape(f"#{e.seq} {e.name} ({_duration(e)})")
            parts.append(
                f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{lane - 3}' "
                f"fill='{color}'><title>{title}</title></rect>"
            )
    axis_y = lane * len(kinds) + 18
    parts.append(
        f"<text x='{label_w}' y='{axis_y}' font-size='11'>0s</text>"
        f"<text x='{width - 10}' y='{axis_y}' font-size='11' text-anchor='end'>"
        f"{html.escape(format_duration(span))}</text></svg>"
    )
    return "".join(parts)


_STYLE = """
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; vertical-align: top; }
.facts td:first-child { color: #666; } .steps td { border-top: 1px solid #ddd; }
.steps td.n, .steps td.t { text-align: right; white-space: nowrap; }
.failed { color: #b00; } pre { white-space: pre-wrap; background: #f6f6f6; padding: 1em; }
"""


def to_html(doc: RunDocument) -> str:
    """The run as one self-contained HTML page."""
    run = doc.run
    e = html.escape
    title = e(_safe(run.title or run.goal))
    facts = "".join(f"<tr><td>{e(k)}</td><td>{e(_safe(v))}</td></tr>" for k, v in _facts(run))
    plan = ""
    if doc.plan:
        items = "".join(
            f"<li>{'☑' if done else '☐'} {e(_safe(text))}</li>" for text, done in doc.plan
        )
        plan = f"<h2>Plan</h2><ul>{items}</ul>"
    rows = "".join(
        f"<tr class='{s.status.value}'><td class='n'>{s.seq}</td><td>{e(s.kind.value)}</td>"
        f"<td>{e(s.name)}</td><td>{e(_safe(step_summary(s, SUMMARY_CHARS)))}</td>"
        f"<td>{e(s.status.value)}</td><td class='t'>{e(_duration(s))}</td>"
        f"<td class='t'>{e(format_usd(s.cost_usd)) if s.cost_usd else ''}</td></tr>"
        for s in doc.steps
    )
    report = f"<h2>Report</h2><pre>{e(_safe(doc.report))}</pre>" if doc.report else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{title}</h1><p>{e(_safe(run.goal))}</p>"
        f"<table class='facts'>{facts}</table>{plan}"
        f"<h2>Timeline</h2>{timeline_svg(doc.steps)}"
        "<h2>Steps</h2><table class='steps'><tr><th>#</th><th>kind</th><th>name</th>"
        f"<th>what</th><th>status</th><th>time</th><th>cost</th></tr>{rows}</table>"
        f"{report}<p><small>Exported by desktop-agent on "
        f"{e(time.strftime('%Y-%m-%d %H:%M'))}.</small></p></body></html>\n"
    )


def export(client: Client, run_id: str, fmt: str) -> tuple[Run, str]:
    """The run and its document in ``fmt`` (``html`` or ``md``)."""
    doc = read_document(client, run_id)
    return doc.run, to_html(doc) if fmt == "html" else to_markdown(doc)
