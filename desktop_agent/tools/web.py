"""web_fetch: read a web page as text, through a durable per-run cache.

Pages are fetched with HTTP GET (httpx2, a client from :mod:`desktop_agent.http_client`)
with timeouts, a size cap and a bounded number of redirects, each redirect target checked
again like the first URL, and each address a name resolves to tried in turn until one
answers (see :mod:`desktop_agent.tools.net`). HTML becomes readable Markdown through
trafilatura, which keeps the main content and drops navigation, footers and ads, so the
model reads (and pays for) the article rather than the page chrome. PDFs become text with
pypdf, and the PDF itself is kept as a document (``tools/documents.py``) that a model
reading documents with citations gets instead of the text.

Each run keeps what it fetched under ``<workspace>/.cache/web/<run id>/``: asking for the
same URL again in the same run costs nothing, and a step repeated after a crash reads the
same text it read the first time.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from desktop_agent.domain import JSON, EffectClass
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.tools import documents, net
from desktop_agent.tools.base import ToolArgs, TypedTool, result
from desktop_agent.tools.workspace import confine

if TYPE_CHECKING:  # imported where a page is fetched (see tools.net)
    import httpx2

MAX_REDIRECTS = 5
MAX_CHARS = 20_000
CACHE_DIR = ".cache/web"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")


class FetchArgs(ToolArgs):
    """Arguments of web_fetch."""

    url: str = Field(max_length=4000, description="http or https URL of the page")
    offset: int = Field(default=0, ge=0, description="character offset, to read further")
    refresh: bool = Field(default=False, description="fetch again even if cached in this run")


@dataclass(frozen=True)
class Page:
    """A fetched page, as cached."""

    url: str
    final_url: str
    status: int
    content_type: str
    text: str
    truncated: bool
    fetched_at: float
    document: dict[str, JSON] | None = None

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for the cache file."""
        return {
            "document": self.document,
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.content_type,
            "text": self.text,
            "truncated": self.truncated,
            "fetched_at": self.fetched_at,
        }

    @classmethod
    def from_json(cls, data: JSON) -> Page:
        """Inverse of :meth:`to_json`."""
        return cls(
            url=str(data["url"]),
            final_url=str(data["final_url"]),
            status=int(data["status"]),
            content_type=str(data["content_type"]),
            text=str(data["text"]),
            truncated=bool(data["truncated"]),
            fetched_at=float(data["fetched_at"]),
            document=data["document"] if isinstance(data.get("document"), dict) else None,
        )


class FetchFailedError(Exception):
    """The page could not be fetched; the message is for the model."""


class WebFetch(TypedTool[FetchArgs]):
    """Fetch a web page and return its readable text."""

    name = "web_fetch"
    description = (
        "Fetch a web page (HTTP GET) and return its main text as Markdown (PDFs as text). "
        f"Long pages come {MAX_CHARS} characters at a time; pass offset to continue. "
        "Pages are cached for this run; refresh=true fetches again."
    )
    args_model = FetchArgs
    effect = EffectClass.READ_ONLY

    def call(self, args: FetchArgs, ctx: ToolContext) -> ToolResult:
        """Fetch (or read from the run's cache) and return a chunk of text."""
        try:
            url = net.parse_url(args.url)
        except net.AddressRefusedError as exc:
            raise ToolInputError(str(exc)) from None
        cache = _cache_path(ctx, str(url))
        page = None if args.refresh or cache is None else _read_cache(cache)
        cached = page is not None
        if page is None:
            try:
                page = fetch(str(url), ctx)
            except net.AddressRefusedError as exc:
                return result(f"refused: {exc}", error=True)
            except FetchFailedError as exc:
                return result(str(exc), error=True)
            if cache is not None and page.status < 400:
                _write_cache(cache, page)
        return _render(page, args.offset, cached)


