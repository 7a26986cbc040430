"""A run's final report as a first-class result: text, references, cited sentences.

Its Markdown text, its numbered references, and which of its sentences rest on a citation.

**Which text is the report.** Read from the journal alone (what the run wrote, not what
the workspace holds now), the first of:

1. the last completed ``write_file`` whose file is named like a report: a ``.md``,
   ``.markdown`` or ``.txt`` file whose name (without its suffix) contains ``report``
   (``report.md``, ``final-report.md``);
2. the last partial report (a ``report`` step: a stopped or cancelled run's);
3. the model's last answer: the text of the last completed model call that has any.

**Citations.** A model step's output holds the API's ``content`` blocks; a text block may
carry ``citations`` (``page_location``, ``char_location`` or ``content_block_location``),
each naming a document by ``document_index``. The step's ``documents`` (in
``document_index`` order: ``{seq, path, title, media_type, file_id}``, ``seq`` the step
that read the file) resolve it to a file and its source step; without them the citation
keeps its ``document_title`` and points at the model step that cited it.

**Which sentences are cited.** The report is cut into Markdown blocks (headings, code,
rules, paragraphs, list items, quotes, table rows) and the prose blocks into sentences
(after ``.``, ``!`` or ``?`` and a space before a capital, a digit, a quote or a bracket;
common abbreviations such as "e.g." do not end one). Headings, code and rules are not
claims and are never marked. A claim sentence is cited:

* when the report is the model's last answer, if its characters overlap a text block that
  carries citations (the API cuts the answer into blocks at its citations);
* when the report is a file, if it *matches* a cited text block of any of the run's model
  answers: compared word by word (case, punctuation, Markdown marks, ``[n]`` markers and
  whitespace ignored), the sentence contains one of the block's sentences of three words
  or more, or the sentence has three words or more and the block's text contains it. The
  sentence then rests on every citation of that block.

Any other claim is *uncited*: shown with :data:`UNCITED` in text, tinted in the app and the
HTML export. References are numbered in the order the report first cites them; one
reference per distinct (source step, file, location, passage).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

from desktop_agent.client.api import Client
from desktop_agent.client.views import StepEntry, timeline_entries
from desktop_agent.domain import StepKind, StepStatus

UNCITED = "[?]"
"""What marks, in text, a claim no citation supports."""
REPORT_CHARS = 200_000
"""The most characters of a report kept (the rest is cut, and ``truncated`` says so)."""
MIN_WORDS = 3
"""The fewest words a matched piece has (shorter ones match too much by chance)."""
REPORT_SUFFIXES = (".md", ".markdown", ".txt")


class Origin(StrEnum):
    """Where a report comes from."""

    FILE = "file"
    """A file the run wrote with ``write_file``."""
    PARTIAL = "partial"
    """The partial report of a stopped or cancelled run."""
    ANSWER = "answer"
    """The model's last answer."""


class BlockKind(StrEnum):
    """A Markdown block of the report."""

    HEADING = "heading"
    PARAGRAPH = "paragraph"
    ITEM = "item"
    QUOTE = "quote"
    ROW = "row"
    CODE = "code"
    RULE = "rule"

    @property
    def is_claim(self) -> bool:
        """Whether its sentences say something a source should support."""
        return self in (BlockKind.PARAGRAPH, BlockKind.ITEM, BlockKind.QUOTE, BlockKind.ROW)


