"""Every HTTP client of desktop-agent is made here: one stack, one policy.

The Anthropic SDK and MCP are built on ``httpx2``, and so are the tools and the webhooks:
one connection-pool implementation, one exception tree (``httpx2.HTTPError``), one source
of trusted certificates. No other module makes an HTTP client, a transport or an SSL
context for HTTP (``tests/unit/test_http_stack.py`` reads the source for it, and for any
``httpx``, the older package, imported again).

**Certificates.** :func:`ssl_context`, the same context for every client of the process:
``httpx2``'s default policy, namely the file named by ``SSL_CERT_FILE`` or the folder
named by ``SSL_CERT_DIR`` when one is set; otherwise the operating system's trust store
(through ``truststore``) on Windows and macOS, and OpenSSL's system CA bundle (the
distribution's, e.g. ``/etc/ssl/certs/ca-certificates.crt``) on Linux. There is no
bundled certificate list (no ``certifi``): a certificate the system trusts, a company's
root CA included, is trusted by every client alike. The context is made once per pair of
those variables' values and shared.

**Proxies.** Read from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
``NO_PROXY``; on Windows and macOS also the system's proxy settings, as
``urllib.request.getproxies`` reads them) when a client is made, for the webhooks and the
Anthropic SDK. Never for the tools: through a proxy, the address checks of
:mod:`desktop_agent.tools.net` would check the proxy, not the target. Not for MCP servers
reached by URL either, as before this module (their transport is our own).

**Timeouts.** :func:`timeout`: every operation (connect, read, write, waiting for a pooled
connection) is bounded, and no connection is waited for longer than
:data:`CONNECT_TIMEOUT_S`. Each kind of client has its own overall figure here (the tools'
comes from the ``http_timeout_s`` setting; the SDK's from its caller). Retries are not a
transport matter: the SDK's callers set ``max_retries``, the tools never retry a request
that may have been sent.

``httpx2`` (and the SDK) are imported inside the functions: a worker that sends nothing
over HTTP never loads them.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from desktop_agent.domain.settings import HTTP_TIMEOUT_S

if TYPE_CHECKING:
    import ssl

    import httpx2

CONNECT_TIMEOUT_S = 10.0
"""The longest wait for a connection to be made, for every client."""

TOOL_TIMEOUT_S = HTTP_TIMEOUT_S
"""Per-operation timeout of the tools' requests: the default of the ``http_timeout_s`` setting."""

WEBHOOK_TIMEOUT_S = 5.0
"""Per-operation timeout of a webhook post: a slow receiver never holds a notification long."""

MCP_TIMEOUT_S = 30.0
MCP_READ_TIMEOUT_S = 300.0
"""An MCP server may take minutes to answer a call (the hub bounds each call itself)."""


def timeout(seconds: float, *, read: float | None = None) -> httpx2.Timeout:
    """Per-operation timeouts: ``seconds`` each (``read`` for reads when given).

    The connect timeout is the smaller of ``seconds`` and :data:`CONNECT_TIMEOUT_S`.
    """
    import httpx2

    return httpx2.Timeout(
        seconds,
        connect=min(seconds, CONNECT_TIMEOUT_S),
        read=seconds if read is None else read,
    )


def ssl_context() -> ssl.SSLContext:
    """The SSL context of every HTTPS connection (see the module's docstring)."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))


@functools.lru_cache(maxsize=4)
def _ssl_context(cafile: str, capath: str) -> ssl.SSLContext:
    """``httpx2``'s default context, made once per value of the two variables it reads."""
    import httpx2

    return httpx2.create_ssl_context(verify=True, trust_env=True)


def tool_client(seconds: float, *, headers: Mapping[str, str]) -> httpx2.Client:
    """A client for the tools: no redirect followed by itself, no proxy.

    The tools connect to addresses they checked (:mod:`desktop_agent.tools.net`); a proxy
    from the environment would take the request elsewhere, so none is read.
    """
    import httpx2

    return httpx2.Client(
        timeout=timeout(seconds),
        follow_redirects=False,
        trust_env=False,
        verify=ssl_context(),
        headers=dict(headers),
    )


def webhook_client(seconds: float = WEBHOOK_TIMEOUT_S) -> httpx2.Client:
    """A client for the outgoing webhook: proxies from the environment, no redirects."""
    import httpx2

    return httpx2.Client(
        timeout=timeout(seconds),
        follow_redirects=False,
        trust_env=True,
        verify=ssl_context(),
    )


def sdk_client(seconds: float) -> httpx2.Client:
    """The HTTP client to give the Anthropic SDK (``anthropic.Anthropic(http_client=...)``).

    It is the SDK's own default client (``anthropic.DefaultHttpxClient``: its connection
    limits, TCP keep-alive probes on long streams, redirects followed) with this module's
    certificates, proxies and timeouts. Pass ``timeout=client.timeout`` to the SDK as well,
    so that its per-request timeout is this one. The client closes its connections when
    it is garbage collected, as the SDK's own does, so that an SDK object that is replaced
    (a new API key) leaves nothing open.
    """
    return _sdk_client_class()(timeout=timeout(seconds), trust_env=True, verify=ssl_context())


@functools.cache
def _sdk_client_class() -> type[httpx2.Client]:
    import anthropic

    class SdkClient(anthropic.DefaultHttpxClient):
        """The SDK's default client, closed when collected."""

        def __del__(self) -> None:
            with contextlib.suppress(Exception):
                if not self.is_closed:
                    self.close()

    return SdkClient


def mcp_client(
    headers: Mapping[str, str],
    wrap: Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport],
) -> httpx2.AsyncClient:
    """An async client for an MCP server reached by URL.

    Args:
        headers: sent with every request (the server's declared headers, secrets resolved).
        wrap: builds the transport the client uses around the plain HTTP transport made
            here (the MCP hub reads long answers through its own).
    """
    import httpx2

    inner = httpx2.AsyncHTTPTransport(verify=ssl_context(), trust_env=False)
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=timeout(MCP_TIMEOUT_S, read=MCP_READ_TIMEOUT_S),
        transport=wrap(inner),
        trust_env=False,
    )
