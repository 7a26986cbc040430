"""A run as a document to hand on: an HTML page, Markdown for notes, or a bundle to import.

The HTML needs nothing beside it (styles inline, the timeline an inline SVG, no script, no
link to fetch): a colleague opens it in any browser, offline. HTML and Markdown open with
the run's report (:mod:`desktop_agent.client.report`: its numbered references, which in
the HTML link to the steps that read the sources, and its uncited sentences marked), then
carry the run's goal, status, model, spend, plan, every step with what it did, its cost,
tokens and duration, and the approvals and their decisions. A bundle
(``.tar.gz``) holds ``manifest.json`` (format version, app version, a checksum per file),
``run.jsonl`` (the run's record in the archive's shape) and ``files/``: the workspace
files the run wrote; ``desktop-agent import`` brings it into another installation as a
read-only archived run (:func:`import_bundle`).

Nothing exported ever carries the API key: everything written passes through the same
redaction as archives and the search index, and through :func:`scrub`, which also hides
bearer tokens and ``api_key=…``-style assignments. The key itself is never in the journal.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import html
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import unicodedata
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop_agent import __version__
from desktop_agent.client import stepkinds
from desktop_agent.client.annotations import notes_by_step
from desktop_agent.client.api import Client
from desktop_agent.client.report import Report, build_report
from desktop_agent.client.report_html import Renderer
from desktop_agent.client.timeaxis import LANES, Lane, SpanState, TimeAxis
from desktop_agent.client.views import StepEntry, plan_from_output, step_summary, timeline_entries
from desktop_agent.domain import Approval, Run, StepKind, StepStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.tags import StepNote
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.persistence import imports, tagging
from desktop_agent.persistence.archive import ARCHIVE_FORMAT
from desktop_agent.persistence.redaction import REDACTED, redact

FORMATS = ("html", "md", "bundle")
SUFFIXES = {"html": ".html", "md": ".md", "bundle": ".tar.gz"}
REPORT_FILE = "report.md"
SUMMARY_CHARS = 200
DETAIL_CHARS = 2_000
"""The most characters of one step's argument or result text shown; the length is noted."""

BUNDLE_FORMAT = "desktop-agent-bundle"
BUNDLE_VERSION = 1
FILE_CAP = 10 * 1024 * 1024
"""The largest workspace file a bundle carries; a larger one is listed as left out."""
WRITING_TOOLS = {"write_file": "path", "append_note": "path"}
"""Built-in tools that write a workspace file, and the argument naming it."""

_SECRETS = (
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + REDACTED),
    (
        re.compile(
            r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)"
            r"(\"?\s*[:=]\s*\"?)[^\s\"'&,;]{6,}"
        ),
        r"\1\2" + REDACTED,
    ),
)
"""Key-like secrets beside the API key's own shape (which :func:`redact` replaces)."""


def scrub(value: Any) -> Any:
    """``value`` (text or JSON) with anything shaped like a key or a token replaced."""
    if isinstance(value, str):
        text: str = redact(value)
        for pattern, repl in _SECRETS:
            text = pattern.sub(repl, text)
        return text
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    return value


def _safe(text: str) -> str:
    result: str = scrub(text)
    return result


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RunDocument:
    """What an export holds, read once: the run, its steps, plan, approvals and report."""

    run: Run
    steps: Sequence[StepEntry]
    plan: Sequence[tuple[str, bool]]
    report: Report | None
    """The run's report, built from its journal (None: none yet)."""
    approvals: Sequence[Approval] = ()
    written: Sequence[str] = ()
    """Workspace files (relative paths) the run wrote that are still there."""
    notes: Mapping[int, Sequence[StepNote]] = field(default_factory=dict)
    """The analyst's notes, by the step they are about."""


def written_files(run: Run, steps: Sequence[StepEntry]) -> list[str]:
    """The workspace files the run wrote (its writing tools' paths, its reports), that exist.

    A path that leads out of the workspace is never listed.
    """
    root = Path(run.workspace).resolve()
    names: list[str] = []
    for e in steps:
        arg = WRITING_TOOLS.get(e.name)
        if arg is None or e.kind != StepKind.TOOL_CALL or e.status != StepStatus.COMPLETED:
            continue
        try:
            args = (e.input() or {}).get("arguments") or {}
        except (ValueError, AttributeError):
            continue
        default = "notes.md" if e.name == "append_note" else ""
        names.append(str(args.get(arg) or default) if isinstance(args, dict) else default)
    names += [REPORT_FILE, f"partial-report-{run.id}.md"]
    found: list[str] = []
    for name in names:
        if not name:
            continue
        path = (root / name).resolve()
        if path.is_relative_to(root) and path.is_file():
            rel = path.relative_to(root).as_posix()
            if rel not in found:
                found.append(rel)
    return found


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
    report = build_report(steps)
    decided = client._store.list_approvals(None, run_id=run.id)
    notes = notes_by_step(tagging.notes_of(client._db, run.id))
    return RunDocument(run, steps, plan, report, decided, written_files(run, steps), notes)