@dataclass(frozen=True)
class Reference:
    """One numbered source of the report.

    Attributes:
        number: its number, from 1, in the order the report first cites it.
        path: the file (or URL) cited, else the document's title.
        title: the document's title as the model saw it.
        passage: the cited text.
        source_seq: the step that read the document (None: not known).
        cited_seq: the model step whose answer cited it.
        pages: first and last page cited (1-based, inclusive), for a PDF.
        chars: start and end character cited (end excluded), for a text file.
        blocks: first and last content block cited (end excluded), for other documents.
    """

    number: int
    path: str
    title: str
    passage: str
    source_seq: int | None
    cited_seq: int
    pages: tuple[int, int] | None = None
    chars: tuple[int, int] | None = None
    blocks: tuple[int, int] | None = None

    @property
    def step(self) -> int:
        """The step a click on the reference shows: the source's, else the citing one."""
        return self.source_seq if self.source_seq is not None else self.cited_seq

    @property
    def where(self) -> str:
        """The location in words: ``p. 3``, ``pp. 3–4``, ``chars 120–245``, or ``""``."""
        if self.pages is not None:
            first, last = self.pages
            return f"p. {first}" if first == last else f"pp. {first}–{last}"
        if self.chars is not None:
            return f"chars {self.chars[0]}–{self.chars[1]}"
        if self.blocks is not None:
            return f"blocks {self.blocks[0]}–{self.blocks[1]}"
        return ""

    def line(self) -> str:
        """The reference in one line, without its number."""
        name = self.path or self.title or "a document"
        where = f", {self.where}" if self.where else ""
        passage = " ".join(self.passage.split())
        quoted = f": “{passage}”" if passage else ""
        read = f"read at step {self.source_seq}; " if self.source_seq is not None else ""
        return f"{name}{where}{quoted} ({read}cited at step {self.cited_seq})"


@dataclass(frozen=True)
class Sentence:
    """A sentence of the report.

    Attributes:
        start: its first character in the report's Markdown.
        end: one past its last character.
        text: its Markdown, on one line.
        refs: the numbers of the references it rests on.
        claim: whether it is prose a source should support (not a heading or code).
    """

    start: int
    end: int
    text: str
    refs: tuple[int, ...] = ()
    claim: bool = True

    @property
    def uncited(self) -> bool:
        """A claim that rests on no citation."""
        return self.claim and not self.refs


@dataclass(frozen=True)
class Block:
    """A Markdown block of the report and its sentences.

    Attributes:
        kind: what it is.
        sentences: its sentences (one for a heading, a row or a code block).
        level: a heading's level (1-6); a list item's depth (0: top).
        marker: a list item's marker (``-``, ``1.``), a task item's box (``[x]``) after it.
    """

    kind: BlockKind
    sentences: tuple[Sentence, ...]
    level: int = 0
    marker: str = ""


@dataclass(frozen=True)
class Report:
    """A run's final report.

    Attributes:
        origin: where it comes from.
        path: the file it is (empty for an answer).
        seq: the step that wrote it (the write, the partial report, the answer).
        markdown: its text.
        blocks: its Markdown blocks, in order.
        references: its numbered references.
        truncated: the text was longer than :data:`REPORT_CHARS` and was cut.
    """

    origin: Origin
    path: str
    seq: int
    markdown: str
    blocks: tuple[Block, ...]
    references: tuple[Reference, ...]
    truncated: bool = False

    @property
    def sentences(self) -> list[Sentence]:
        """Every sentence, in order."""
        return [s for b in self.blocks for s in b.sentences]

    @property
    def claims(self) -> list[Sentence]:
        """Every sentence that is a claim."""
        return [s for s in self.sentences if s.claim]

    @property
    def uncited(self) -> list[Sentence]:
        """The claims no citation supports."""
        return [s for s in self.sentences if s.uncited]

    def reference(self, number: int) -> Reference | None:
        """Reference ``number``, if there is one."""
        return next((r for r in self.references if r.number == number), None)

    def source_words(self) -> str:
        """Where it comes from, in words: ``report.md, written at step 12``."""
        if self.origin == Origin.FILE:
            return f"{self.path}, written at step {self.seq}"
        if self.origin == Origin.PARTIAL:
            return f"partial report {self.path}, written at step {self.seq}".replace("  ", " ")
        return f"the model's last answer, step {self.seq}"

    def coverage_words(self) -> str:
        """How much of it is cited: ``5 of 7 sentences cited``."""
        claims = len(self.claims)
        cited = claims - len(self.uncited)
        return f"{cited} of {claims} sentence{'s' if claims != 1 else ''} cited"

    def annotated(self) -> str:
        """Its Markdown, ``[n]`` after each cited sentence, :data:`UNCITED` after the others."""
        parts: list[str] = []
        at = 0
        for s in self.sentences:
            if not s.claim:
                continue
            mark = "".join(f"[{n}]" for n in s.refs) if s.refs else UNCITED
            parts += [self.markdown[at : s.end], " " + mark]
            at = s.end
        parts.append(self.markdown[at:])
        return "".join(parts)

    def reference_lines(self) -> list[str]:
        """The reference list, one ``[n] …`` line each, and the legend of :data:`UNCITED`."""
        lines = [f"[{r.number}] {r.line()}" for r in self.references]
        if self.uncited:
            lines.append(f"{UNCITED} a sentence no citation supports ({len(self.uncited)})")
        return lines


