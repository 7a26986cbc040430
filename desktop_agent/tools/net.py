"""Outgoing HTTP for tools: public addresses only, checked after DNS, connection pinned.

A URL's host is resolved once; every address it resolves to must be public (not private,
loopback, link-local, multicast, reserved or unspecified, IPv4-mapped forms included)
unless the user allowed private addresses. The connection then goes to the address that
was checked, with the original ``Host`` header and TLS server name, so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from desktop_agent.engine.ports import ToolContext
from desktop_agent.tools.base import ToolSettings

USER_AGENT = "desktop-agent/0.1 (research agent)"
DEFAULT_TIMEOUT_S = 20.0


class AddressRefusedError(Exception):
    """The URL is not one a tool may reach (scheme, host or address refused)."""


@dataclass(frozen=True)
class Target:
    """A checked URL and the address to connect to."""

    url: httpx.URL
    address: str


def is_public(address: str) -> bool:
    """Whether ``address`` (an IP literal, optionally with ``%scope``) is globally routable."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is not None:
            ip = mapped
    return ip.is_global and not ip.is_multicast


def parse_url(raw: str) -> httpx.URL:
    """Parse an http(s) URL with a host.

    Raises:
        AddressRefusedError: another scheme, no host, or not a URL at all.
    """
    try:
        url = httpx.URL(raw.strip())
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise AddressRefusedError(f"not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise AddressRefusedError(f"only http and https URLs are allowed, not {url.scheme or '?'}:")
    if not url.host:
        raise AddressRefusedError("the URL has no host")
    return url


def resolve_allowed(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Resolve ``host`` and check every address it resolves to.

    Raises:
        AddressRefusedError: the name does not resolve, or an address is not public and
            private addresses are not allowed.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise AddressRefusedError(f"cannot resolve {host}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise AddressRefusedError(f"{host} has no address")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise AddressRefusedError(
                    f"{host} resolves to {address}, a private, loopback or link-local "
                    "address; such addresses are refused unless the user allows them "
                    "(setting allow_private_fetch)"
                )
    return addresses


def check_target(raw: str | httpx.URL, ctx: ToolContext) -> Target:
    """Parse and check a URL against the run's settings.

    Raises:
        AddressRefusedError: the URL may not be reached.
    """
    url = raw if isinstance(raw, httpx.URL) else parse_url(raw)
    if url.scheme not in ("http", "https") or not url.host:
        raise AddressRefusedError(f"only http and https URLs are allowed: {url}")
    port = url.port or (443 if url.scheme == "https" else 80)
    allow = ToolSettings(ctx).flag("allow_private_fetch")
    addresses = resolve_allowed(url.host, port, allow_private=allow)
    return Target(url, addresses[0])


def pinned(target: Target) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
    """URL, headers and request extensions that connect to the checked address."""
    url = target.url.copy_with(host=target.address)
    host_header = target.url.netloc.decode("ascii")
    return url, {"Host": host_header}, {"sni_hostname": target.url.host}


def timeout(ctx: ToolContext, key: str = "http_timeout_s") -> httpx.Timeout:
    """Per-operation timeouts (connect, read, write, pool) from the settings."""
    seconds = max(0.1, ToolSettings(ctx).number(key, DEFAULT_TIMEOUT_S))
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


@contextmanager
def http_client(ctx: ToolContext, key: str = "http_timeout_s") -> Iterator[httpx.Client]:
    """A client that never follows redirects by itself nor reads proxy settings.

    Proxies from the environment are ignored: through a proxy, the address checks above
    would check the proxy, not the target.
    """
    with httpx.Client(
        timeout=timeout(ctx, key),
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
    ) as client:
        yield client


def request(
    client: httpx.Client,
    method: str,
    target: Target,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
) -> httpx.Request:
    """Build a request to the checked address of ``target``."""
    url, host, extensions = pinned(target)
    return client.build_request(
        method,
        url,
        headers={**(headers or {}), **host},
        content=content,
        extensions=extensions,
    )
