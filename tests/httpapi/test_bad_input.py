"""Bad input answers 4xx, never 500: a fuzz over every route, then each case seen in use."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from desktop_agent.client.api import Client
from desktop_agent.httpapi import inputs
from desktop_agent.httpapi.app import create_app
from desktop_agent.httpapi.openapi import DESCRIPTION
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import wait_until

TOKEN = "the-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class World:
    """A test client over an app, and ids that exist in its database."""

    http: TestClient
    ids: dict[str, list[str]]


@pytest.fixture
def world(client: Client, make_executor: MakeExecutor, workspace: Path) -> Iterator[World]:
    """The app (no worker started) over ended and queued runs, an approval, a schedule."""
    from desktop_agent.client.schedules import RunOptions, Scheduling

    ended = client.start_run("Ended", model="demo")
    drain(client.store, make_executor(ScriptedModel([Reply("Done.")])))
    (workspace / "report.md").write_text("old\n")
    asking = client.start_run("Rewrite", model="demo", workspace=workspace)
    write = Reply("Writing.", [("write_file", {"path": "report.md", "content": "draft\n"})])
    drain(client.store, make_executor(ScriptedModel([write, Reply("Done.")])))
    (approval,) = client.approvals()
    queued = client.start_run("Queued", model="demo")
    schedule = Scheduling(client).add_schedule(
        "Summarise {item}", every_s=86400, options=RunOptions(model="demo")
    )
    app = create_app(client.db_path, TOKEN, start_workers=False)
    ids = {
        "run_id": [ended.id, asking.id, queued.id],
        "approval_id": [approval.id],
        "schedule_id": [schedule.id],
        "command": ["pause", "resume", "cancel", "stop", "steer", "answer", "budget", "resolve"],
        "decision": ["approve", "reject"],
    }
    with TestClient(
        app, base_url="http://127.0.0.1", headers=AUTH, raise_server_exceptions=True
    ) as http:
        yield World(http, ids)


def _routes() -> list[tuple[str, str]]:
    app = create_app(Path("unused.db"), TOKEN)
    found = []
    for route in app.routes:
        assert isinstance(route, Route)
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                found.append((route.path, method))
    assert {path for path, _ in found} == set(DESCRIPTION["paths"])
    return found


ROUTES = _routes()
FIELDS = [
    "goal", "model", "workspace", "tools", "max_cost_usd", "max_steps", "max_time",
    "placement", "effort", "thinking", "text", "action", "add_cost_usd", "add_steps",
    "add_time_s", "add_tokens", "arguments", "reason", "item", "path", "content",
    "economy", "template", "items", "concurrency",
]  # fmt: skip
QUERY = ["after_seq", "limit", "status", "search", "all"]

nasty_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "é", "demo", "any",
                     "host:", "pool:x", "30m", "-1", "1e400", "nan", "queued", "%", "*"]),
)  # fmt: skip
huge_ints = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**22, -(10**22), 2**53, 2**53 + 1, 2**63, 2**64, -1, 0, 1]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    nasty_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)
    ),
    max_leaves=8,
)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5).map(
        lambda d: json.dumps(d).encode()
    ),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=3000).map(lambda n: b'{"goal":' + b"[" * n + b"]" * n),
    st.sampled_from([b"", b"{", b"{not json", b"\xff\xfe", b'{"goal": "\\ud800"}', b"1" * 5000,
                     b'{"goal": "x", "goal": 1}', b"\x00", b"[" * 100_000]),
)  # fmt: skip
query_values = st.one_of(
    nasty_text,
    huge_ints.map(str),
    st.sampled_from(["1" * 23, "9" * 30, "1.5", "0x10", " 1", "１", "true"]),
)


@st.composite
def requests(draw: st.DrawFn, ids: dict[str, list[str]]) -> tuple[str, str, str, bytes]:
    path, method = draw(st.sampled_from(ROUTES))

    def param(match: re.Match[str]) -> str:
        name = match.group(1)
        known = ids[name]
        other = nasty_text.filter(bool)
        if name == "run_id" and path.endswith("/events"):
            known = known[:1]  # only the ended run: a live one streams until it ends
            live = ids[name][1:]
            # Nor a prefix of a live run's id: a run is found by a unique prefix (matched
            # as SQL LIKE does: any case, "%" dropped), so "B" may name the queued run,
            # whose events would stream for ever.
            other = other.filter(
                lambda t: not any(i.lower().startswith(_as_prefix(t)) for i in live)
            )
        elif name == "run_id" and method == "POST":
            known = known[1:]  # commands leave the ended run alone
        value = draw(st.one_of(st.sampled_from(known), other))
        return _quote(value.replace("/", "_"))

    url = re.sub(r"\{(\w+)\}", param, path)
    query = draw(st.lists(st.tuples(st.sampled_from(QUERY) | nasty_text, query_values), max_size=4))
    body = draw(bodies) if method == "POST" else b""
    return method, url, "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query), body


def _as_prefix(text: str) -> str:
    """``text`` as the store matches it against ids (see ``persistence.sqlbase.by_prefix``)."""
    return text.replace("/", "_").replace("%", "").lower()


def _quote(text: str) -> str:
    return quote(text, safe="", errors="surrogatepass")


def test_no_route_answers_500_to_any_input(world: World) -> None:
    @settings(
        max_examples=400,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(requests(world.ids))
    def check(request: tuple[str, str, str, bytes]) -> None:
        method, url, query, body = request
        response = world.http.request(
            method,
            f"{url}?{query}" if query else url,
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code < 500, (method, url, query, body[:200], response.text)
        assert response.status_code in (200, 202) or "code" in response.json()

    check()


# Each case seen in use, through the app ------------------------------------------------


@pytest.fixture
def plain(client: Client) -> Iterator[TestClient]:
    """The app as it answers a real client: a bug is a 500, not a raised exception."""
    app = create_app(client.db_path, TOKEN, start_workers=False)
    with TestClient(
        app, base_url="http://127.0.0.1", headers=AUTH, raise_server_exceptions=False
    ) as http:
        yield http


def test_a_23_digit_after_seq_is_400_naming_it(plain: TestClient, client: Client) -> None:
    run = client.start_run("X", model="demo")
    answer = plain.get(f"/v1/runs/{run.id}/steps", params={"after_seq": "1" * 23})
    assert answer.status_code == 400 and "'after_seq'" in answer.json()["error"]
    limit = plain.get(f"/v1/runs/{run.id}/steps", params={"limit": "9" * 30})
    assert limit.status_code == 400 and "'limit'" in limit.json()["error"]


def test_an_object_as_placement_is_400_naming_it(plain: TestClient, client: Client) -> None:
    answer = plain.post("/v1/runs", json={"goal": "X", "model": "demo", "placement": {"a": 1}})
    assert answer.status_code == 400 and "'placement'" in answer.json()["error"]
    for field, value in (("model", 3), ("workspace", []), ("max_steps", 10**22),
                         ("max_cost_usd", 10**400), ("max_steps", 2.5)):  # fmt: skip
        wrong = plain.post("/v1/runs", json={"goal": "X", field: value})
        assert wrong.status_code == 400 and repr(field) in wrong.json()["error"], field
    assert client.runs() == []


def test_a_body_nested_100000_deep_is_400(plain: TestClient, client: Client) -> None:
    deep = b'{"goal": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = plain.post("/v1/runs", content=deep, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and "deeper than 32" in answer.json()["error"]
    run = client.start_run("X", model="demo")
    steer = plain.post(f"/v1/runs/{run.id}/steer", content=b"[" * 100_000)
    assert steer.status_code == 400


def test_a_lone_surrogate_is_400(plain: TestClient) -> None:
    answer = plain.post("/v1/runs", content=b'{"goal": "\\ud800", "model": "demo"}')
    assert answer.status_code == 400 and "Unicode" in answer.json()["error"]


# Through a real server: limits on size and time ------------------------------------------


@dataclass
class Served:
    port: int
    server: uvicorn.Server

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@pytest.fixture
def served(client: Client) -> Iterator[Served]:
    """The app through ``serve``'s uvicorn configuration (headers within 1 s here)."""
    from desktop_agent.httpapi.server import server_config

    app: Starlette = create_app(client.db_path, TOKEN, start_workers=False)
    server = uvicorn.Server(server_config(app, 0, headers_timeout_s=1.0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 20, "the API server")
    yield Served(server.servers[0].sockets[0].getsockname()[1], server)
    server.should_exit = True
    thread.join(timeout=10)


def _head(length: str | None) -> bytes:
    framing = f"Content-Length: {length}" if length else "Transfer-Encoding: chunked"
    return (
        f"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def _answer(sock: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_a_body_over_the_limit_is_413_before_it_is_all_sent(served: Served) -> None:
    # Declared: refused on the headers alone.
    with served.connect() as sock:
        sock.sendall(_head(str(300 * 1024 * 1024)))
        declared = _answer(sock)
    assert declared.startswith(b"HTTP/1.1 413") and b"1048576 bytes" in declared
    # Undeclared (chunked, "300 MB"): refused once 1 MiB has come, while more is being sent.
    sent = 0
    with served.connect() as sock:
        sock.sendall(_head(None))
        stop = threading.Event()

        def send() -> None:
            nonlocal sent
            chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
            try:
                while not stop.is_set() and sent < 300 * 1024 * 1024:
                    sock.sendall(chunk)
                    sent += 65536
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        streamed = _answer(sock)
        stop.set()
        sender.join(timeout=10)
    assert streamed.startswith(b"HTTP/1.1 413") and b"1048576 bytes" in streamed
    assert sent < 64 * 1024 * 1024


def test_slow_headers_are_cut_off_and_a_slow_body_is_408(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(5):  # a byte at a time does not keep it open
            try:
                sock.sendall(b"X")
            except OSError:
                break
            time.sleep(0.5)  # the slow client's pace is what is tested
        assert sock.recv(100) == b""  # closed
        assert time.monotonic() - started < 5
    monkeypatch.setattr(inputs, "BODY_TIMEOUT_S", 0.5)
    with served.connect() as sock:
        sock.sendall(_head("100") + b'{"goal"')
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408") and b"within 0.5 seconds" in answer


# serve and workers ---------------------------------------------------------------------


def test_serve_with_autostart_0_starts_no_worker(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import desktop_agent.httpapi.app as app_module
    from desktop_agent.cli.serve import cmd_serve

    made: dict[str, Any] = {}
    real = app_module.create_app

    def spy(*args: Any, **kwargs: Any) -> Starlette:
        made.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module, "create_app", spy)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    monkeypatch.setenv("DESKTOP_AGENT_AUTOSTART_WORKER", "0")
    args = argparse.Namespace(db=str(client.db_path), port=0)
    assert cmd_serve(args, None) == 0  # type: ignore[arg-type]
    assert made["start_workers"] is False
    monkeypatch.setenv("DESKTOP_AGENT_AUTOSTART_WORKER", "1")
    cmd_serve(args, None)  # type: ignore[arg-type]
    assert made["start_workers"] is True


def test_requests_start_one_worker_for_the_folder_not_one_each(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[int] = []

    def spawn(self: Client, *, until_idle: bool = False, nice: int = 0) -> int:
        spawned.append(os.getpid())  # a live process that has not registered as a worker yet
        return os.getpid()

    monkeypatch.setattr(Client, "spawn_worker", spawn)
    app = create_app(client.db_path, TOKEN, start_workers=True)
    with TestClient(app, base_url="http://127.0.0.1", headers=AUTH) as http:
        results: list[int] = []

        def post() -> None:
            results.append(http.post("/v1/runs", json={"goal": "X", "model": "demo"}).status_code)

        threads = [threading.Thread(target=post) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        post()
    assert results == [202] * 4
    assert len(spawned) == 1