# --------------------------------------------------------------------------- choosing the text


def is_report_path(path: str) -> bool:
    """Whether a written file is named like a report (see the module's docstring)."""
    p = PurePosixPath(path.replace("\\", "/"))
    return p.suffix.lower() in REPORT_SUFFIXES and "report" in p.stem.lower()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _parsed(entry: StepEntry, output: bool) -> dict[str, Any]:
    try:
        return _dict(entry.output() if output else entry.input())
    except ValueError:
        return {}


def _text_blocks(output: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = output.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _answers(steps: Sequence[StepEntry]) -> list[tuple[StepEntry, dict[str, Any]]]:
    """The completed model calls and their outputs, in order."""
    return [
        (e, _parsed(e, True))
        for e in steps
        if e.kind == StepKind.MODEL_CALL and e.status == StepStatus.COMPLETED
    ]


def _chosen(
    steps: Sequence[StepEntry],
) -> tuple[Origin, str, StepEntry, str] | None:
    """The report's origin, path, step and text (see the module's docstring)."""
    for e in reversed(steps):
        if e.kind != StepKind.TOOL_CALL or e.name != "write_file":
            continue
        if e.status != StepStatus.COMPLETED:
            continue
        args = _dict(_parsed(e, False).get("arguments"))
        path, content = args.get("path"), args.get("content")
        if isinstance(path, str) and isinstance(content, str) and is_report_path(path):
            return Origin.FILE, path, e, content
    for e in reversed(steps):
        if e.kind == StepKind.REPORT and e.status == StepStatus.COMPLETED:
            out = _parsed(e, True)
            text = out.get("report")
            if isinstance(text, str) and text.strip():
                return Origin.PARTIAL, str(out.get("path") or ""), e, text
    for e, out in reversed(_answers(steps)):
        text = "".join(str(b.get("text") or "") for b in _text_blocks(out))
        if text.strip():
            return Origin.ANSWER, "", e, text
    return None


# --------------------------------------------------------------------------- citations


def _documents(output: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The documents of a model step, in ``document_index`` order."""
    docs = output.get("documents")
    if not isinstance(docs, list):
        docs = _dict(output.get("api")).get("documents")
    return [_dict(d) for d in docs] if isinstance(docs, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _span(c: Mapping[str, Any], start: str, end: str) -> tuple[int, int] | None:
    a, b = _int(c.get(start)), _int(c.get(end))
    return (a, b) if a is not None and b is not None else None


@dataclass(frozen=True)
class _Cite:
    """A citation resolved, before it is numbered."""

    path: str
    title: str
    passage: str
    source_seq: int | None
    cited_seq: int
    pages: tuple[int, int] | None
    chars: tuple[int, int] | None
    blocks: tuple[int, int] | None


def resolve(
    citation: Mapping[str, Any], documents: Sequence[Mapping[str, Any]], cited_seq: int
) -> _Cite:
    """A citation of model step ``cited_seq`` resolved to its file, location and source step."""
    index = _int(citation.get("document_index"))
    doc: Mapping[str, Any] = {}
    if index is not None and 0 <= index < len(documents):
        doc = documents[index]
    title = str(doc.get("title") or citation.get("document_title") or "")
    kind = citation.get("type")
    pages = chars = blocks = None
    if kind == "page_location":
        found = _span(citation, "start_page_number", "end_page_number")
        if found is not None:  # the API's end page is exclusive
            pages = (found[0], max(found[0], found[1] - 1))
    elif kind == "char_location":
        chars = _span(citation, "start_char_index", "end_char_index")
    elif kind == "content_block_location":
        blocks = _span(citation, "start_block_index", "end_block_index")
    return _Cite(
        path=str(doc.get("path") or title),
        title=title,
        passage=str(citation.get("cited_text") or ""),
        source_seq=_int(doc.get("seq")),
        cited_seq=cited_seq,
        pages=pages,
        chars=chars,
        blocks=blocks,
    )


def _block_cites(
    block: Mapping[str, Any], docs: Sequence[Mapping[str, Any]], seq: int
) -> list[_Cite]:
    found = block.get("citations")
    if not isinstance(found, list):
        return []
    return [resolve(c, docs, seq) for c in found if isinstance(c, dict)]


class _Numbering:
    """Numbers references in the order they are first cited."""

    def __init__(self) -> None:
        self.numbers: dict[_Cite, int] = {}

    def number(self, cites: Iterable[_Cite]) -> tuple[int, ...]:
        out: list[int] = []
        for c in cites:
            n = self.numbers.setdefault(c, len(self.numbers) + 1)
            if n not in out:
                out.append(n)
        return tuple(out)

    def references(self) -> tuple[Reference, ...]:
        return tuple(
            Reference(n, **dataclasses.asdict(c))
            for c, n in sorted(self.numbers.items(), key=lambda item: item[1])
        )


@dataclass(frozen=True)
class CitedAnswer:
    """A model step's answer with its citations resolved.

    Attributes:
        pieces: its text blocks in order, each with the numbers of the references it
            rests on (the API cuts an answer into blocks at its citations).
        references: its references, numbered from 1 in the order the answer cites them,
            one per distinct (source step, file, location, passage), as the report's are.
    """

    pieces: tuple[tuple[str, tuple[int, ...]], ...]
    references: tuple[Reference, ...]


def cited_answer(output: Any, seq: int) -> CitedAnswer:
    """The answer of model step ``seq`` (its parsed ``output``) with its citations resolved."""
    out = _dict(output)
    docs = _documents(out)
    numbering = _Numbering()
    pieces = tuple(
        (str(block.get("text") or ""), numbering.number(_block_cites(block, docs, seq)))
        for block in _text_blocks(out)
    )
    return CitedAnswer(pieces, numbering.references())


def step_references(output: Any, seq: int) -> tuple[Reference, ...]:
    """The citations of model step ``seq``'s answer, resolved (empty: it cites nothing)."""
    return cited_answer(output, seq).references


def entry_references(entry: StepEntry) -> tuple[Reference, ...]:
    """:func:`step_references` of a timeline entry (empty unless it is a model call).

    Its output is parsed only when its text names ``citations``, so a long run's steps
    cost a substring search each.
    """
    text = entry.output_json
    if entry.kind != StepKind.MODEL_CALL or not text or '"citations"' not in text:
        return ()
    return step_references(_parsed(entry, True), entry.seq)


def sources_of(references: Iterable[Reference]) -> list[str]:
    """The distinct files (or titles) ``references`` cite, in order."""
    return list(dict.fromkeys(r.path or r.title or "a document" for r in references))


# --------------------------------------------------------------------------- Markdown


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(\[[ xX]\]\s+)?")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_ROW = re.compile(r"^\s*\|")
_ROW_RULE = re.compile(r"^\s*\|?[\s:|-]*-[\s:|-]*\|?\s*$")
_ENDING = re.compile(r"[.!?…]+[\"'”’)\]*_`]*(?=\s+[\"'“‘(\[*_`]*[A-Z0-9À-ÖØ-Þ])")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "cf",
        "al",
        "fig",
        "no",
        "p",
        "pp",
        "dr",
        "mr",
        "mrs",
        "ms",
        "st",
        "jr",
        "sr",
        "approx",
        "ca",
        "inc",
        "ltd",
        "co",
    ]
)