def _facts(run: Run) -> list[tuple[str, str]]:
    u = run.usage

    def when(t: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "not yet"

    return [
        ("Status", run.status.value + (f": {run.status_message}" if run.status_message else "")),
        ("Model", run.model + (" (offline demo, simulated cost)" if run.is_demo else "")),
        ("Started", when(run.created_at)),
        ("Finished", when(run.finished_at)),
        ("Cost", format_usd(run.cost_usd)),
        ("Tokens", f"{u.input_tokens:,} in, {u.output_tokens:,} out"),
        ("Worked", format_duration(run.active_seconds)),
        ("Steps", str(run.last_seq)),
        ("Run id", run.id),
        *([("Tags", ", ".join(run.tags))] if run.tags else []),
    ]


def _duration(entry: StepEntry) -> str:
    seconds = entry.duration_s
    if seconds is None:
        return "open"
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


def _tokens(entry: StepEntry) -> str:
    tin, tout = entry.tokens[0], entry.tokens[1]
    return f"{tin:,}/{tout:,}" if tin or tout else ""


def _label(kind: StepKind) -> str:
    return stepkinds.describe(kind).label


def _clipped(text: str, n: int = DETAIL_CHARS) -> str:
    if len(text) <= n:
        return text
    return f"{text[:n]}\n… ({len(text):,} characters in all; the first {n:,} shown)"


def _section_text(section: stepkinds.Section) -> str:
    """The section's content as text, scrubbed before JSON escapes line breaks away."""
    content = scrub(section.content)
    if section.shape == stepkinds.Shape.TEXT:
        return str(content or "")
    return json.dumps(content, ensure_ascii=False, indent=1, default=str)


def _sections(entry: StepEntry) -> list[stepkinds.Section]:
    try:
        return stepkinds.sections(stepkinds.facts_of(entry.to_step()))
    except ValueError:
        return []


def _approval_rows(doc: RunDocument) -> Iterator[tuple[str, ...]]:
    for a in doc.approvals:
        args = json.dumps(scrub(a.arguments), ensure_ascii=False, default=str)
        yield (
            str(a.seq),
            a.tool,
            a.state.value,
            a.reason or a.rule,
            a.decision_note,
            stepkinds.clip(args, SUMMARY_CHARS),
        )


# --------------------------------------------------------------------------- Markdown


def _cell(text: str) -> str:
    return _safe(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: RunDocument) -> str:
    """The run as Markdown."""
    run = doc.run
    lines = [f"# {_safe(run.title or run.goal)}", "", f"> {_safe(run.goal)}", ""]
    if doc.report:
        lines += _report_markdown(doc.report)
    lines += ["| | |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in _facts(run)]
    if doc.plan:
        lines += ["", "## Plan", ""]
        lines += [f"- [{'x' if done else ' '}] {_safe(text)}" for text, done in doc.plan]
    lines += ["", "## Steps", ""]
    lines += ["| # | step | what | status | time | tokens in/out | cost |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for e in doc.steps:
        what = _cell(step_summary(e, SUMMARY_CHARS))
        lines.append(
            f"| {e.seq} | {_label(e.kind)} {_cell(e.name)} | {what} | {e.status.value} | "
            f"{_duration(e)} | {_tokens(e)} | {format_usd(e.cost_usd) if e.cost_usd else ''} |"
        )
        for note in doc.notes.get(e.seq, ()):
            lines.append(f"| | ✎ note | {_cell(note.text)} | | | | |")
    if doc.approvals:
        lines += ["", "## Approvals", "", "| step | tool | decision | why | note | arguments |"]
        lines += ["|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in _approval_rows(doc)]
    if doc.written:
        lines += ["", "## Files it wrote", ""] + [f"- `{_safe(n)}`" for n in doc.written]
    return "\n".join(lines) + "\n"


_HEADING = re.compile(r"^( {0,3})(#{1,6})(?=\s)", re.MULTILINE)


def _report_markdown(report: Report) -> list[str]:
    """The report's section: its text with ``[n]`` and ``[?]`` marks, then its references.

    Its headings go two levels down, under the page's ``## Report``.
    """
    text = _HEADING.sub(
        lambda m: m.group(1) + "#" * min(6, len(m.group(2)) + 2), report.annotated()
    )
    lines = ["## Report", "", f"_{_safe(report.source_words())} · {report.coverage_words()}_", ""]
    lines += [_safe(text).rstrip(), ""]
    refs = report.reference_lines()
    if refs:
        lines += ["### References", ""] + [f"- {_safe(line)}" for line in refs] + [""]
    return lines


# --------------------------------------------------------------------------- HTML


def _ticks(span: float) -> list[float]:
    """About six round times between 0 and ``span`` seconds."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400):
        if span / step <= 6:
            return [i * step for i in range(int(span // step) + 1)]
    return [0.0, span]


_STATE_STROKES = {
    SpanState.FAILED: "#c03030",
    SpanState.RETRIED: "#c03030",
    SpanState.IN_DOUBT: "#c03030",
    SpanState.SALVAGED: "#d69a2d",
}


def timeline_svg(
    steps: Sequence[StepEntry], width: int = 960, lane: int = 18, *, live: bool = False
) -> str:
    """The run on a time axis as an inline SVG: the app's time-axis lanes and spans.

    The layout is :class:`~desktop_agent.client.timeaxis.TimeAxis`'s, as the run pane's
    time-axis view paints it: one lane each for model calls, tools, each reason of a
    wait and hibernation, at most one bar per pixel column (so a 10,000-step run is a
    picture of bounded size). Each bar has its kind's colour and its step as a tooltip;
    failed and retried spans are outlined in red.
    """
    if not any(e.started_at for e in steps):
        return ""
    axis = TimeAxis(steps, live=live)
    now = time.time() if live else max((e.finished_at or e.started_at) for e in steps)
    extent = axis.extent(now)
    if extent is None:
        return ""
    t0, t1 = extent
    span = max(t1 - t0, 1e-6)
    label_w = 120
    plot_w = width - label_w - 20
    lanes = [name for name in LANES if axis.spans(name)]
    axis_y = lane * len(lanes) + 8
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{axis_y + 20}' "
        "role='img' aria-label='timeline of the run' font-family='sans-serif'>"
    ]
    for row, name in enumerate(lanes):
        y = row * lane + 4
        parts.append(
            f"<rect x='{label_w}' y='{y}' width='{plot_w}' height='{lane - 4}' fill='#f3f3f3'/>"
            f"<text x='0' y='{y + lane - 8}' font-size='12'>{html.escape(name.label)}</text>"
        )
        hibernating = name == Lane.HIBERNATION
        for bar in axis.bars(name, t0, t0 + span, plot_w, now):
            s = bar.span
            color = "#b8b8b8" if hibernating else stepkinds.describe(s.kind).colors.light
            stroke = _STATE_STROKES.get(s.state)
            outline = f" stroke='{stroke}' stroke-width='1.5'" if stroke else ""
            more = f" and {bar.merged - 1} more" if bar.merged > 1 else ""
            tip = html.escape(f"#{s.seq} {s.label} ({s.state.value}){more}")
            parts.append(
                f"<rect x='{label_w + bar.x0}' y='{y}' width='{bar.x1 - bar.x0 + 1}' "
                f"height='{lane - 4}' fill='{color}'{outline}><title>{tip}</title></rect>"
            )
    parts.append(
        f"<line x1='{label_w}' y1='{axis_y}' x2='{label_w + plot_w}' y2='{axis_y}' stroke='#888'/>"
    )
    for t in _ticks(span):
        x = label_w + t * plot_w / span
        parts.append(
            f"<line x1='{x:.1f}' y1='{axis_y}' x2='{x:.1f}' y2='{axis_y + 4}' stroke='#888'/>"
            f"<text x='{x:.1f}' y='{axis_y + 16}' font-size='11' text-anchor='middle'>"
            f"{html.escape(format_duration(t) if t else '0s')}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1.5em;
       color: #222; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; vertical-align: top; }
th { text-align: left; background: #f0f0f0; }
.facts td:first-child { color: #666; } .steps td, .approvals td { border-top: 1px solid #ddd; }
.steps td.n, .steps td.t { text-align: right; white-space: nowrap; }
table.steps, table.approvals { width: 100%; table-layout: fixed; }
td, pre { overflow-wrap: anywhere; }
.failed { color: #b00; } pre { white-space: pre-wrap; background: #f6f6f6; padding: .6em; }
details > summary { cursor: pointer; } details h4 { margin: .5em 0 .2em; font-size: .9em; }
.goal { font-size: 1.1em; color: #444; } .legend span:not(.uncited) { margin-right: 1.2em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em; }
tr.note td { border-top: none; background: #fff8dc; font-style: italic; }
.report { border: 1px solid #ddd; padding: 0 1.2em 1em; margin: 1em 0 2em; }
.report .source { color: #666; font-size: .9em; } .report a.ref { text-decoration: none; }
.uncited { background: #ffe9a8; } .refs p { margin: .3em 0; }
.report-table td { border: 1px solid #ddd; }
"""


def _step_row(s: StepEntry) -> str:
    e = html.escape
    what = e(_safe(step_summary(s, SUMMARY_CHARS)))
    details = "".join(
        f"<h4>{e(_safe(sec.title))}</h4><pre>{e(_safe(_clipped(_section_text(sec))))}</pre>"
        for sec in _sections(s)
    )
    cell = f"<details><summary>{what}</summary>{details}</details>" if details else what
    color = stepkinds.describe(s.kind).colors.light
    return (
        f"<tr id='step-{s.seq}' class='{s.status.value}'><td class='n'>{s.seq}</td>"
        f"<td style='border-left:4px solid {color}'>{e(_label(s.kind))}</td>"
        f"<td>{e(_safe(s.name))}</td><td>{cell}</td>"
        f"<td>{e(s.status.value)}</td><td class='t'>{e(_duration(s))}</td>"
        f"<td class='t'>{_tokens(s)}</td>"
        f"<td class='t'>{e(format_usd(s.cost_usd)) if s.cost_usd else ''}</td></tr>"
    )


def _note_rows(notes: Sequence[StepNote]) -> str:
    """The analyst's notes on a step, each a row under it."""
    e = html.escape
    return "".join(
        f"<tr class='note'><td></td><td>✎ note</td><td colspan='6'>{e(_safe(n.text))}</td></tr>"
        for n in notes
    )


def _report_html(report: Report) -> str:
    """The report's section, rendered, its uncited sentences tinted.

    Each ``[n]`` links to its reference, which links to the steps' anchors below.
    """
    render = Renderer(lambda n: f"#ref-{n}", lambda seq: f"#step-{seq}", _safe, heading_shift=2)
    source = html.escape(_safe(f"{report.source_words()} · {report.coverage_words()}"))
    return (
        f"<section class='report'><h2>Report</h2><p class='source'>{source}</p>"
        f"{render.body(report)}<h3>References</h3>{render.references(report)}</section>"
        if report.references
        else f"<section class='report'><h2>Report</h2><p class='source'>{source}</p>"
        f"{render.body(report)}{render.references(report)}</section>"
    )


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
    kinds = sorted({s.kind for s in doc.steps}, key=list(StepKind).index)
    legend = "".join(
        f"<span><i style='background:{stepkinds.describe(k).colors.light}'></i>"
        f"{e(_label(k))}</span>"
        for k in kinds
    )
    rows = "".join(_step_row(s) + _note_rows(doc.notes.get(s.seq, ())) for s in doc.steps)
    approvals = ""
    if doc.approvals:
        cells = "".join(
            "<tr>" + "".join(f"<td>{e(_safe(c))}</td>" for c in row) + "</tr>"
            for row in _approval_rows(doc)
        )
        approvals = (
            "<h2>Approvals and decisions</h2><table class='approvals'><tr>"
            "<th style='width:3.5em'>step</th><th style='width:8em'>tool</th>"
            "<th style='width:6em'>decision</th><th>why asked</th><th>note</th><th>arguments</th>"
            f"</tr>{cells}</table>"
        )
    written = ""
    if doc.written:
        names = "".join(f"<li><code>{e(_safe(n))}</code></li>" for n in doc.written)
        written = f"<h2>Files it wrote</h2><ul>{names}</ul>"
    report = _report_html(doc.report) if doc.report else ""
    picture = timeline_svg(doc.steps, live=run.status.is_active)
    goal = f"<p class='goal'>{e(_safe(run.goal))}</p>" if run.title not in ("", run.goal) else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{title}</h1>{goal}{report}"
        f"<table class='facts'>{facts}</table>{plan}"
        f"<h2>Timeline</h2>{picture}<p class='legend'>{legend}</p>"
        "<h2>Steps</h2><table class='steps'><tr><th style='width:3.5em'>#</th>"
        "<th style='width:5.5em'>kind</th><th style='width:9em'>name</th>"
        "<th>what (click for details)</th><th style='width:6.5em'>status</th>"
        "<th style='width:4em'>time</th><th style='width:7em'>tokens in/out</th>"
        f"<th style='width:4.5em'>cost</th></tr>{rows}</table>{approvals}{written}"
        f"<p><small>Exported by desktop-agent {e(__version__)} on "
        f"{e(time.strftime('%Y-%m-%d %H:%M'))}.</small></p></body></html>\n"
    )


def export(client: Client, run_id: str, fmt: str) -> tuple[Run, str]:
    """The run and its document in ``fmt`` (``html`` or ``md``)."""
    doc = read_document(client, run_id)
    return doc.run, to_html(doc) if fmt == "html" else to_markdown(doc)


# --------------------------------------------------------------------------- bundle


@dataclass(frozen=True)
class BundleInfo:
    """What a bundle holds (written by :func:`export_bundle`, read by :func:`import_bundle`).

    Attributes:
        run_id: the run.
        title: its title or goal.
        files: the workspace files carried (paths relative to the workspace).
        left_out: files not carried, each with why.
    """

    run_id: str
    title: str
    files: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_payload(path: Path, cap: int) -> tuple[bytes | None, str]:
    """The file's bytes as a bundle carries them (text scrubbed), or None and why not."""
    size = path.stat().st_size
    if size > cap:
        return None, f"{size:,} bytes, more than the {cap:,} a bundle carries"
    data = path.read_bytes()
    try:
        return _safe(data.decode("utf-8")).encode("utf-8"), ""
    except UnicodeDecodeError:
        loose = data.decode("latin-1")
        if _safe(loose) != loose:
            return None, "a binary file that seems to hold a key or a token"
        return data, ""


def bundle_bytes(client: Client, run_id: str, cap: int = FILE_CAP) -> tuple[BundleInfo, bytes]:
    """The run as a bundle (``.tar.gz`` bytes) and what it holds."""
    doc = read_document(client, run_id)
    run = doc.run
    record = scrub(imports.run_record(client._store.db, run.id))
    members: dict[str, bytes] = {
        "run.jsonl": json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n"
    }
    left_out: list[dict[str, Any]] = []
    for name in doc.written:
        data, why = _file_payload(Path(run.workspace) / name, cap)
        if data is None:
            left_out.append({"path": _safe(name), "why": why})
        else:
            members[f"files/{_safe(name)}"] = data
    title = _safe(run.title or run.goal)
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "app_version": __version__,
        "run_id": run.id,
        "title": title,
        "exported_at": time.time(),
        "files": {n: {"sha256": _sha256(d), "bytes": len(d)} for n, d in members.items()},
        "left_out": left_out,
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        head = ("manifest.json", json.dumps(manifest, indent=1).encode())
        for name, data in [head, *members.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(data))
    carried = tuple(n.removeprefix("files/") for n in members if n.startswith("files/"))
    notes = tuple(f"{x['path']}: {x['why']}" for x in left_out)
    return BundleInfo(run.id, title, carried, notes), buf.getvalue()


def export_to(client: Client, run_id: str, fmt: str, target: Path) -> tuple[Run, int, str]:
    """Write the run as ``fmt`` to ``target``; the run, the bytes written and any note.

    Raises:
        InvalidInputError: an unknown format.
        NotFoundError: no such run.
        OSError: the file cannot be written.
    """
    if fmt not in FORMATS:
        raise InvalidInputError(f"no export format {fmt!r}: use one of {', '.join(FORMATS)}")
    note = ""
    if fmt == "bundle":
        info, data = bundle_bytes(client, run_id)
        run = client.run(info.run_id)
        if info.left_out:
            note = "left out: " + "; ".join(info.left_out)
    else:
        run, text = export(client, run_id, fmt)
        data = text.encode("utf-8")
    tmp = target.with_name(target.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return run, len(data), note


# --------------------------------------------------------------------------- import


@dataclass(frozen=True)
class Imported:
    """A bundle brought in.

    Attributes:
        run_id: the run, now archived here (read-only).
        title: its title or goal.
        status: its status when exported.
        archive: the archive file holding its record.
        files_dir: where its workspace files went.
        files: how many files were brought.
    """

    run_id: str
    title: str
    status: str
    archive: Path
    files_dir: Path
    files: int = 0
    left_out: list[str] = field(default_factory=list)


def _not_a_bundle(path: Path, why: str) -> InvalidInputError:
    return InvalidInputError(f"{path} is not a desktop-agent bundle ({why}); nothing imported")


@dataclass(frozen=True)
class BundleLimits:
    """How much a bundle may hold when read; a larger one is refused before it is read whole.

    Attributes:
        member_bytes: the most bytes of one member (the manifest, the record, one file).
        total_bytes: the most bytes of all members together.
        ratio: the most the bundle may grow when unpacked (unpacked over packed bytes),
            checked once it unpacks to more than ``ratio_floor`` bytes.
        ratio_floor: unpacked bytes below which any ratio is accepted.
        members: the most members.
    """

    member_bytes: int = 64 * 1024 * 1024
    total_bytes: int = 256 * 1024 * 1024
    ratio: int = 100
    ratio_floor: int = 8 * 1024 * 1024
    members: int = 10_000

    def describe(self) -> str:
        """The limits in words, for the refusals."""
        return (
            f"a bundle holds at most {_mib(self.member_bytes)} per file, "
            f"{_mib(self.total_bytes)} in all and {self.members:,} files, and unpacks to at "
            f"most {self.ratio}× its size"
        )


def _mib(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n:,} bytes"
    return f"{n / (1024 * 1024):g} MiB"


LIMITS = BundleLimits()


class _TooBigError(Exception):
    """The bundle unpacks to more than its limits allow (the reason in words)."""


class _Capped(io.RawIOBase):
    """The unpacked stream of a bundle, refusing to give more than its limits allow."""

    def __init__(self, raw: Any, packed: int, limits: BundleLimits) -> None:
        self._raw = raw
        self._packed = max(packed, 1)
        self._limits = limits
        self._cap = limits.total_bytes + limits.members * 1024 + 1024 * 1024
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        data = self._raw.read(len(view))
        n = len(data)
        view[:n] = data
        self.count += n
        if self.count > self._cap:
            raise _TooBigError(f"it unpacks to more than {_mib(self._limits.total_bytes)}")
        floor = self._limits.ratio_floor
        if self.count > floor and self.count > self._limits.ratio * self._packed:
            raise _TooBigError(
                f"it unpacks to more than {self._limits.ratio}× its "
                f"{self._packed:,} bytes (a compression bomb?)"
            )
        return n


_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10))}
_RESERVED |= {f"lpt{i}" for i in range(10)}
_TOP = ("manifest.json", "run.jsonl")
_PLAIN = (tarfile.REGTYPE, tarfile.AREGTYPE)


def _name_problem(name: str) -> str | None:
    """Why a member name is not a plain relative path under ``files/`` (or a top file)."""
    if name in _TOP:
        return None
    if any(not c.isprintable() for c in name):
        return "holds control characters"
    if name.startswith(("/", "\\")):
        return "is an absolute path"
    parts = name.replace("\\", "/").split("/")
    if parts[0] != "files" or len(parts) < 2:
        return "is outside its files folder"
    if re.match(r"[A-Za-z]:", parts[1]) or any(":" in p for p in parts):
        return "names a drive or a stream (a colon in it)"
    return _parts_problem(name, parts[1:])


def _parts_problem(name: str, parts: Sequence[str]) -> str | None:
    """Why the parts of a name under ``files/`` are not plain names of files and folders."""
    for part in parts:
        if part in ("", ".", ".."):
            what = "an empty part: what follows // is absolute" if not part else f"a {part!r} part"
            return f"is outside its files folder ({what})"
    if "\\" in name:
        return "uses backslashes (a Windows path)"
    for part in parts:
        if part.rstrip(". ") != part or part.split(".")[0].lower() in _RESERVED:
            return f"has a part ({part!r}) no folder can hold on Windows"
        if len(part.encode("utf-8")) > 255:
            return "has a part longer than 255 bytes"
    if len(name.encode("utf-8")) > 1024:
        return "is longer than 1,024 bytes"
    return None


def _folded(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _check_names(path: Path, names: Sequence[str]) -> None:
    """Refuse names twice (in any case), or a file and a folder of one name."""
    seen: dict[str, str] = {}
    for name in names:
        key = _folded(name)
        if key in seen:
            raise _not_a_bundle(path, f"{name!r} is in it twice (as {seen[key]!r})")
        seen[key] = name
    for name in names:
        parts = _folded(name).split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in seen:
                raise _not_a_bundle(
                    path, f"{seen[folder]!r} is both a file and the folder of {name!r}"
                )


def _members(path: Path, limits: BundleLimits) -> dict[str, bytes]:
    """Every member of the bundle, each name and type checked, within ``limits``."""
    members: dict[str, bytes] = {}
    total = 0
    with path.open("rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        capped = _Capped(gz, path.stat().st_size, limits)
        with tarfile.open(fileobj=io.BufferedReader(capped), mode="r|") as tar:
            for m in tar:
                if m.type not in _PLAIN:
                    kind = _KINDS.get(m.type, "not a plain file")
                    raise _not_a_bundle(path, f"{m.name!r} is {kind}")
                why = _name_problem(m.name)
                if why is not None:
                    raise _not_a_bundle(path, f"{m.name!r} {why}")
                if m.name in members:
                    raise _not_a_bundle(path, f"{m.name!r} is in it twice")
                total += m.size
                if len(members) >= limits.members:
                    raise _TooBigError(f"it holds more than {limits.members:,} files")
                if m.size > limits.member_bytes:
                    raise _TooBigError(f"{m.name!r} is {m.size:,} bytes")
                if total > limits.total_bytes:
                    raise _TooBigError(f"its files come to more than {total:,} bytes")
                f = tar.extractfile(m)
                assert f is not None
                data = _read_exactly(f, m.size)
                if len(data) != m.size:
                    raise _not_a_bundle(path, f"{m.name!r} is cut short")
                members[m.name] = data
    return members


def _read_exactly(f: Any, size: int) -> bytes:
    """Up to ``size`` bytes of ``f``, read a mebibyte at a time (never one huge buffer)."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = f.read(min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a device file",
    tarfile.BLKTYPE: "a device file",
    tarfile.FIFOTYPE: "a named pipe",
    tarfile.DIRTYPE: "a folder entry (a bundle holds plain files only)",
}


def _read_bundle(
    path: Path, limits: BundleLimits = LIMITS
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and every member, checked against the manifest's checksums."""
    try:
        members = _members(path, limits)
    except _TooBigError as exc:
        raise InvalidInputError(
            f"{path} is refused: {exc}, and {limits.describe()}; nothing imported"
        ) from None
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise InvalidInputError(f"no file {path}") from None
        if isinstance(exc, IsADirectoryError | PermissionError):
            raise InvalidInputError(f"cannot read {path}: {exc.strerror}") from None
        raise _not_a_bundle(path, "not a .tar.gz archive") from None
    try:
        manifest = json.loads(members.pop("manifest.json"))
    except (KeyError, ValueError, RecursionError):
        raise _not_a_bundle(path, "no readable manifest.json") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise _not_a_bundle(path, "its manifest is of another format")
    version = manifest.get("version")
    if not isinstance(version, int) or version > BUNDLE_VERSION:
        raise InvalidInputError(
            f"{path} was made by a newer desktop-agent ({manifest.get('app_version')}, bundle "
            f"format {version}); this one reads format {BUNDLE_VERSION}: update it first; "
            "nothing imported"
        )
    listed = manifest.get("files")
    if not isinstance(listed, dict) or set(listed) != set(members) or "run.jsonl" not in members:
        raise _not_a_bundle(path, "its files do not match its manifest")
    left_out = manifest.get("left_out") or []
    if not isinstance(left_out, list) or not all(isinstance(x, dict) for x in left_out):
        raise _not_a_bundle(path, "its manifest's list of files left out is not a list")
    _check_names(path, list(members))
    for name, data in members.items():
        entry = listed[name]
        if not isinstance(entry, dict) or _sha256(data) != entry.get("sha256"):
            raise InvalidInputError(
                f"{path} is damaged: {name} does not match its checksum; nothing imported"
            )
    return manifest, members


def _record_of(path: Path, data: bytes) -> dict[str, Any]:
    """The run record a bundle's ``run.jsonl`` holds, its shape checked."""
    try:
        record = json.loads(data.decode("utf-8"))
        run_id = str(record["run"]["id"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise _not_a_bundle(path, "its run.jsonl is not a run record") from None
    if (
        not isinstance(record, dict)
        or not isinstance(record["run"], dict)
        or record.get("format") != ARCHIVE_FORMAT
        or not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", run_id)
    ):
        raise _not_a_bundle(path, "its run.jsonl is not a run record")
    foreign = imports.foreign_row(record)
    if foreign is not None:
        raise _not_a_bundle(path, f"its run.jsonl is not one run's record: {foreign}")
    return record


def _write_files(staging: Path, members: dict[str, bytes]) -> None:
    """Write the bundle's files under ``staging``, never following a link or replacing."""
    root = staging.resolve()
    for name, data in members.items():
        target = staging / name.removeprefix("files/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(root):
            raise InvalidInputError(
                f"{name!r} leads outside the folder it is unpacked into; nothing imported"
            )
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)


def _made(path: Path) -> list[Path]:
    """The folders from ``path`` up that do not exist yet (to remove if the import fails)."""
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def import_bundle(client: Client, path: Path, limits: BundleLimits = LIMITS) -> Imported:
    """Bring a bundle into this installation as a read-only archived run.

    The run's record goes into an archive file of its own under ``archives/`` beside the
    database, its files into ``imports/RUN_ID/``, and its text into the search index
    (marked archived). It never enters the journal, so no worker here can claim it.

    The whole bundle is read and checked first (within ``limits``; every name a plain
    relative path under ``files/``, plain files only, each once, each matching the
    manifest's checksum); its files are unpacked into a staging folder inside the data
    folder and moved into place only when everything else succeeded.

    Raises:
        InvalidInputError: not a bundle, a newer format, a damaged file, a name or a kind
            of member a bundle never holds, more than ``limits`` allow, or a run (or an
            approval id) this installation already has; nothing is written then.
    """
    manifest, members = _read_bundle(path, limits)
    record = _record_of(path, members.pop("run.jsonl"))
    run_id = str(record["run"]["id"])
    data_dir = client.db_path.parent
    archives = data_dir / "archives"
    known = imports.where_known(client._store.db, archives, run_id)
    if known is not None:
        where = "in this database" if known == "database" else "among the archived runs"
        raise InvalidInputError(f"run {run_id} is already here ({where}); nothing imported")
    clashes = imports.clashing_ids(client._store.db, record)
    if clashes:
        approval, other = clashes[0]
        raise InvalidInputError(
            f"run {run_id} is already here in part: its approval {approval} has the id of "
            f"run {other}'s approval in this database ({len(clashes)} such id(s)); nothing "
            "imported: the bundle was made from another copy of this database"
        )
    files_dir = data_dir / "imports" / run_id
    archive = archives / f"runs-imported-{run_id}.jsonl.gz"
    for there in (files_dir, archive):
        if there.exists():
            raise InvalidInputError(
                f"{there} exists but no run {run_id} is here: move it away, then import "
                "again; nothing imported"
            )
    created = _made(files_dir.parent) + _made(archives)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=data_dir))
    moved = written = False
    try:
        _write_files(staging / "files", members)
        (staging / "files").mkdir(exist_ok=True)
        record["run"]["workspace"] = str(files_dir)
        record["imported"] = {
            "from": path.name,
            "at": time.time(),
            "app_version": manifest.get("app_version"),
            "exported_at": manifest.get("exported_at"),
        }
        files_dir.parent.mkdir(parents=True, exist_ok=True)
        (staging / "files").rename(files_dir)
        moved = True
        written = True
        imports.write_record(archive, record)
        imports.index_archived(client._store.db, record)
    except BaseException as exc:
        if moved:
            shutil.rmtree(files_dir, ignore_errors=True)
        if written:
            with contextlib.suppress(OSError):
                archive.unlink()
        for folder in created:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):
            raise InvalidInputError(
                f"cannot unpack {path} into {data_dir}: {exc.strerror or exc}; nothing imported"
            ) from None
        if isinstance(exc, ValueError | TypeError | KeyError | AttributeError):
            raise _not_a_bundle(path, f"its run.jsonl cannot be read as a run ({exc})") from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    left = [f"{x.get('path')}: {x.get('why')}" for x in manifest.get("left_out") or []]
    run = record["run"]
    return Imported(
        run_id,
        str(run.get("title") or run.get("goal") or ""),
        str(run.get("status", "")),
        archive,
        files_dir,
        len(members),
        left,
    )
