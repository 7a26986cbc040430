"""The sources a model call's answer cites, as the inspector shows them in the step.

Each citation is resolved by :func:`desktop_agent.client.report.cited_answer` (the
report's own resolution: file, page or character range, passage, the step that read the
document). The answer is shown whole, ``[n]`` after each cited piece, and the sources are
listed under it. Every ``[n]`` and entry is a link ``source:SEQ``; the inspector turns a
click on it into a request for that step (:func:`source_seq`), which the window selects
in the timeline.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import QUrl
from PySide6.QtGui import QPalette

from desktop_agent.client.report import CitedAnswer, Reference, sources_of

SOURCE = "source"
"""The scheme of an entry's link: ``source:12`` selects step 12."""
PASSAGE_CHARS = 240
"""Characters of a cited passage shown (the Raw JSON tab has all of it)."""


def clipped(passage: str, limit: int = PASSAGE_CHARS) -> str:
    """``passage`` on one line, cut at a word with ``…`` when longer than ``limit``."""
    text = " ".join(passage.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:.") + "…"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _entry(ref: Reference, muted: str, text: str) -> str:
    name = html.escape(ref.path or ref.title or "a document")
    where = f" · {html.escape(ref.where)}" if ref.where else ""
    passage = clipped(ref.passage)
    if ref.source_seq is None:
        head = f"<b>{name}</b>{where} <span style='color:{muted}'>· read at no known step</span>"
        quote = f"<i>“{html.escape(passage)}”</i>" if passage else ""
    else:
        href = f"{SOURCE}:{ref.source_seq}"
        head = (
            f"<a href='{href}'><b>{name}</b>{where}</a> "
            f"<span style='color:{muted}'>· read at step {ref.source_seq}</span>"
        )
        quote = (
            f"<a href='{href}' style='text-decoration:none; color:{text}'>"
            f"<i>“{html.escape(passage)}”</i></a>"
            if passage
            else ""
        )
    body = head + (f"<br/>{quote}" if quote else "")
    return (
        f"<tr><td valign='top' style='padding-right:6px; color:{muted}'>[{ref.number}]</td>"
        f"<td style='padding-bottom:6px'>{body}</td></tr>"
    )


def _marks(numbers: Sequence[int], references: Sequence[Reference]) -> str:
    out = []
    for n in numbers:
        ref = references[n - 1]
        mark = f"[{n}]"
        if ref.source_seq is not None:
            mark = f"<a href='{SOURCE}:{ref.source_seq}'>{mark}</a>"
        out.append(mark)
    return "".join(out)


def answer_html(answer: CitedAnswer, limit: int) -> str:
    """The answer's text, ``[n]`` after each cited piece, as a block of text.

    The pieces are joined as the model wrote them (the API cuts the answer at its
    citations, mid-sentence); past ``limit`` characters the rest is left out.
    """
    parts: list[str] = []
    left = limit
    for text, numbers in answer.pieces:
        shown = text[: max(0, left)]
        left -= len(shown)
        if shown:
            parts.append(html.escape(shown) + _marks(numbers, answer.references))
    more = sum(len(text) for text, _ in answer.pieces) - limit
    body = "".join(parts).strip()
    if more > 0:
        body += f"\n… ({more:,} more characters in Raw JSON)"
    return f"<pre style='white-space: pre-wrap; margin: 2px 0 8px 0'>{body}</pre>"


def citations_html(references: Sequence[Reference], palette: QPalette) -> str:
    """The step's citations as a section of its details ("" when it cites nothing)."""
    if not references:
        return ""
    muted = palette.color(QPalette.ColorRole.PlaceholderText).name()
    text = palette.color(QPalette.ColorRole.Text).name()
    files = sources_of(references)
    title = f"Sources cited: {_count(len(files), 'source')}, {_count(len(references), 'passage')}"
    rows = "".join(_entry(r, muted, text) for r in references)
    hint = (
        f"<p style='margin:0 0 4px 0; color:{muted}'>Click an entry to open the step that "
        "read the source.</p>"
    )
    return (
        f"<h4 style='margin: 10px 0 2px 0'>{html.escape(title)}</h4>{hint}"
        f"<table cellspacing='0' cellpadding='1'>{rows}</table>"
    )


def source_seq(url: QUrl) -> int | None:
    """The step an entry's link asks for (None: not an entry's link)."""
    if url.scheme() != SOURCE:
        return None
    path = url.path()
    return int(path) if path.isdigit() else None