@dataclass
class _Raw:
    """A block as parsed: its kind, content span, level and marker."""

    kind: BlockKind
    start: int
    end: int
    level: int = 0
    marker: str = ""


def _lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    at = 0
    for line in text.splitlines(keepends=True):
        out.append((at, line.rstrip("\r\n")))
        at += len(line)
    return out


def _row(at: int, line: str) -> _Raw | None:
    """A table row's block (its cells, between the outer bars), or None for a rule row."""
    if _ROW_RULE.match(line):
        return None
    inner = line.strip()
    first = line.index("|") + 1
    last = line.rindex("|") if inner.endswith("|") and len(inner) > 1 else len(line)
    cell = line[first : max(first, last)]
    lead = len(cell) - len(cell.lstrip())
    return _Raw(BlockKind.ROW, at + first + lead, at + first + len(cell.rstrip()))


def _line_block(at: int, line: str, open_: _Raw | None) -> tuple[_Raw | None, _Raw | None]:
    """What a line outside code starts: (a new block, the block that may go on)."""
    end = at + len(line)
    if (heading := _HEADING.match(line)) is not None:
        level = len(heading.group(1))
        return _Raw(BlockKind.HEADING, at + heading.start(2), at + heading.end(2), level), None
    if _RULE.match(line) and not (open_ and open_.kind == BlockKind.PARAGRAPH):
        return _Raw(BlockKind.RULE, at, at), None
    if (item := _ITEM.match(line)) is not None:
        depth = len(item.group(1).expandtabs(4)) // 2
        marker = item.group(2) + (" " + item.group(3).strip() if item.group(3) else "")
        block = _Raw(BlockKind.ITEM, at + item.end(), end, depth, marker)
        return block, block
    if _ROW.match(line):
        return _row(at, line), None
    if (quote := _QUOTE.match(line)) is not None:
        if open_ is not None and open_.kind == BlockKind.QUOTE:
            open_.end = end
            return None, open_
        block = _Raw(BlockKind.QUOTE, at + quote.end(), end)
        return block, block
    if open_ is not None:
        open_.end = end  # a paragraph's, an item's or a quote's next line
        return None, open_
    block = _Raw(BlockKind.PARAGRAPH, at + len(line) - len(line.lstrip()), end)
    return block, block


