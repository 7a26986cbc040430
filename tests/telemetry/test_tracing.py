"""Traces of runs from the journal.

One trace per run across restarts, GenAI attributes, content only when asked, and a real
OTLP/HTTP receiver on loopback.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus
from desktop_agent.worker.tracing import RunTracer, span_id_of, start_tracing, trace_id_of
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

HAIKU = "claude-haiku-4-5"
SECRET = "sk-ant-api03-" + "Tr4c" * 8


def _noting_run(client: Client, make_executor: MakeExecutor, ws: Path) -> str:
    (ws / "notes.md").write_text("")
    run = client.start_run("Note the vendor share", model=HAIKU, workspace=ws)
    replies = [
        Reply(f"Noting {SECRET}.", [("append_note", {"path": "notes.md", "text": "71%"})]),
        Reply("Done."),
    ]
    drain(client.store, make_executor(ScriptedModel(replies)))
    assert client.run(run.id).status == RunStatus.COMPLETED
    return run.id


def test_a_run_is_one_trace_with_a_span_per_step_and_genai_attributes(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run_id = _noting_run(client, make_executor, workspace)
    exporter = InMemorySpanExporter()
    tracer = RunTracer(client.store, exporter, batch=False)
    assert tracer.tick() == client.run(run_id).last_seq + 1  # every step, and the run
    spans = {s.name: s for s in exporter.get_finished_spans()}
    root = spans["run Note the vendor share"]
    assert {s.context.trace_id for s in spans.values()} == {trace_id_of(run_id)}
    assert root.parent is None and root.context.span_id == span_id_of(run_id, 0)
    chat = spans[f"chat {HAIKU}"]
    assert chat.parent is not None and chat.parent.span_id == span_id_of(run_id, 0)
    attrs: Any = chat.attributes
    assert attrs["gen_ai.system"] == "anthropic" and attrs["gen_ai.request.model"] == HAIKU
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["desktop_agent.cost_usd"] > 0
    assert "gen_ai.completion" not in attrs  # content is off by default
    tool: Any = spans["execute_tool append_note"].attributes
    assert (
        tool["gen_ai.tool.name"] == "append_note" and tool["desktop_agent.effect"] == "idempotent"
    )
    assert tool["desktop_agent.idempotency_key"] == f"{run_id}:{tool['desktop_agent.seq']}"
    assert tracer.tick() == 0  # nothing twice
    tracer.close()


def test_content_only_when_asked_and_never_a_key(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    _noting_run(client, make_executor, workspace)
    exporter = InMemorySpanExporter()
    tracer = RunTracer(client.store, exporter, include_content=True, batch=False)
    tracer.tick()
    chat: Any = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat"))
    completion = chat.attributes["gen_ai.completion"]
    assert "Noting [redacted]." in completion and SECRET not in completion
    tracer.close()


def test_a_run_that_waits_and_resumes_elsewhere_stays_one_trace(
    client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "report.md").write_text("old\n")
    run = client.start_run("Rewrite the report", model=HAIKU, workspace=workspace)
    write = Reply("Writing.", [("write_file", {"path": "report.md", "content": "new\n"})])
    executor = make_executor(ScriptedModel([write, Reply("Written.")]))
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.WAITING  # asks before overwriting
    cursor = tmp_path / "traces.json"
    first = InMemorySpanExporter()
    before = RunTracer(client.store, first, cursor, batch=False)
    before.tick()
    before.close()
    (pending,) = client.approvals(ApprovalState.PENDING)
    client.approve(pending.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    second = InMemorySpanExporter()
    after = RunTracer(client.store, second, cursor, batch=False)  # another worker, later
    after.tick()
    after.close()
    spans = [*first.get_finished_spans(), *second.get_finished_spans()]
    assert {s.context.trace_id for s in spans} == {trace_id_of(run.id)}
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids)) == client.run(run.id).last_seq + 1  # each step once
    wait: Any = next(s for s in spans if s.name == "wait approval")
    assert wait.attributes["desktop_agent.wait.reason"] == "approval"
    assert [e.name for e in wait.events] == ["approval.decided"]
    assert [s.name for s in spans].count("run Rewrite the report") == 1


class _Receiver(BaseHTTPRequestHandler):
    got: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        _Receiver.got.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[str]:
    """A real OTLP/HTTP endpoint on loopback (it decodes what it receives)."""
    _Receiver.got = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_spans_reach_a_real_otlp_receiver(
    client: Client, make_executor: MakeExecutor, workspace: Path, receiver: str
) -> None:
    run_id = _noting_run(client, make_executor, workspace)
    tracer = start_tracing(client.store, receiver, False, client.db_path.parent)
    assert tracer is not None
    tracer.close()  # sends what is left
    spans = [
        span
        for request in _Receiver.got
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert {s.trace_id for s in spans} == {trace_id_of(run_id).to_bytes(16, "big")}
    assert len(spans) == client.run(run_id).last_seq + 1
    assert (client.db_path.parent / "traces.json").exists()


def test_a_collector_that_is_down_or_misnamed_never_stops_the_worker(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    _noting_run(client, make_executor, workspace)
    tracer = start_tracing(client.store, "http://127.0.0.1:9", False, client.db_path.parent)
    assert tracer is not None
    tracer.close()  # the export fails, quietly
    assert start_tracing(client.store, "ftp://collector", False, client.db_path.parent) is None
