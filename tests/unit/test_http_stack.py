"""One HTTP stack: every client comes from ``desktop_agent/http_client.py``.

Read from the source: no module of ``desktop_agent`` imports ``httpx`` (the older package,
with its own pool, exceptions and certificate list) in any way, nor makes an ``httpx2``
client, transport or SSL context outside ``http_client.py``, and every Anthropic SDK
object is given its HTTP client.

Seen on the wire: the tools (``web_fetch``), the webhooks and the SDK (``ClaudeModel``)
trust the certificates :func:`desktop_agent.http_client.ssl_context` trusts, all three
alike (a test CA and an HTTPS server on 127.0.0.1), including ``SSL_CERT_FILE``; proxies
from the environment carry the webhooks' and the SDK's requests and never a tool's; the
connect timeout set there is the one each client has.
"""

from __future__ import annotations

import ast
import datetime
import functools
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import pytest

import desktop_agent
from desktop_agent import http_client
from desktop_agent.domain.settings import Settings
from desktop_agent.engine.control import run_tool
from desktop_agent.engine.ports import CancelToken, ModelRequest, ToolContext
from desktop_agent.llm.batches import BatchApi
from desktop_agent.llm.claude import ClaudeModel
from desktop_agent.llm.pacing import RateLimitPacer
from desktop_agent.tools import net
from desktop_agent.tools.web import WebFetch
from desktop_agent.worker.notify import FINISHED, Notification, WebhookSender
from tests.helpers.fakes import FakeClock
from tests.tools.servers import HttpServer, Reply

PACKAGE = Path(desktop_agent.__file__).resolve().parent
KEY = "sk-ant-api03-test-0123456789abcdef"
MODEL = "claude-haiku-4-5"
PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)
NOTE = Notification(FINISHED, "run-1", "Q3 report", "completed", None, "", 0.5, 0.0)

MAKERS = ("Client", "AsyncClient", "HTTPTransport", "AsyncHTTPTransport", "create_ssl_context")
"""``httpx2`` names that make a client, a transport or an SSL context."""


# --------------------------------------------------------------------------- the source