def parse_blocks(md: str) -> list[_Raw]:
    """The Markdown blocks of ``md`` with the span of their content."""
    blocks: list[_Raw] = []
    open_: _Raw | None = None  # a paragraph, item or quote that may go on
    fence: _Raw | None = None
    for at, line in _lines(md):
        if fence is not None:
            if _FENCE.match(line):
                blocks.append(fence)
                fence = None
            else:
                fence.start = at if fence.start < 0 else fence.start
                fence.end = at + len(line)
        elif _FENCE.match(line):
            open_, fence = None, _Raw(BlockKind.CODE, -1, -1)
        elif not line.strip():
            open_ = None
        else:
            new, open_ = _line_block(at, line, open_)
            if new is not None:
                blocks.append(new)
    if fence is not None:
        blocks.append(fence)
    return [b for b in blocks if b.kind == BlockKind.RULE or (b.start >= 0 and b.end > b.start)]


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*(?:>\s?)?", " ", text).strip()


def split_sentences(md: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of ``md[start:end]`` as spans (see the module's docstring)."""
    text = md[start:end]
    spans: list[tuple[int, int]] = []
    at = 0
    for m in _ENDING.finditer(text):
        word = re.search(r"([\w.]+)$", text[at : m.start()])
        if (
            m.group().startswith(".")
            and word
            and word.group(1).lower().rstrip(".") in _ABBREVIATIONS
        ):
            continue
        spans.append((at, m.end()))
        at = m.end()
        while at < len(text) and text[at].isspace():
            at += 1
    spans.append((at, len(text.rstrip())))
    return [(start + a, start + b) for a, b in spans if b > a and text[a:b].strip()]


# --------------------------------------------------------------------------- matching


_MARKS = re.compile(r"\[(?:\d+|\?)\]|[*_`~]")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def words(text: str) -> list[str]:
    """``text`` as the matching rule compares it: lower-case words, no marks."""
    plain = _MARKS.sub(" ", _LINK.sub(r"\1", unicodedata.normalize("NFKC", text)))
    return re.findall(r"\w+(?:[.,'’]\w+)*%?", plain.casefold())


def _joined(ws: Sequence[str]) -> str:
    return " " + " ".join(ws) + " "


def matches(sentence: str, block_text: str) -> bool:
    """Whether a report sentence rests on a cited text block (the module's rule)."""
    said = words(sentence)
    if not said:
        return False
    haystack = _joined(said)
    for a, b in split_sentences(block_text, 0, len(block_text)):
        piece = words(block_text[a:b])
        if len(piece) >= MIN_WORDS and _joined(piece) in haystack:
            return True
    return len(said) >= MIN_WORDS and haystack in _joined(words(block_text))


# --------------------------------------------------------------------------- building


def _sentence_refs_by_overlap(
    spans: Sequence[tuple[int, int, list[_Cite]]], start: int, end: int, md: str
) -> list[_Cite]:
    cites: list[_Cite] = []
    for a, b, found in spans:
        lo, hi = max(a, start), min(b, end)
        if found and lo < hi and md[lo:hi].strip():
            cites += found
    return cites


def build_report(steps: Sequence[StepEntry]) -> Report | None:
    """The run's report built from its journal (``None``: it has none yet)."""
    chosen = _chosen(steps)
    if chosen is None:
        return None
    origin, path, entry, md = chosen
    truncated = len(md) > REPORT_CHARS
    md = md[:REPORT_CHARS]
    answers = _answers(steps)
    # Answer: the characters of each text block and its citations.
    spans: list[tuple[int, int, list[_Cite]]] = []
    # File: each cited text block of every answer, with its citations.
    cited_blocks: list[tuple[str, list[_Cite]]] = []
    if origin == Origin.ANSWER:
        out = _parsed(entry, True)
        docs, at = _documents(out), 0
        for block in _text_blocks(out):
            text = str(block.get("text") or "")
            spans.append((at, at + len(text), _block_cites(block, docs, entry.seq)))
            at += len(text)
    else:
        for e, out in answers:
            docs = _documents(out)
            for block in _text_blocks(out):
                found = _block_cites(block, docs, e.seq)
                if found:
                    cited_blocks.append((str(block.get("text") or ""), found))
    numbering = _Numbering()
    blocks: list[Block] = []
    for raw in parse_blocks(md):
        claim = raw.kind.is_claim
        if raw.kind in (BlockKind.PARAGRAPH, BlockKind.ITEM, BlockKind.QUOTE):
            pieces = split_sentences(md, raw.start, raw.end)
        else:
            pieces = [(raw.start, raw.end)]
        sentences: list[Sentence] = []
        for a, b in pieces:
            text = _one_line(md[a:b])
            refs: tuple[int, ...] = ()
            if claim:
                if origin == Origin.ANSWER:
                    cites = _sentence_refs_by_overlap(spans, a, b, md)
                else:
                    cites = [c for t, found in cited_blocks if matches(text, t) for c in found]
                refs = numbering.number(cites)
            sentences.append(Sentence(a, b, text, refs, claim))
        blocks.append(Block(raw.kind, tuple(sentences), raw.level, raw.marker))
    return Report(origin, path, entry.seq, md, tuple(blocks), numbering.references(), truncated)


def run_report(client: Client, run_id: str) -> Report | None:
    """The report of ``run_id`` (id or unique prefix), read from its journal.

    Raises:
        NotFoundError: no such run.
    """
    run = client.run(run_id)
    return build_report(timeline_entries(client, run.id))


# --------------------------------------------------------------------------- JSON


def report_json(report: Report | None) -> dict[str, Any] | None:
    """The report as plain data (``show --json`` and ``GET /v1/runs/{id}/report``)."""
    if report is None:
        return None
    return {
        "origin": report.origin.value,
        "path": report.path or None,
        "seq": report.seq,
        "markdown": report.markdown,
        "annotated": report.annotated(),
        "truncated": report.truncated,
        "sentences": [
            {"text": s.text, "claim": s.claim, "refs": list(s.refs), "uncited": s.uncited}
            for s in report.sentences
        ],
        "references": [
            {
                "number": r.number,
                "path": r.path,
                "title": r.title,
                "passage": r.passage,
                "source_seq": r.source_seq,
                "cited_seq": r.cited_seq,
                "pages": list(r.pages) if r.pages else None,
                "chars": list(r.chars) if r.chars else None,
                "blocks": list(r.blocks) if r.blocks else None,
            }
            for r in report.references
        ],
        "cited": len(report.claims) - len(report.uncited),
        "uncited": len(report.uncited),
    }
