"""A report as HTML, the same for the app (Qt's rich text) and the HTML export.

Its Markdown rendered, its references numbered and linked, its uncited claims marked.

Only what Qt's rich text and every browser take: headings, paragraphs, lists, quotes,
tables, code, bold, italics, inline code. Everything is escaped first, so the report's
text never becomes markup; a link keeps its text and shows its address after it (an
exported page fetches and opens nothing by itself). An uncited claim is a
``<span class="uncited">`` (the caller's style sheet tints it); each cited sentence is
followed by its ``[n]`` references, links made by the caller's ``ref_href``; the list of
references ends the fragment, each naming its source step through ``step_href``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from desktop_agent.client.report import Block, BlockKind, Report, Sentence

Href = Callable[[int], str]
Scrub = Callable[[str], str]

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?!\*)|(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)[^)]*\)")
UNCITED_TITLE = "no citation supports this sentence"


def inline(text: str) -> str:
    """One line of Markdown as escaped HTML with its inline marks."""
    codes: list[str] = []

    def keep(m: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE.sub(keep, text)
    text = _LINK.sub(lambda m: m.group(1) + (f" ({m.group(2)})" if m.group(2) else ""), text)
    out = html.escape(text, quote=False)
    out = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", out)
    out = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", out)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], out)


class Renderer:
    """Renders one report.

    Args:
        ref_href: the link of reference ``n`` (``#ref-3``, ``ref:3``).
        step_href: the link of step ``seq`` (``#step-12``, ``step:12``).
        scrub: applied to every text before it is escaped (the export's redaction).
        heading_shift: added to each heading's level (a report inside a page's section).
    """

    def __init__(
        self, ref_href: Href, step_href: Href, scrub: Scrub = str, heading_shift: int = 0
    ) -> None:
        self.ref_href, self.step_href = ref_href, step_href
        self.scrub, self.shift = scrub, heading_shift

    def sentence(self, s: Sentence) -> str:
        """A sentence with its references (or its mark, uncited)."""
        body = inline(self.scrub(s.text))
        if not s.claim:
            return body
        if s.refs:
            refs = "".join(
                f"<a class='ref' href='{html.escape(self.ref_href(n))}'>[{n}]</a>" for n in s.refs
            )
            return f"{body} {refs}"
        return f"<span class='uncited' title='{UNCITED_TITLE}'>{body}</span>"

    def _sentences(self, block: Block) -> str:
        return " ".join(self.sentence(s) for s in block.sentences)

    def _row(self, block: Block, report: Report) -> str:
        s = block.sentences[0]
        cells = [c.strip() for c in report.markdown[s.start : s.end].split("|")]
        tail = self.sentence(Sentence(s.end, s.end, "", s.refs, s.claim)) if s.refs else ""
        rendered = [inline(self.scrub(c)) for c in cells]
        if rendered:
            rendered[-1] += f" {tail}" if tail else ""
        klass = " class='uncited'" if s.uncited else ""
        return f"<tr{klass}>" + "".join(f"<td>{c}</td>" for c in rendered) + "</tr>"

    def _block(self, block: Block, report: Report) -> str:
        """A block other than a list item or a table row."""
        if block.kind == BlockKind.HEADING:
            level = min(6, block.level + self.shift)
            return f"<h{level}>{self._sentences(block)}</h{level}>"
        if block.kind == BlockKind.QUOTE:
            return f"<blockquote>{self._sentences(block)}</blockquote>"
        if block.kind == BlockKind.CODE:
            s = block.sentences[0]
            return f"<pre>{html.escape(self.scrub(report.markdown[s.start : s.end]))}</pre>"
        if block.kind == BlockKind.RULE:
            return "<hr/>"
        return f"<p>{self._sentences(block)}</p>"

    def _item(self, block: Block, lists: list[str], out: list[str]) -> None:
        """A list item, opening or closing lists to reach its depth."""
        tag = "ol" if block.marker[:1].isdigit() else "ul"
        while len(lists) > block.level + 1:
            out.append(f"</{lists.pop()}>")
        while len(lists) < block.level + 1:
            lists.append(tag)
            out.append(f"<{tag}>")
        ticked = {"[x]": "☑ ", "[X]": "☑ ", "[ ]": "☐ "}.get(block.marker.partition(" ")[2], "")
        out.append(f"<li>{ticked}{self._sentences(block)}</li>")

    def body(self, report: Report) -> str:
        """The report's blocks as HTML."""
        out: list[str] = []
        lists: list[str] = []  # the open lists, innermost last
        rows: list[str] = []
        for block in (*report.blocks, None):
            kind = block.kind if block is not None else None
            if kind != BlockKind.ROW and rows:
                out.append("<table class='report-table'>" + "".join(rows) + "</table>")
                rows.clear()
            if kind != BlockKind.ITEM:
                out += [f"</{tag}>" for tag in reversed(lists)]
                lists.clear()
            if block is None:
                break
            if kind == BlockKind.ROW:
                rows.append(self._row(block, report))
            elif kind == BlockKind.ITEM:
                self._item(block, lists, out)
            else:
                out.append(self._block(block, report))
        return "".join(out)

    def references(self, report: Report) -> str:
        """The numbered list of references, and the legend of the uncited mark."""
        items = []
        for r in report.references:
            name = html.escape(self.scrub(r.path or r.title or "a document"))
            where = f", {html.escape(r.where)}" if r.where else ""
            passage = " ".join(self.scrub(r.passage).split())
            quoted = f": “{html.escape(passage)}”" if passage else ""
            read = (
                f"read at <a href='{html.escape(self.step_href(r.source_seq))}'>step "
                f"{r.source_seq}</a>; "
                if r.source_seq is not None
                else ""
            )
            to_step = html.escape(self.step_href(r.cited_seq))
            cited = f"cited at <a href='{to_step}'>step {r.cited_seq}</a>"
            to_ref = html.escape(self.ref_href(r.number))
            items.append(
                f"<p id='ref-{r.number}'><a class='ref' href='{to_ref}'>[{r.number}]</a> "
                f"<b>{name}</b>{where}{quoted} ({read}{cited})</p>"
            )
        # Paragraphs, not a list: the [n] is the number (a list would number them twice).
        refs = f"<div class='refs'>{''.join(items)}</div>" if items else ""
        uncited = len(report.uncited)
        legend = (
            f"<p class='legend'><span class='uncited'>Tinted</span> sentences "
            f"({uncited} of {len(report.claims)}) rest on no citation.</p>"
            if uncited
            else ""
        )
        return refs + legend

    def fragment(self, report: Report) -> str:
        """The report, then its references."""
        return self.body(report) + self.references(report)
