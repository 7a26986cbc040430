"""Outgoing HTTP for tools: public addresses only, checked after DNS, connection pinned.

A URL's host is resolved once; every address it resolves to must be public (not private,
loopback, link-local, multicast, reserved or unspecified, IPv4-mapped forms included)
unless the user allowed private addresses. The connection then goes to an address that
was checked, with the original ``Host`` header and TLS server name, so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect it.

A name may resolve to several addresses (a dual-stack host: IPv6 and IPv4), not all of
them reachable from here. :func:`send` tries the checked addresses in the order DNS gave,
each with a short connect timeout, and moves on only when a connection could not be made
(so nothing was sent).
"""

from __future__ import annotations

import ipaddress
import math
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop_agent import http_client as clients
from desktop_agent.domain.errors import plain_error
from desktop_agent.engine.ports import ToolContext

if TYPE_CHECKING:  # imported where a request is made: a worker may never make one
    import httpx2

USER_AGENT = "desktop-agent/0.1 (research agent)"
DEFAULT_TIMEOUT_S = clients.TOOL_TIMEOUT_S
CONNECT_PER_ADDRESS_S = 4.0
"""Longest wait for one address to accept a connection before the next one is tried."""


class AddressRefusedError(Exception):
    """The URL is not one a tool may reach (scheme, host or address refused)."""


class UnreachableError(Exception):
    """No checked address of the target accepted a connection; the message names each try."""


class ReadCutOffError(Exception):
    """A response body stopped arriving before its end: what came, and why it stopped.

    Attributes:
        partial: the bytes read before it stopped.
        cause: the transport's error, or None when the download took too long.
    """

    def __init__(self, partial: bytes, cause: httpx2.HTTPError | None) -> None:
        super().__init__(str(cause) if cause is not None else "the download took too long")
        self.partial = partial
        self.cause = cause


def read_capped(resp: httpx2.Response, cap: int, deadline: float = math.inf) -> tuple[bytes, bool]:
    """Read a streamed response body, at most ``cap`` bytes.

    Args:
        resp: a response opened with ``stream=True``.
        cap: the most bytes kept; the rest is not downloaded.
        deadline: ``time.monotonic()`` after which the download is given up.

    Returns:
        The body (``cap`` bytes at most) and whether it was cut at the cap.

    Raises:
        ReadCutOffError: the connection failed or the deadline passed mid-body.
    """
    import httpx2

    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= cap:
                return b"".join(chunks)[:cap], True
            if time.monotonic() > deadline:
                raise ReadCutOffError(b"".join(chunks), None)
    except httpx2.HTTPError as exc:
        raise ReadCutOffError(b"".join(chunks), exc) from None
    return b"".join(chunks), False


@dataclass(frozen=True)
class Target:
    """A checked URL and the addresses it may be reached at, in the order DNS gave them."""

    url: httpx2.URL
    addresses: tuple[str, ...]
    allow_private: bool = False

    @property
    def address(self) -> str:
        """The first checked address."""
        return self.addresses[0]


def is_public(address: str) -> bool:
    """Whether ``address`` (an IP literal, optionally with ``%scope``) is globally routable."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is not None:
            ip = mapped
    return ip.is_global and not ip.is_multicast


def parse_url(raw: str) -> httpx2.URL:
    """Parse an http(s) URL with a host.

    Raises:
        AddressRefusedError: another scheme, no host, or not a URL at all.
    """
    import httpx2

    try:
        url = httpx2.URL(raw.strip())
    except (httpx2.InvalidURL, TypeError, ValueError) as exc:
        raise AddressRefusedError(f"not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise AddressRefusedError(f"only http and https URLs are allowed, not {url.scheme or '?'}:")
    if not url.host:
        raise AddressRefusedError("the URL has no host")
    return url


def lookup(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, without repeats, in the order DNS gave them.

    Raises:
        OSError: the name does not resolve (``socket.gaierror``).
        UnicodeError: the name cannot be encoded for DNS.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve_allowed(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Resolve ``host`` (once, through :func:`lookup`) and check every address.

    Raises:
        AddressRefusedError: the name does not resolve, or an address is not public and
            private addresses are not allowed.
    """
    try:
        addresses = lookup(host, port)
    except (UnicodeError, OSError) as exc:
        raise AddressRefusedError(f"cannot resolve {host}: {exc}") from None
    if not addresses:
        raise AddressRefusedError(f"{host} has no address")
    if not allow_private:
        for address in addresses:
            _check_address(host, address)
    return addresses


def _check_address(host: str, address: str) -> None:
    if not is_public(address):
        raise AddressRefusedError(
            f"{host} resolves to {address}, a private, loopback or link-local "
            "address; such addresses are refused unless the user allows them "
            "(setting allow_private_fetch)"
        )