def fetch(url: str, ctx: ToolContext) -> Page:
    """GET ``url``, following at most :data:`MAX_REDIRECTS` checked redirects.

    Raises:
        AddressRefusedError: the URL or a redirect target may not be reached.
        FetchFailedError: network error, timeout, or content that cannot be read.
    """
    import httpx2

    cap = ctx.settings.web_fetch_max_bytes
    deadline = time.monotonic() + ctx.settings.web_fetch_total_s
    current = net.parse_url(url)
    with net.http_client(ctx) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            ctx.cancel.raise_if_cancelled()
            target = net.check_target(current, ctx)
            try:
                resp = net.send(
                    client,
                    "GET",
                    target,
                    headers={"Accept": "text/html,*/*;q=0.8"},
                    deadline=deadline,
                )
            except net.UnreachableError as exc:
                raise FetchFailedError(f"could not fetch {current}: {exc}") from None
            except httpx2.TimeoutException:
                raise FetchFailedError(f"timed out fetching {current}") from None
            except httpx2.HTTPError as exc:
                raise FetchFailedError(f"could not fetch {current}: {exc}") from None
            try:
                if resp.is_redirect and "location" in resp.headers:
                    try:
                        current = current.join(resp.headers["location"])
                    except httpx2.InvalidURL as exc:
                        raise FetchFailedError(f"bad redirect from {url}: {exc}") from None
                    continue
                body, truncated = _read_capped(resp, cap, deadline)
                content_type = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                text = _to_text(body, content_type, resp.encoding, str(current))
                document = None
                if _is_pdf(body, content_type) and not truncated and resp.status_code < 400:
                    document = documents.descriptor(
                        ctx.workspace, body, path=str(current), media_type=documents.PDF
                    )
                return Page(
                    url=url,
                    final_url=str(current),
                    status=resp.status_code,
                    content_type=content_type,
                    text=text,
                    truncated=truncated,
                    fetched_at=ctx.clock.now(),
                    document=document,
                )
            finally:
                resp.close()
    raise FetchFailedError(f"too many redirects (more than {MAX_REDIRECTS}) from {url}")


def _read_capped(resp: httpx2.Response, cap: int, deadline: float) -> tuple[bytes, bool]:
    import httpx2

    try:
        return net.read_capped(resp, cap, deadline)
    except net.ReadCutOffError as cut:
        if cut.cause is None:
            raise FetchFailedError(f"the page took too long to download: {resp.url}") from None
        if isinstance(cut.cause, httpx2.TimeoutException):
            raise FetchFailedError(f"timed out reading {resp.url}") from None
        raise FetchFailedError(f"connection failed while reading {resp.url}: {cut.cause}") from None


def _is_pdf(body: bytes, content_type: str) -> bool:
    return content_type == "application/pdf" or body.startswith(b"%PDF-")


def _to_text(body: bytes, content_type: str, encoding: str | None, url: str) -> str:
    if _is_pdf(body, content_type):
        return _pdf_text(body)
    text = body.decode(encoding or "utf-8", errors="replace")
    if content_type in ("text/html", "application/xhtml+xml") or (
        not content_type and "<html" in text[:2000].lower()
    ):
        return html_to_text(text, url)
    if content_type and not content_type.startswith(_TEXT_TYPES) and "\x00" in text[:4096]:
        raise FetchFailedError(f"{url} is {content_type}, which cannot be read as text")
    return text


def html_to_text(html: str, url: str = "") -> str:
    """Readable Markdown of a page's main content (falling back to all its text)."""
    import trafilatura  # imported on first use: it is slow to import and rarely needed

    extracted = trafilatura.extract(
        html,
        url=url or None,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        favor_recall=True,
    )
    if extracted and extracted.strip():
        title = _title(html)
        if title and title not in extracted[:300]:
            return f"# {title}\n\n{extracted}"
        return extracted
    return trafilatura.html2txt(html) or ""


def _title(html: str) -> str:
    lower = html[:20000].lower()
    start = lower.find("<title")
    if start < 0:
        return ""
    start = lower.find(">", start) + 1
    end = lower.find("</title>", start)
    return " ".join(html[start:end].split()) if 0 < start < end else ""


def _pdf_text(body: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(body))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except (PyPdfError, ValueError, KeyError) as exc:
        raise FetchFailedError(f"the PDF cannot be read: {exc}") from None


def _render(page: Page, offset: int, cached: bool) -> ToolResult:
    text = page.text
    chunk = text[offset : offset + MAX_CHARS]
    head = [f"URL: {page.final_url}", f"Status: {page.status}"]
    if cached:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(page.fetched_at))
        head.append(f"(from this run's cache, fetched {when}; refresh=true to fetch again)")
    if page.truncated:
        head.append("(the page was larger than the download limit and was cut)")
    body = chunk
    if offset + MAX_CHARS < len(text):
        rest = len(text) - offset - MAX_CHARS
        body += f"\n[... {rest} more characters; offset={offset + MAX_CHARS}]"
    content = "\n".join(head) + "\n\n" + (body or "(no text)")
    data: dict[str, JSON] = {"url": page.final_url, "status": page.status, "cached": cached}
    if page.document is not None and offset == 0:
        data["document"] = page.document
    return result(content, error=page.status >= 400, data=data)


def _cache_path(ctx: ToolContext, url: str) -> Path | None:
    name = hashlib.sha256(url.encode()).hexdigest()[:32]
    run = "".join(c for c in ctx.run_id if c.isalnum() or c in "-_") or "run"
    try:
        return confine(ctx.workspace, f"{CACHE_DIR}/{run}/{name}.json")
    except ToolInputError:  # .cache made into a link leading out: do without a cache
        return None


def _read_cache(path: Path) -> Page | None:
    try:
        return Page.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, page: Page) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    except OSError:
        return  # a cache that cannot be written only costs a second download
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(page.to_json(), f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
