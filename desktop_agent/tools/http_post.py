"""http_post: send a POST request carrying the step's idempotency key.

Every request carries an ``Idempotency-Key`` header equal to the step's key, which stays
the same when the step is retried. Whether that makes a repeat harmless depends on the
endpoint: one the user lists as honouring keys (setting ``idempotent_post_prefixes``)
deduplicates repeats, so calls to it are ``idempotent``; any other POST is ``unsafe`` and
never repeated blindly after a crash.

Requests also carry a ``Fencing-Token`` header: the lease epoch of the worker sending it,
which grows each time a worker claims the run. An endpoint that keeps the largest token it
saw for a key can refuse a late request from a worker that lost the run to another one.
Right before sending (the point of no return), the tool asks whether the worker still
holds the run (``ctx.check_lease``), and abandons the request if not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from pydantic import Field

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.tools import net
from desktop_agent.tools.base import ToolArgs, TypedTool, result

if TYPE_CHECKING:  # imported where a URL is read or a request sent (see tools.net)
    import httpx2

MAX_BODY_BYTES = 1_000_000
MAX_RESPONSE_BYTES = 1_000_000
MAX_RESPONSE_CHARS = 20_000
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$")
_RESERVED = {
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "idempotency-key",
    "fencing-token",
}


class PostArgs(ToolArgs):
    """Arguments of http_post."""

    url: str = Field(max_length=4000, description="http or https URL of the endpoint")
    body: dict[str, Any] | list[Any] | None = Field(
        default=None, description="JSON body (an object or array)"
    )
    text: str | None = Field(default=None, description="raw text body, instead of body")
    content_type: str = Field(
        default="", max_length=200, description="Content-Type (default: JSON or plain text)"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, max_length=20, description="extra request headers"
    )


def honours_keys(url: str, prefixes: list[str]) -> bool:
    """Whether ``url`` lies under one of ``prefixes`` (whole path segments only).

    ``https://api.example.com/v1`` covers ``https://api.example.com/v1/orders`` but not
    ``https://api.example.com/v1-beta`` nor ``https://api.example.com.evil.test/v1``.
    """
    import httpx2

    try:
        target = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, ValueError):
        return False
    path = target.path
    if ".." in unquote(target.raw_path.decode("ascii", "replace")).split("/"):
        return False  # a server may undo the dots after we compared: stay unsafe
    for raw in prefixes:
        try:
            prefix = httpx2.URL(raw.strip())
        except (httpx2.InvalidURL, TypeError, ValueError):
            continue
        if (target.scheme, target.host, _port(target)) != (
            prefix.scheme,
            prefix.host,
            _port(prefix),
        ):
            continue
        base = prefix.path.rstrip("/")
        if not base or path == base or path.startswith(base + "/"):
            return True
    return False


def _port(url: httpx2.URL) -> int | None:
    return url.port or {"http": 80, "https": 443}.get(url.scheme)


class HttpPost(TypedTool[PostArgs]):
    """POST to an HTTP endpoint with an idempotency key."""

    name = "http_post"
    description = (
        "Send an HTTP POST request (JSON body, or text) to an endpoint and return its "
        "response. The request carries an Idempotency-Key header. This acts on the outside "
        "world: the analyst may be asked to approve it."
    )
    args_model = PostArgs
    effect = EffectClass.UNSAFE
    approval = ApprovalPolicy.ALWAYS

    def effect_of(self, args: Mapping[str, JSON], ctx: ToolContext) -> EffectClass:
        """Idempotent for endpoints the user marked as honouring keys, else unsafe."""
        url = args.get("url")
        if isinstance(url, str) and honours_keys(url, ctx.settings.idempotent_post_prefixes):
            return EffectClass.IDEMPOTENT
        return EffectClass.UNSAFE

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """False (a repeat with the same key is harmless) for honouring endpoints; else None.

        A plain HTTP endpoint cannot be asked whether it received a request. One that
        honours idempotency keys makes the question moot: sending again with the same key
        returns the first response without acting twice, so the engine may send it again.
        """
        url = args.get("url")
        if isinstance(url, str) and honours_keys(url, ctx.settings.idempotent_post_prefixes):
            return False
        return None

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float | None:
        """The HTTP timeout (setting ``http_timeout_s``), per operation."""
        return float(net.timeout(ctx).read or net.DEFAULT_TIMEOUT_S)

    def check(self, args: PostArgs, ctx: ToolContext) -> str | None:
        """Right before an approved POST: the endpoint must still be reachable and allowed."""
        try:
            net.check_target(args.url, ctx)
        except net.AddressRefusedError as exc:
            return str(exc)
        return None

    def call(self, args: PostArgs, ctx: ToolContext) -> ToolResult:
        """Send the request (redirects are reported, not followed)."""
        import httpx2

        content, content_type = _body(args)
        headers = _headers(args.headers)
        headers["Content-Type"] = content_type
        headers["Idempotency-Key"] = ctx.idempotency_key
        if ctx.fencing_token is not None:
            headers["Fencing-Token"] = str(ctx.fencing_token)
        try:
            target = net.check_target(args.url, ctx)
        except net.AddressRefusedError as exc:
            return result(f"refused: {exc}", error=True)
        with net.http_client(ctx) as client:
            req = net.request(client, "POST", target, headers=headers, content=content)
            ctx.check_lease()  # the last moment before anything leaves: still our run?
            try:
                resp = client.send(req, stream=True)
            except httpx2.ConnectError as exc:
                return result(f"could not connect to {args.url}: {exc}", error=True)
            except httpx2.TimeoutException:
                return result(
                    f"timed out waiting for {args.url}: the server may or may not have "
                    "acted on the request. Do not send it again without checking.",
                    error=True,
                )
            except httpx2.HTTPError as exc:
                return result(
                    f"the request to {args.url} failed ({exc}); it may or may not have "
                    "reached the server.",
                    error=True,
                )
            try:
                text = _read_text(resp)
            finally:
                resp.close()
        return _render(resp, text, ctx)


def _body(args: PostArgs) -> tuple[bytes, str]:
    if args.body is not None and args.text is not None:
        raise ToolInputError("give either body (JSON) or text, not both")
    if args.text is not None:
        content = args.text.encode()
        default_type = "text/plain; charset=utf-8"
    else:
        content = json.dumps(args.body, ensure_ascii=False).encode()
        default_type = "application/json"
    if len(content) > MAX_BODY_BYTES:
        raise ToolInputError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    content_type = args.content_type.strip() or default_type
    if any(c in content_type for c in "\r\n"):
        raise ToolInputError("content_type must be one line")
    return content, content_type


def _headers(extra: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in extra.items():
        if not _TOKEN.match(name):
            raise ToolInputError(f"invalid header name {name!r}")
        if name.lower() in _RESERVED:
            raise ToolInputError(f"header {name} is set by the tool")
        if any(c in value for c in "\r\n\x00") or len(value) > 4000:
            raise ToolInputError(f"invalid value for header {name}")
        out[name] = value
    return out


def _read_text(resp: httpx2.Response) -> str:
    try:
        body, _ = net.read_capped(resp, MAX_RESPONSE_BYTES)
    except net.ReadCutOffError as cut:
        body = cut.partial + b"\n[the response was cut off]"
    return body.decode(resp.encoding or "utf-8", errors="replace")


def _render(resp: httpx2.Response, text: str, ctx: ToolContext) -> ToolResult:
    status = resp.status_code
    lines = [f"HTTP {status} {resp.reason_phrase}".rstrip()]
    if resp.is_redirect:
        lines.append(
            f"The endpoint redirected to {resp.headers.get('location', '?')}; "
            "POST redirects are not followed."
        )
    body = text[:MAX_RESPONSE_CHARS]
    if len(text) > MAX_RESPONSE_CHARS:
        body += f"\n[... {len(text) - MAX_RESPONSE_CHARS} more characters]"
    if body:
        lines += ["", body]
    return result(
        "\n".join(lines),
        error=status >= 400,
        data={"status": status, "idempotency_key": ctx.idempotency_key},
    )
