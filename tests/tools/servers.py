"""Real servers on 127.0.0.1 for the tool tests: HTTP, SMTP and a small IMAP.

Each records what it received so that tests can assert on the wire, not on mocks.
"""

from __future__ import annotations

import base64
import contextlib
import shlex
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# --------------------------------------------------------------------------- HTTP


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    peer: tuple[str, int] | None = None
    """The client's (address, port): which process sent it, for tests that need to know."""


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    short_by: int = 0
    """Announce this many bytes more than the body, then close: a body cut off mid-way."""


Route = Reply | Callable[[Request], Reply]


class HttpServer:
    """A threaded HTTP server whose routes a test sets; every request is recorded."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    (str(self.client_address[0]), int(self.client_address[1])),
                )
                with server._lock:
                    server.requests.append(req)
                route = server.routes.get(self.path.split("?", 1)[0])
                reply = Reply(404, b"not found") if route is None else route
                if callable(reply):
                    reply = reply(req)
                if reply.delay:
                    time.sleep(reply.delay)  # a slow server is what the reply simulates
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body) + reply.short_by))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    if reply.short_by:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def hits(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.close()


class KeyedEndpoint:
    """An endpoint that honours Idempotency-Key: a repeated key replays the first answer."""

    def __init__(self) -> None:
        self.effects: dict[str, bytes] = {}
        self.keys: list[str | None] = []

    def __call__(self, req: Request) -> Reply:
        key = req.headers.get("idempotency-key")
        self.keys.append(key)
        if key is not None and key in self.effects:
            return Reply(200, b'{"order": 1, "replayed": true}', {"Idempotent-Replayed": "true"})
        self.effects[key or f"anon-{len(self.keys)}"] = req.body
        return Reply(201, b'{"order": 1}', {"Content-Type": "application/json"})


# --------------------------------------------------------------------------- SMTP


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    data: bytes
    peer: tuple[str, int] | None = None
    """The client's (address, port): which process sent it, for tests that need to know."""


class SmtpServer:
    """A minimal SMTP server (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT).

    Args:
        on_connect: called with the client's (address, port) before the greeting; the
            client waits for the greeting until it returns.
        on_mail: called with each mail once it is recorded, before the server confirms
            it; the client waits for the confirmation until it returns.
    """

    def __init__(
        self,
        on_connect: Callable[[tuple[str, int]], None] | None = None,
        on_mail: Callable[[Mail], None] | None = None,
    ) -> None:
        self.mails: list[Mail] = []
        self.logins: list[tuple[str, str]] = []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def send(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self) -> None:
                # The client may go away at any point (a test killed it).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.converse()

            def converse(self) -> None:
                peer = (str(self.client_address[0]), int(self.client_address[1]))
                if on_connect is not None:
                    on_connect(peer)
                self.send("220 127.0.0.1 ESMTP test")
                sender, rcpts = "", list[str]()
                while True:
                    raw = self.rfile.readline()
                    if not raw:
                        return
                    line = raw.decode().rstrip("\r\n")
                    verb = line.split(" ", 1)[0].upper()
                    if verb in ("EHLO", "HELO"):
                        self.wfile.write(
                            b"250-127.0.0.1\r\n250-AUTH PLAIN\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n"
                        )
                    elif verb == "AUTH":
                        blob = base64.b64decode(line.split()[2]).split(b"\0")
                        outer.logins.append((blob[1].decode(), blob[2].decode()))
                        self.send("235 2.7.0 ok")
                    elif verb == "MAIL":
                        sender = line.split(":", 1)[1].split()[0].strip("<>")
                        rcpts = []
                        self.send("250 ok")
                    elif verb == "RCPT":
                        rcpts.append(line.split(":", 1)[1].strip().strip("<>"))
                        self.send("250 ok")
                    elif verb == "DATA":
                        self.send("354 go ahead")
                        lines = []
                        while True:
                            data = self.rfile.readline()
                            if not data:
                                return  # cut off before the final dot: not delivered
                            if data == b".\r\n":
                                break
                            lines.append(data[1:] if data.startswith(b"..") else data)
                        mail = Mail(sender, rcpts, b"".join(lines), peer)
                        outer.mails.append(mail)
                        if on_mail is not None:
                            on_mail(mail)
                        self.send("250 queued")
                    elif verb == "QUIT":
                        self.send("221 bye")
                        return
                    else:
                        self.send("250 ok")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    yield server
    server.close()


# --------------------------------------------------------------------------- IMAP


class ImapServer:
    """Just enough IMAP4rev1 for a Sent-folder search by Message-ID."""

    def __init__(self, sent_ids: set[str]) -> None:
        self.sent_ids = sent_ids
        self.logins: list[tuple[str, str]] = []
        self.searches: list[str] = []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def send(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self) -> None:
                self.send("* OK IMAP4rev1 test ready")
                while True:
                    raw = self.rfile.readline()
                    if not raw:
                        return
                    parts = shlex.split(raw.decode().rstrip("\r\n"))
                    tag, verb, args = parts[0], parts[1].upper(), parts[2:]
                    if verb == "CAPABILITY":
                        self.send("* CAPABILITY IMAP4rev1 AUTH=PLAIN")
                    elif verb == "LOGIN":
                        outer.logins.append((args[0], args[1]))
                    elif verb in ("SELECT", "EXAMINE"):
                        if args[0] != "Sent":
                            self.send(f"{tag} NO no such folder")
                            continue
                        self.send(f"* {len(outer.sent_ids)} EXISTS")
                    elif verb == "SEARCH":
                        wanted = args[-1]
                        outer.searches.append(wanted)
                        found = " 1" if wanted in outer.sent_ids else ""
                        self.send(f"* SEARCH{found}")
                    elif verb == "LOGOUT":
                        self.send("* BYE")
                        self.send(f"{tag} OK done")
                        return
                    self.send(f"{tag} OK done")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


# --------------------------------------------------------------------------- PDF


def make_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica, written by hand (no library)."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
    stream = b"BT /F1 14 Tf 72 720 Td (" + escaped + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)