def check_target(raw: str | httpx2.URL, ctx: ToolContext) -> Target:
    """Parse and check a URL against the run's settings.

    Raises:
        AddressRefusedError: the URL may not be reached.
    """
    import httpx2

    url = raw if isinstance(raw, httpx2.URL) else parse_url(raw)
    if url.scheme not in ("http", "https") or not url.host:
        raise AddressRefusedError(f"only http and https URLs are allowed: {url}")
    port = url.port or (443 if url.scheme == "https" else 80)
    allow = ctx.settings.allow_private_fetch
    addresses = resolve_allowed(url.host, port, allow_private=allow)
    return Target(url, tuple(addresses), allow)


def pinned(
    target: Target, address: str | None = None
) -> tuple[httpx2.URL, dict[str, str], dict[str, str]]:
    """URL, headers and request extensions that connect to a checked address.

    Args:
        target: the checked URL.
        address: one of ``target.addresses``; the first one if not given.
    """
    url = target.url.copy_with(host=address or target.address)
    host_header = target.url.netloc.decode("ascii")
    return url, {"Host": host_header}, {"sni_hostname": target.url.host}


def timeout(ctx: ToolContext) -> httpx2.Timeout:
    """Per-operation timeouts (connect, read, write, pool) from the settings."""
    return clients.timeout(ctx.settings.http_timeout_s)


@contextmanager
def http_client(ctx: ToolContext) -> Iterator[httpx2.Client]:
    """A client that never follows redirects by itself nor reads proxy settings.

    Made by :func:`desktop_agent.http_client.tool_client` (certificates and timeouts as
    every client of the app has them). Proxies from the environment are ignored: through
    a proxy, the address checks above would check the proxy, not the target.
    """
    with clients.tool_client(
        ctx.settings.http_timeout_s, headers={"User-Agent": USER_AGENT}
    ) as client:
        yield client


def request(
    client: httpx2.Client,
    method: str,
    target: Target,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    address: str | None = None,
    connect_timeout: float | None = None,
) -> httpx2.Request:
    """Build a request to a checked address of ``target`` (the first if none is given).

    Args:
        client: the client that will send it (its timeouts are the default).
        method: the HTTP method.
        target: the checked URL.
        headers: extra request headers.
        content: the request body.
        address: one of ``target.addresses``.
        connect_timeout: replaces the client's connect timeout for this request.
    """
    import httpx2

    url, host, extensions = pinned(target, address)
    limits = client.timeout
    if connect_timeout is not None:
        limits = httpx2.Timeout(
            limits.read, connect=connect_timeout, write=limits.write, pool=limits.pool
        )
    return client.build_request(
        method,
        url,
        headers={**(headers or {}), **host},
        content=content,
        extensions=extensions,
        timeout=limits,
    )


def send(
    client: httpx2.Client,
    method: str,
    target: Target,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    deadline: float | None = None,
) -> httpx2.Response:
    """Send a request to the first checked address of ``target`` that accepts a connection.

    The addresses are tried in the order DNS gave them, each checked again right before
    use and given at most :data:`CONNECT_PER_ADDRESS_S` (or the client's shorter connect
    timeout) to connect. Only a failed connection moves on to the next address: nothing
    was sent then, so even a POST is sent at most once. The response is streamed; the
    caller closes it.

    Args:
        client: from :func:`http_client`.
        method: the HTTP method.
        target: from :func:`check_target`.
        headers: extra request headers.
        content: the request body.
        deadline: a ``time.monotonic()`` time after which no further address is tried
            (and no connect wait reaches past it).

    Raises:
        AddressRefusedError: an address is not public and private addresses are not
            allowed (only for a target not made by :func:`check_target`).
        UnreachableError: no address accepted a connection; says what was tried.
        httpx2.HTTPError: the connection was made but the exchange failed or timed out.
    """
    import httpx2

    host = target.url.host
    tried: list[str] = []
    for address in target.addresses:
        if not target.allow_private:
            _check_address(host, address)
        connect = min(client.timeout.connect or CONNECT_PER_ADDRESS_S, CONNECT_PER_ADDRESS_S)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                tried.append(f"{address} (not tried: out of time)")
                continue
            connect = min(connect, left)
        req = request(
            client,
            method,
            target,
            headers=headers,
            content=content,
            address=address,
            connect_timeout=connect,
        )
        try:
            return client.send(req, stream=True)
        except httpx2.ConnectTimeout:
            tried.append(f"{address} (no answer within {connect:.3g} s)")
        except httpx2.ConnectError as exc:
            tried.append(f"{address} ({plain_error(exc, 'connection refused')})")
    port = target.url.port or (443 if target.url.scheme == "https" else 80)
    raise UnreachableError(f"could not connect to {host} port {port}; tried {', '.join(tried)}")