def _dynamic_import(node: ast.Call) -> str | None:
    """The module ``import_module("x")`` or ``__import__("x")`` names, if ``node`` is one."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    first = node.args[0] if node.args else None
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return str(first.value)
    return None


def httpx_imports(tree: ast.AST) -> list[int]:
    """Lines that import ``httpx`` (not ``httpx2``), however it is done."""
    lines = []
    for node in ast.walk(tree):
        names: list[str] = []
        if not isinstance(node, ast.stmt | ast.expr):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call):
            names = [_dynamic_import(node) or ""]
        if any(n.split(".")[0] == "httpx" for n in names):
            lines.append(node.lineno)
    return lines


def client_makers(tree: ast.AST) -> list[int]:
    """Lines that make an HTTP client outside the one module.

    An ``httpx2`` client, transport or SSL context, or an Anthropic SDK object not given
    its ``http_client``.
    """
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "httpx2":
            lines += [node.lineno for a in node.names if a.name in MAKERS]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else ""
        given = any(k.arg == "http_client" for k in node.keywords)
        sdk = node.func.attr in ("Anthropic", "AsyncAnthropic")
        if (owner_name == "httpx2" and node.func.attr in MAKERS) or (
            owner_name == "anthropic" and sdk and not given
        ):
            lines.append(node.lineno)
    return lines


@functools.cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    """Every module of the package, parsed, by path relative to it (parsed once)."""
    return tuple(
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def _offenders(check: Any, *, allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        f"{relative}:{n}"
        for relative, tree in _modules()
        if relative not in allowed
        for n in check(tree)
    ]


def test_no_module_imports_httpx() -> None:
    assert _offenders(httpx_imports) == []


def test_the_import_check_sees_each_way_of_importing_httpx() -> None:
    for source in (
        "import httpx\n",
        "import httpx._client as c\n",
        "from httpx import Client\n",
        "if TYPE_CHECKING:\n    import httpx\n",
        "def f():\n    import httpx\n",
        "import importlib\nh = importlib.import_module('httpx')\n",
        "h = __import__('httpx')\n",
    ):
        assert httpx_imports(ast.parse(source)), source
    for source in (
        "import httpx2\nfrom httpx2 import URL\nimport_module('httpx2')\n",
        "x = 'httpx'\nfrom . import httpx_like\n",
    ):
        assert httpx_imports(ast.parse(source)) == [], source


def test_clients_are_made_in_http_client_only() -> None:
    assert _offenders(client_makers, allowed=("http_client.py",)) == []
    made_there = client_makers(ast.parse(Path(http_client.__file__).read_text(encoding="utf-8")))
    assert made_there, "the check finds the clients http_client.py makes"


def test_the_maker_check_sees_clients_made_elsewhere() -> None:
    for source in (
        "httpx2.Client(timeout=5)\n",
        "httpx2.AsyncClient()\n",
        "httpx2.AsyncHTTPTransport()\n",
        "httpx2.create_ssl_context()\n",
        "from httpx2 import Client\n",
        "anthropic.Anthropic(api_key=k)\n",
    ):
        assert client_makers(ast.parse(source)), source
    fine = "httpx2.URL(u)\nhttpx2.Timeout(5)\nanthropic.Anthropic(api_key=k, http_client=h)\n"
    assert client_makers(ast.parse(fine)) == []


# --------------------------------------------------------------------------- on the wire


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests here start without proxies or certificate variables from the environment."""
    for name in (*PROXY_VARIABLES, "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


def tool_context(tmp_path: Path, **settings: Any) -> ToolContext:
    return ToolContext(
        run_id="run1",
        seq=1,
        idempotency_key="run1:1",
        workspace=tmp_path,
        clock=FakeClock(),
        cancel=CancelToken(),
        settings=Settings(**settings),
    )


def claude(base_url: str) -> ClaudeModel:
    return ClaudeModel(lambda: KEY, base_url=base_url, pacer=RateLimitPacer(), timeout=10.0)


def count(model: ClaudeModel) -> int | None:
    """``count_tokens`` of a one-line prompt (None when the call failed)."""
    request = ModelRequest(MODEL, "", [{"role": "user", "content": "hello"}], [], max_tokens=16)
    return model.count_tokens(request)


def post_webhook(url: str) -> tuple[int, int]:
    """Post :data:`NOTE` to ``url``; (sent, failed)."""
    sender = WebhookSender(url)
    sender.send(NOTE)
    sender.close(10.0)
    return sender.sent, sender.failed


@dataclass(frozen=True)
class Pki:
    """A test CA and a certificate for ``localhost`` and 127.0.0.1 signed by it."""

    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "desktop-agent test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = Pki(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    paths.ca.write_bytes(ca.public_bytes(pem))
    paths.cert.write_bytes(leaf.public_bytes(pem))
    paths.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class TlsServer:
    """HTTPS on 127.0.0.1 with the test certificate; answers what each client asks for."""

    def __init__(self, pki: Pki) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.cert, pki.key)
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                outer.paths.append(path)
                if path.endswith("/count_tokens"):
                    body, kind = json.dumps({"input_tokens": 7}).encode(), "application/json"
                else:
                    body, kind = b"over TLS", "text/plain"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def get_request(self) -> tuple[Any, Any]:
                sock, address = super().get_request()
                wrapped = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                return wrapped, address

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that refuses the certificate ends the handshake: expected

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def url(self, path: str = "") -> str:
        return f"https://localhost:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


@pytest.fixture
def tls(pki: Pki) -> Iterator[TlsServer]:
    server = TlsServer(pki)
    yield server
    server.close()


def three_clients(tls: TlsServer, tmp_path: Path) -> dict[str, bool]:
    """Whether the tool, the webhook and the SDK each got an answer from ``tls``."""
    page = run_tool(
        WebFetch(), {"url": tls.url("/page")}, tool_context(tmp_path, allow_private_fetch=True)
    )
    sent, _ = post_webhook(tls.url("/hook"))
    return {
        "tool": not page.is_error and "over TLS" in page.content,
        "webhook": sent == 1,
        "sdk": count(claude(tls.url())) == 7,
    }


def test_a_certificate_the_one_context_does_not_trust_fails_every_client(
    tls: TlsServer, tmp_path: Path
) -> None:
    assert three_clients(tls, tmp_path) == {"tool": False, "webhook": False, "sdk": False}
    assert "/page" not in tls.paths and "/hook" not in tls.paths  # nothing sent in clear


