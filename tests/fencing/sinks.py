"""Sinks on 127.0.0.1 that can hold a worker at an exact moment of an effect.

A gate holds one answer of the server (the reply to RCPT, the confirmation of a message,
the response to a POST) until the test opens it. While the worker waits for that answer,
the test freezes it (SIGSTOP) at a moment it chose: before the point of no return of a
send, or after it. Only the first exchange is held; later ones (another worker's) go
through at once. Everything received is recorded, so tests count effects at the sink.
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GATE_TIMEOUT_S = 60.0
"""Longest a held answer waits for the test (a failing test must not hang forever)."""


@dataclass
class Gate:
    """One held answer: ``reached`` when the worker is waiting, then ``opened`` by the test.

    ``answered`` is set once the held answer was sent: the bytes are in the worker's
    socket then, even if the worker is frozen.
    """

    reached: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)
    used: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> bool:
        """Whether this exchange is the one to hold (the first one only)."""
        with self.lock:
            if self.used:
                return False
            self.used = True
            return True

    def hold(self) -> None:
        """Block the server's answer until the test opens the gate."""
        self.reached.set()
        self.opened.wait(GATE_TIMEOUT_S)


# --------------------------------------------------------------------------- SMTP


@dataclass
class Mail:
    """A message the server accepted (its final dot came in)."""

    sender: str
    recipients: list[str]
    data: bytes


class GatedSmtp:
    """A minimal SMTP server that can hold the first reply to RCPT or to the message.

    Args:
        hold: ``"rcpt"`` (the worker has not sent the message yet: before the point of
            no return) or ``"message"`` (the server has the message and holds its "250":
            after it); None holds nothing.
    """

    def __init__(self, hold: str | None) -> None:
        self.hold = hold
        self.gate = Gate()
        self.mails: list[Mail] = []
        self.sessions = 0
        self.quits = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def send(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")
                self.wfile.flush()

            def handle(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    outer._converse(self)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def _held(self, point: str) -> bool:
        return self.hold == point and self.gate.take()

    def _converse(self, h: Any) -> None:
        with self._lock:
            self.sessions += 1
        h.send("220 127.0.0.1 ESMTP fencing test")
        sender, rcpts = "", list[str]()
        while True:
            raw = h.rfile.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\r\n")
            verb = line.split(" ", 1)[0].upper()
            if verb in ("EHLO", "HELO"):
                h.wfile.write(b"250-127.0.0.1\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n")
                h.wfile.flush()
            elif verb == "MAIL":
                sender, rcpts = line.split(":", 1)[1].split()[0].strip("<>"), []
                h.send("250 ok")
            elif verb == "RCPT":
                rcpts.append(line.split(":", 1)[1].strip().strip("<>"))
                held = self._held("rcpt")
                if held:
                    self.gate.hold()
                h.send("250 ok")
                if held:
                    self.gate.answered.set()
            elif verb == "DATA":
                h.send("354 go ahead")
                lines = []
                while True:
                    data = h.rfile.readline()
                    if not data:
                        return  # cut off before the final dot: not delivered
                    if data == b".\r\n":
                        break
                    lines.append(data[1:] if data.startswith(b"..") else data)
                with self._lock:
                    self.mails.append(Mail(sender, rcpts, b"".join(lines)))
                held = self._held("message")
                if held:
                    self.gate.hold()
                h.send("250 queued")
                if held:
                    self.gate.answered.set()
            elif verb == "QUIT":
                with self._lock:
                    self.quits += 1
                h.send("221 bye")
                return
            else:
                h.send("250 ok")

    def close(self) -> None:
        """Open the gate (a held worker goes on) and stop the server."""
        self.gate.opened.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


# --------------------------------------------------------------------------- HTTP


@dataclass
class Post:
    """A request the endpoint received."""

    path: str
    key: str | None
    token: str | None
    body: bytes
    status: int


class KeyedEndpoint:
    """An HTTP endpoint that honours idempotency keys and fencing tokens.

    A repeated ``Idempotency-Key`` replays the first answer without acting again. It
    also remembers the largest ``Fencing-Token`` seen per key and refuses a request that
    carries a smaller one (409): a worker that lost the run cannot act after the new
    owner did. The first request's response can be held (``hold=True``): the effect has
    happened at the endpoint, the worker waits for the answer.
    """

    def __init__(self, *, hold: bool) -> None:
        self.hold = hold
        self.gate = Gate()
        self.posts: list[Post] = []
        self.effects: dict[str, bytes] = {}
        self._tokens: dict[str, int] = {}
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                outer._serve(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def url(self, path: str) -> str:
        """The endpoint's URL for ``path``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def _decide(self, key: str | None, token: str | None, body: bytes) -> tuple[int, bytes]:
        with self._lock:
            if key is not None and token is not None and token.isdigit():
                if int(token) < self._tokens.get(key, 0):
                    return 409, b'{"error": "stale fencing token"}'
                self._tokens[key] = int(token)
            if key is not None and key in self.effects:
                return 200, b'{"order": 1, "replayed": true}'
            self.effects[key or f"anonymous-{len(self.effects)}"] = body
            return 201, b'{"order": 1}'

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        key = h.headers.get("Idempotency-Key")
        token = h.headers.get("Fencing-Token")
        status, reply = self._decide(key, token, body)
        with self._lock:
            self.posts.append(Post(h.path, key, token, body, status))
        held = self.hold and self.gate.take()
        if held:
            self.gate.hold()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(reply)))
            h.end_headers()
            h.wfile.write(reply)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        if held:
            self.gate.answered.set()

    def close(self) -> None:
        """Open the gate and stop the server."""
        self.gate.opened.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
