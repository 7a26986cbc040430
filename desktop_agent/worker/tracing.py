"""OpenTelemetry traces of runs, written from the journal after the fact (off by default).

Turned on by the ``otel_endpoint`` setting (an OTLP/HTTP collector, e.g.
``http://127.0.0.1:4318``). One trace per run; one span per step, following the GenAI
semantic conventions (model calls ``chat MODEL`` with the model and token counts, tool
calls ``execute_tool NAME`` with the tool, effect class and idempotency key, plus the
cost); waits (approval, timer, question, budget) as ``wait REASON`` spans from intent to
outcome; the analyst's decisions as span events; the run itself as the root span, sent
once it has ended.

Why from the journal, after the fact, rather than from inside the engine: the engine
imports nothing but the domain (no telemetry SDK), the journal already holds every step's
start and end times, and reading it in a thread of the worker a few times a second costs
the step's commit nothing (see ``bench/trace_bench.py``). A run that hibernates for a
week and resumes on another worker is still one trace: the trace id and every span id are
derived from the run id and the step's number (a hash), not drawn at random, so every
worker, before and after any restart, puts the same step in the same place. The tracer
remembers how far it has sent each run in a small file beside the database
(``traces.json``); after a crash it may send a few spans again, with the same ids, which
collectors treat as one.

Prompts, model text and tool results are left out unless ``otel_include_content`` is on;
then they are cut to :data:`CONTENT_CHARS` and pass through the same redaction as
archives (anything shaped like an API key is replaced).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from desktop_agent.domain import Run, RunStatus, Step, StepKind, StepStatus
from desktop_agent.persistence import readmodels
from desktop_agent.persistence.redaction import redact
from desktop_agent.persistence.store import SqlStore

log = logging.getLogger(__name__)

CURSOR_FILE = "traces.json"
"""Beside the database: how far each run's spans were sent."""

CONTENT_CHARS = 4_000
"""The most characters of a prompt, answer or tool result put on a span."""

INTERVAL_S = 2.0
"""How often the journal is read for new steps."""

_WAITS = {
    StepKind.APPROVAL: "approval",
    StepKind.SLEEP: "timer",
    StepKind.QUESTION: "question",
    StepKind.BUDGET: "budget",
}


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def trace_id_of(run_id: str) -> int:
    """The run's trace id: 128 bits of a hash of its id."""
    return int.from_bytes(hashlib.sha256(f"trace:{run_id}".encode()).digest()[:16], "big") or 1


def span_id_of(run_id: str, seq: int) -> int:
    """A step's span id (``seq`` 0: the run's root span): 64 bits of a hash."""
    return int.from_bytes(hashlib.sha256(f"span:{run_id}:{seq}".encode()).digest()[:8], "big") or 1


