"""web_fetch against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from desktop_agent.engine.control import run_tool
from desktop_agent.tools import net
from desktop_agent.tools.web import WebFetch
from tests.tools.conftest import MakeCtx
from tests.tools.servers import HttpServer, Reply, Request, make_pdf

ARTICLE = b"""<!doctype html><html><head><title>Cloud market report</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About us</a> | Subscribe now</nav>
<article><h1>Cloud market report</h1>
<p>The cloud market grew 4% in 2025, driven by demand from retailers in every region we
surveyed. Analysts expect the pace to hold through the next two years.</p>
<p>Three vendors lead, and <a href="/vendors">the others</a> trail far behind them in
revenue, in customers and in the breadth of their product lines.</p></article>
<footer>Copyright 2025 Example Corp. All rights reserved. Cookie settings.</footer>
</body></html>"""

HTML = {"Content-Type": "text/html; charset=utf-8"}


def test_html_becomes_readable_markdown(http_server: HttpServer, make_ctx: MakeCtx) -> None:
    http_server.routes["/article"] = Reply(200, ARTICLE, HTML)
    res = run_tool(
        WebFetch(), {"url": http_server.url("/article")}, make_ctx(allow_private_fetch=True)
    )
    assert not res.is_error, res.content
    assert "Cloud market report" in res.content
    assert "The cloud market grew 4% in 2025" in res.content
    assert "Subscribe now" not in res.content and "Cookie settings" not in res.content
    assert f"[the others]({http_server.url('/vendors')})" in res.content
    assert http_server.hits("/article")[0].headers["user-agent"].startswith("desktop-agent/")


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "[::1]", "2130706433", "0.0.0.0", "[::ffff:127.0.0.1]"]
)
def test_loopback_addresses_are_refused_unless_allowed(
    http_server: HttpServer, make_ctx: MakeCtx, host: str
) -> None:
    http_server.routes["/"] = Reply(200, b"internal admin page", {"Content-Type": "text/plain"})
    url = http_server.url("/", host=host)
    res = run_tool(WebFetch(), {"url": url}, make_ctx())
    assert res.is_error
    assert "refused" in res.content and "allow_private_fetch" in res.content
    assert "internal admin page" not in res.content
    assert http_server.requests == []  # refused before any connection


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/",
        "http://192.168.0.1/router",
        "http://172.16.5.4/",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata: link-local
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
    ],
)
def test_private_and_link_local_addresses_are_refused(url: str, make_ctx: MakeCtx) -> None:
    res = run_tool(WebFetch(), {"url": url}, make_ctx())
    assert res.is_error and "refused" in res.content


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.test/x", "gopher://x/", "javascript:alert(1)"]
)
def test_other_schemes_are_refused(url: str, make_ctx: MakeCtx) -> None:
    res = run_tool(WebFetch(), {"url": url}, make_ctx(allow_private_fetch=True))
    assert res.is_error and "http" in res.content


def test_allowed_private_fetch_reaches_the_local_server(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/plain"] = Reply(
        200, "héllo wörld".encode(), {"Content-Type": "text/plain"}
    )
    res = run_tool(
        WebFetch(),
        {"url": http_server.url("/plain", "localhost")},
        make_ctx(allow_private_fetch=True),
    )
    assert not res.is_error and "héllo wörld" in res.content
    assert http_server.requests[0].headers["host"] == f"localhost:{http_server.port}"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A bare socket listening on 127.0.0.1 only, whose backlog shows any connection made."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def _never_connected(sock: socket.socket) -> bool:
    # A connection the kernel accepted sits in the backlog before connect() returns.
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def _resolve_to(
    monkeypatch: pytest.MonkeyPatch, addresses: list[str]
) -> tuple[list[str], list[str]]:
    """Make every name resolve to ``addresses``.

    Returns the names looked up and the addresses requests were built for, in order.
    """
    looked_up: list[str] = []
    built: list[str] = []
    real_request = net.request

    def lookup(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return list(addresses)

    def request(*args: object, **kwargs: object) -> httpx2.Request:
        built.append(str(kwargs.get("address")))
        return real_request(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(net, "lookup", lookup)
    monkeypatch.setattr(net, "request", request)
    return looked_up, built


def test_a_refused_ipv6_address_falls_back_to_the_next_one(
    http_server: HttpServer, make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a stock host whose /etc/hosts maps localhost to ::1 first: the server listens
    # on 127.0.0.1 only, so its port on ::1 refuses the connection (a real refusal).
    http_server.routes["/plain"] = Reply(200, b"dual stack", {"Content-Type": "text/plain"})
    looked_up, built = _resolve_to(monkeypatch, ["::1", "127.0.0.1"])
    res = run_tool(
        WebFetch(),
        {"url": http_server.url("/plain", "localhost")},
        make_ctx(allow_private_fetch=True),
    )
    assert not res.is_error and "dual stack" in res.content, res.content
    assert built == ["::1", "127.0.0.1"]  # both tried, in the order DNS gave
    assert looked_up == ["localhost"]  # resolved once: each try is pinned to a checked address
    assert len(http_server.requests) == 1
    assert http_server.requests[0].headers["host"] == f"localhost:{http_server.port}"


def test_when_no_address_answers_the_error_names_each_one_tried(
    make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on, on either address
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _, built = _resolve_to(monkeypatch, ["::1", "127.0.0.1"])
    res = run_tool(
        WebFetch(), {"url": f"http://localhost:{port}/"}, make_ctx(allow_private_fetch=True)
    )
    assert res.is_error and "could not fetch" in res.content
    assert "::1" in res.content and "127.0.0.1" in res.content
    assert built == ["::1", "127.0.0.1"]


def test_a_disallowed_address_is_never_connected_to_even_after_an_unreachable_one(
    listener: socket.socket, make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ::1 stands for a public address that does not answer; 127.0.0.1, behind it in the
    # answer, is loopback and refused (private fetches are not allowed here).
    real_is_public = net.is_public
    monkeypatch.setattr(net, "is_public", lambda a: a == "::1" or real_is_public(a))
    port = listener.getsockname()[1]
    _, built = _resolve_to(monkeypatch, ["::1", "127.0.0.1"])
    url = f"http://name.test:{port}/"
    res = run_tool(WebFetch(), {"url": url}, make_ctx())
    assert res.is_error and "refused" in res.content and "127.0.0.1" in res.content
    assert built == [] and _never_connected(listener)
    # The check holds inside the loop too, for a target nobody checked up front.
    target = net.Target(httpx2.URL(url), ("::1", "127.0.0.1"), allow_private=False)
    with httpx2.Client() as client, pytest.raises(net.AddressRefusedError, match=r"127\.0\.0\.1"):
        net.send(client, "GET", target)
    assert built == ["::1"] and _never_connected(listener)


def test_each_redirect_target_is_checked_again(
    http_server: HttpServer, make_ctx: MakeCtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Treat 127.0.0.1 as public for this test, and let localhost resolve to ::1 only, which
    # stays loopback: the first URL passes, the redirect target gets the real check.
    real_is_public, real_lookup = net.is_public, net.lookup
    monkeypatch.setattr(net, "is_public", lambda a: a == "127.0.0.1" or real_is_public(a))
    monkeypatch.setattr(
        net, "lookup", lambda h, p: ["::1"] if h == "localhost" else real_lookup(h, p)
    )
    inner = http_server.url("/secret", host="localhost")
    http_server.routes["/hop"] = Reply(302, b"", {"Location": inner})
    http_server.routes["/secret"] = Reply(200, b"secret", {"Content-Type": "text/plain"})
    res = run_tool(WebFetch(), {"url": http_server.url("/hop")}, make_ctx())
    assert res.is_error and "refused" in res.content and "localhost" in res.content
    assert [r.path for r in http_server.requests] == ["/hop"]
    http_server.routes["/to-file"] = Reply(301, b"", {"Location": "file:///etc/passwd"})
    res = run_tool(WebFetch(), {"url": http_server.url("/to-file")}, make_ctx())
    assert res.is_error and "only http and https" in res.content


def test_redirects_are_followed_but_bounded(http_server: HttpServer, make_ctx: MakeCtx) -> None:
    for i in range(10):
        http_server.routes[f"/r{i}"] = Reply(302, b"", {"Location": f"/r{i + 1}"})
    http_server.routes["/r3"] = Reply(200, b"arrived", {"Content-Type": "text/plain"})
    ctx = make_ctx(allow_private_fetch=True)
    ok = run_tool(WebFetch(), {"url": http_server.url("/r0")}, ctx)
    assert "arrived" in ok.content and f"URL: {http_server.url('/r3')}" in ok.content
    http_server.routes["/r3"] = Reply(302, b"", {"Location": "/r4"})
    res = run_tool(WebFetch(), {"url": http_server.url("/r0"), "refresh": True}, ctx)
    assert res.is_error and "too many redirects" in res.content
    assert len(http_server.hits("/r6")) == 0  # stopped after 5 redirects


def test_size_cap_and_timeouts(http_server: HttpServer, make_ctx: MakeCtx) -> None:
    http_server.routes["/big"] = Reply(200, b"a" * 300_000, {"Content-Type": "text/plain"})
    release = threading.Event()

    def held(_req: Request) -> Reply:
        release.wait(30)  # the server answers only once the test lets it
        return Reply(200, b"late", {"Content-Type": "text/plain"})

    http_server.routes["/slow"] = held
    ctx = make_ctx(allow_private_fetch=True, web_fetch_max_bytes=50_000, http_timeout_s=0.3)
    big = run_tool(WebFetch(), {"url": http_server.url("/big")}, ctx)
    assert "larger than the download limit" in big.content
    assert big.content.count("a") < 50_000 + 200
    try:
        slow = run_tool(WebFetch(), {"url": http_server.url("/slow")}, ctx)
        # The fetch came back while the server still held its answer: it gave up.
        assert slow.is_error and "timed out" in slow.content and "late" not in slow.content
        assert len(http_server.hits("/slow")) == 1
    finally:
        release.set()


def test_pages_are_cached_per_run_on_disk(
    http_server: HttpServer, make_ctx: MakeCtx, ws: Path
) -> None:
    http_server.routes["/page"] = Reply(200, ARTICLE, HTML)
    url = http_server.url("/page")
    run1 = make_ctx(run_id="run1", allow_private_fetch=True)
    first = run_tool(WebFetch(), {"url": url}, run1)
    again = run_tool(WebFetch(), {"url": url}, run1)
    assert len(http_server.hits("/page")) == 1
    assert "from this run's cache" in again.content
    assert first.content.split("\n\n", 1)[1] == again.content.split("\n\n", 1)[1]
    files = list((ws / ".cache" / "web" / "run1").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["url"] == url
    run_tool(WebFetch(), {"url": url, "refresh": True}, run1)
    assert len(http_server.hits("/page")) == 2
    run_tool(WebFetch(), {"url": url}, make_ctx(run_id="run2", allow_private_fetch=True))
    assert len(http_server.hits("/page")) == 3  # another run has its own cache


def test_pdf_and_errors_over_http(http_server: HttpServer, make_ctx: MakeCtx) -> None:
    http_server.routes["/paper.pdf"] = Reply(
        200, make_pdf("Churn fell to 3 percent"), {"Content-Type": "application/pdf"}
    )
    http_server.routes["/gone"] = Reply(404, b"<html><body><p>Not here</p></body></html>", HTML)
    ctx = make_ctx(allow_private_fetch=True)
    pdf = run_tool(WebFetch(), {"url": http_server.url("/paper.pdf")}, ctx)
    assert "Churn fell to 3 percent" in pdf.content
    gone = run_tool(WebFetch(), {"url": http_server.url("/gone")}, ctx)
    assert gone.is_error and "Status: 404" in gone.content
    again = run_tool(WebFetch(), {"url": http_server.url("/gone")}, ctx)
    assert len(http_server.hits("/gone")) == 2  # errors are not cached
    assert again.is_error


def test_a_page_cut_off_mid_body_is_an_error_naming_the_page(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/cut"] = Reply(200, ARTICLE[:200], HTML, short_by=1000)
    url = http_server.url("/cut")
    res = run_tool(WebFetch(), {"url": url}, make_ctx(allow_private_fetch=True))
    assert res.is_error
    assert f"connection failed while reading {url}" in res.content