def test_every_client_trusts_what_the_one_context_trusts(
    tls: TlsServer, tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_the_test_ca = ssl.create_default_context(cafile=str(pki.ca))
    monkeypatch.setattr(http_client, "ssl_context", lambda: only_the_test_ca)
    assert three_clients(tls, tmp_path) == {"tool": True, "webhook": True, "sdk": True}
    assert {"/page", "/hook", "/v1/messages/count_tokens"} <= set(tls.paths)


def test_ssl_cert_file_is_read_for_every_client_alike(
    tls: TlsServer, tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca))
    assert three_clients(tls, tmp_path) == {"tool": True, "webhook": True, "sdk": True}


def test_proxies_from_the_environment_carry_the_webhooks_and_the_sdk_never_a_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy, target = HttpServer(), HttpServer()
    try:
        proxy.routes["http://hooks.example.test/notify"] = Reply(200, b"ok")
        proxy.routes["http://api.example.test/v1/messages/count_tokens"] = Reply(
            200, b'{"input_tokens": 3}', {"Content-Type": "application/json"}
        )
        target.routes["/page"] = Reply(200, b"direct", {"Content-Type": "text/plain"})
        monkeypatch.setenv("http_proxy", proxy.url(""))

        assert post_webhook("http://hooks.example.test/notify") == (1, 0)
        assert count(claude("http://api.example.test")) == 3
        page = run_tool(
            WebFetch(),
            {"url": target.url("/page")},
            tool_context(tmp_path, allow_private_fetch=True),
        )
        assert not page.is_error and "direct" in page.content, page.content
        assert [r.path.split("?", 1)[0] for r in proxy.requests] == [
            "http://hooks.example.test/notify",
            "http://api.example.test/v1/messages/count_tokens",
        ]
        assert [r.path for r in target.requests] == ["/page"]
    finally:
        proxy.close()
        target.close()


def test_the_connect_timeout_set_there_is_every_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_client, "CONNECT_TIMEOUT_S", 0.25)
    with net.http_client(tool_context(tmp_path)) as tool:
        assert tool.timeout.connect == 0.25
        assert tool.timeout.read == net.DEFAULT_TIMEOUT_S == http_client.TOOL_TIMEOUT_S

    made: list[Any] = []
    real = http_client.webhook_client

    def spy(seconds: float = http_client.WEBHOOK_TIMEOUT_S) -> Any:
        made.append(real(seconds))
        return made[-1]

    monkeypatch.setattr(http_client, "webhook_client", spy)
    hook = HttpServer()
    try:
        hook.routes["/hook"] = Reply(200, b"ok")
        assert post_webhook(hook.url("/hook")) == (1, 0)
    finally:
        hook.close()
    (webhook,) = made
    assert webhook.timeout.connect == 0.25
    assert webhook.timeout.read == http_client.WEBHOOK_TIMEOUT_S

    model = claude("http://127.0.0.1:9")
    sdk = model._client(KEY)
    assert (sdk.timeout.connect, sdk.timeout.read) == (0.25, 10.0)  # type: ignore[union-attr]
    assert sdk._client.timeout == sdk.timeout


def test_the_sdk_keeps_its_own_client_defaults_and_its_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = claude("http://127.0.0.1:9")
    sdk = model._client(KEY)
    assert isinstance(sdk._client, anthropic.DefaultHttpxClient)  # keep-alive probes, limits
    assert sdk._client.follow_redirects is True
    assert sdk.max_retries == 0  # the adapter retries itself, on the run's cancel token
    assert (sdk.timeout.read, sdk.timeout.connect) == (  # type: ignore[union-attr]
        10.0,
        http_client.CONNECT_TIMEOUT_S,
    )
    other = "sk-ant-api03-another-key-0123456789"
    monkeypatch.setattr(model, "key_source", lambda: other)
    again = model._client(other)
    assert again is not sdk and again._client is sdk._client  # a new key, the same pool

    batches = BatchApi(lambda: KEY, base_url="http://127.0.0.1:9", timeout=120.0)
    batch_sdk, _ = batches._client()
    assert isinstance(batch_sdk._client, anthropic.DefaultHttpxClient)
    assert batch_sdk.max_retries == 2
    assert batch_sdk.timeout.read == 120.0  # type: ignore[union-attr]