def _ids() -> Any:
    """An id generator handing out the ids the tracer chose (see the module)."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class Chosen(RandomIdGenerator):
        trace_id = 1
        span_id = 1

        def generate_trace_id(self) -> int:
            return self.trace_id

        def generate_span_id(self) -> int:
            return self.span_id

        def is_trace_id_random(self) -> bool:
            return False

    return Chosen()


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    result: str = redact(text[:CONTENT_CHARS])
    return result


class RunTracer:
    """Sends runs' steps as spans (see the module's docstring).

    Args:
        store: the journal.
        exporter: where spans go (an ``OTLPSpanExporter``; tests pass an in-memory one).
        cursor_path: the file remembering how far each run was sent (None: in memory).
        include_content: put prompts, answers and tool results on the spans.
        batch: export in the background (False: at each :meth:`tick`, for tests).
    """

    def __init__(
        self,
        store: SqlStore,
        exporter: Any,
        cursor_path: Path | None = None,
        *,
        include_content: bool = False,
        batch: bool = True,
    ) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        self.store = store
        self.include_content = include_content
        self.cursor_path = cursor_path
        self._ids = _ids()
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": "desktop-agent"}), id_generator=self._ids
        )
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("desktop_agent")
        self.sent: dict[str, int] = {}
        """Run → the last step sent (``-1``: the run's root span was sent too)."""
        self._since = 0.0
        self._load()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ cursor

    def _load(self) -> None:
        if self.cursor_path is None or not self.cursor_path.exists():
            return
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self.cursor_path.read_text(encoding="utf-8"))
            self.sent = {str(k): int(v) for k, v in data.get("sent", {}).items()}
            self._since = float(data.get("since", 0.0))

    def _save(self) -> None:
        if self.cursor_path is None:
            return
        tmp = self.cursor_path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({"since": self._since, "sent": self.sent}))
            os.replace(tmp, self.cursor_path)

    # ------------------------------------------------------------------ reading

    def tick(self, now: float | None = None) -> int:
        """Send the steps finished since the last tick; returns how many spans were made."""
        now = time.time() if now is None else now
        made = 0
        for run in readmodels.runs_since(self.store.db, self._since - 60.0, 10_000):
            made += self._trace(run)
        self._since = now
        self._save()
        return made

    def _trace(self, run: Run) -> int:
        done = self.sent.get(run.id, 0)
        if done < 0:  # the whole run was sent
            return 0
        made = 0
        for step in self.store.load_steps(run.id, done + 1):
            if step.status == StepStatus.STARTED:
                break  # the steps after an open one wait for it
            self._step_span(run, step)
            done, made = step.seq, made + 1
        self.sent[run.id] = done
        if run.status.is_terminal and done >= run.last_seq:
            self._root_span(run)
            self.sent[run.id] = -1
            made += 1
        return made

    # ------------------------------------------------------------------ spans

    def _parent(self, run: Run) -> Any:
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        root = SpanContext(
            trace_id_of(run.id),
            span_id_of(run.id, 0),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return trace.set_span_in_context(NonRecordingSpan(root))

    def _step_span(self, run: Run, step: Step) -> None:
        from opentelemetry.trace import Status, StatusCode

        name, attributes = self._describe(run, step)
        self._ids.span_id = span_id_of(run.id, step.seq)
        span = self.tracer.start_span(
            name,
            context=self._parent(run),
            start_time=_ns(step.started_at),
            attributes=attributes,
        )
        if step.kind == StepKind.APPROVAL and isinstance(step.output, dict):
            decided = {f"desktop_agent.approval.{k}": str(v) for k, v in step.output.items()}
            span.add_event("approval.decided", decided, _ns(step.finished_at or step.started_at))
        if step.status == StepStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, _cut(step.error or "failed")))
        span.end(end_time=_ns(step.finished_at or step.started_at))

    def _describe(self, run: Run, step: Step) -> tuple[str, dict[str, Any]]:
        attrs: dict[str, Any] = {
            "desktop_agent.run_id": run.id,
            "desktop_agent.seq": step.seq,
            "desktop_agent.idempotency_key": step.idempotency_key,
            "desktop_agent.attempt": step.attempt,
        }
        if step.kind == StepKind.MODEL_CALL:
            u = step.usage
            attrs.update(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "anthropic",
                    "gen_ai.request.model": step.name,
                    "gen_ai.usage.input_tokens": u.input_tokens,
                    "gen_ai.usage.output_tokens": u.output_tokens,
                    "desktop_agent.cache_read_tokens": u.cache_read_tokens,
                    "desktop_agent.cache_write_tokens": u.cache_write_tokens,
                    "desktop_agent.cost_usd": step.cost_usd,
                }
            )
            if self.include_content and step.output is not None:
                attrs["gen_ai.completion"] = _cut(step.output)
            return f"chat {step.name}", attrs
        if step.kind == StepKind.TOOL_CALL:
            attrs.update(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": step.name,
                    "desktop_agent.effect": step.effect.value if step.effect else "",
                }
            )
            if self.include_content:
                attrs["gen_ai.tool.call.arguments"] = _cut(step.input)
                attrs["gen_ai.tool.call.result"] = _cut(step.output)
            return f"execute_tool {step.name}", attrs
        reason = _WAITS.get(step.kind)
        if reason is not None:
            if step.kind == StepKind.SLEEP and isinstance(step.input, dict):
                reason = str(step.input.get("reason") or reason)
            attrs["desktop_agent.wait.reason"] = reason
            return f"wait {reason}", attrs
        return f"{step.kind.value} {step.name}", attrs

    def _root_span(self, run: Run) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._ids.trace_id = trace_id_of(run.id)
        self._ids.span_id = span_id_of(run.id, 0)
        u = run.usage
        span = self.tracer.start_span(
            f"run {run.title or run.goal}"[:120],
            context=None,
            start_time=_ns(run.started_at or run.created_at),
            attributes={
                "desktop_agent.run_id": run.id,
                "desktop_agent.status": run.status.value,
                "gen_ai.request.model": run.model,
                "gen_ai.usage.input_tokens": u.input_tokens,
                "gen_ai.usage.output_tokens": u.output_tokens,
                "desktop_agent.cost_usd": run.cost_usd,
                "desktop_agent.steps": run.last_seq,
            },
        )
        if run.status == RunStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, _cut(run.status_message or "failed")))
        span.end(end_time=_ns(run.finished_at or run.updated_at))

    # ------------------------------------------------------------------ life

    def start(self, interval_s: float = INTERVAL_S) -> None:
        """Read the journal in a thread of its own every ``interval_s`` seconds."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.tick()
                except Exception:  # the tracer never takes the worker down
                    log.warning("tracing: reading the journal failed", exc_info=True)

        self._thread = threading.Thread(target=loop, name="tracing", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Send what is left and stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(Exception):
            self.tick()
        self.provider.shutdown()


def start_tracing(
    store: SqlStore, endpoint: str, include_content: bool, data_dir: Path
) -> RunTracer | None:
    """A running tracer exporting to ``endpoint`` (OTLP/HTTP), or None when it cannot start."""
    if not endpoint:
        return None
    if not endpoint.startswith(("http://", "https://")):
        log.error("tracing is off: otel_endpoint %r must be an http:// or https:// URL", endpoint)
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.error("tracing is set up but OpenTelemetry is not installed: %s", _INSTALL)
        return None
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=10)
    tracer = RunTracer(
        store, exporter, data_dir / CURSOR_FILE, include_content=include_content, batch=True
    )
    tracer.start()
    log.info("tracing runs to %s", endpoint)
    return tracer


_INSTALL = "pip install 'desktop-agent[otel]'"
