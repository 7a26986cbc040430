"""The API's routes (see :mod:`desktop_agent.httpapi` and ``docs/openapi.json``).

Starting a run answers ``202 Accepted`` at once with the run's id and its status URL; the
run goes on in a worker (one is started when none is alive, as the CLI does). A script then
polls ``GET /v1/runs/{id}`` or listens to ``GET /v1/runs/{id}/events`` (server-sent events:
``step`` for each finished step, ``status`` when the run's status changes, ``end`` when it
ends; a stream whose token is rotated meanwhile is closed). Commands are the CLI's. Errors
are JSON ``{"error", "code"}`` with a 4xx status: 400 bad input, 401 no or a wrong token
(an old one too, from the moment ``api-token rotate`` returns), 403 a browser's request,
404 no such run or approval, 408 a body too slow to arrive, 409 a command the run's state
refuses, 413 a body too large (limits: :mod:`desktop_agent.httpapi.inputs`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psutil
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from desktop_agent.client.api import Client
from desktop_agent.client.attachments import AttachmentSource
from desktop_agent.client.economy import batch_wait
from desktop_agent.client.estimates import estimate_run
from desktop_agent.client.forecast import forecast_json, run_forecast
from desktop_agent.client.report import report_json, run_report
from desktop_agent.client.shapes import batch_wait_json, run_json, step_json
from desktop_agent.client.views import model_notice
from desktop_agent.domain import Approval, RunStatus, WaitReason
from desktop_agent.domain.errors import (
    DesktopAgentError,
    InvalidInputError,
    InvalidStateError,
    NotFoundError,
)
from desktop_agent.httpapi import attachments as uploads
from desktop_agent.httpapi.auth import FixedToken, TokenCheck
from desktop_agent.httpapi.estimates import estimate_options
from desktop_agent.httpapi.inputs import (
    MAX_INT,
    BodyTooLargeError,
    BodyTooSlowError,
    integer,
    number,
    optional_text,
    parse_object,
    query_int,
    read_body,
    run_options,
    text,
)
from desktop_agent.httpapi.openapi import DESCRIPTION

PAGE = 200
"""Steps per page unless ``limit`` says fewer."""

POLL_S = 0.25
"""How often the event stream reads the journal."""

COMMANDS = ("pause", "resume", "cancel", "stop", "steer", "answer", "budget", "resolve")


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": message, "code": code}, status_code=status)


def approval_json(a: Approval) -> dict[str, Any]:
    """An approval as plain data."""
    return {
        "id": a.id,
        "run_id": a.run_id,
        "seq": a.seq,
        "tool": a.tool,
        "arguments": a.arguments,
        "state": a.state.value,
        "reason": a.reason,
        "rule": a.rule,
        "deadline": a.deadline,
        "created_at": a.created_at,
    }


class Guard(BaseHTTPMiddleware):
    """Token, origin and host checks before any route (see the module's docstring).

    The token is the one ``tokens`` holds now: after a rotation the old one is refused at
    once (:class:`~desktop_agent.httpapi.auth.CurrentToken`).
    """

    def __init__(self, app: Any, tokens: TokenCheck) -> None:
        super().__init__(app)
        self.tokens = tokens

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Refuse what must not reach a route."""
        host = request.headers.get("host", "").rsplit(":", 1)[0]
        if host not in ("127.0.0.1", "localhost", "[::1]"):
            return _error(400, f"unexpected Host {host!r}: this API answers on 127.0.0.1", "host")
        if "origin" in request.headers:
            return _error(403, "browsers may not use this API (it has no CORS access)", "origin")
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if self.tokens.stale():
            await run_in_threadpool(self.tokens.reload)
        if scheme.lower() != "bearer" or not self.tokens.accepts(value):
            response = _error(
                401, "a valid bearer token is needed (desktop-agent api-token show)", "token"
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        return await call_next(request)


def _mapped(exc: Exception) -> JSONResponse:
    if isinstance(exc, BodyTooLargeError):
        return _error(413, str(exc), "too_large")
    if isinstance(exc, BodyTooSlowError):
        return _error(408, str(exc), "timeout")
    if isinstance(exc, NotFoundError):
        return _error(404, str(exc), "not_found")
    if isinstance(exc, InvalidStateError):
        return _error(409, str(exc), "conflict")
    if isinstance(exc, KeyError):
        return _error(400, f"missing {exc.args[0]!r}", "invalid_input")
    if isinstance(exc, InvalidInputError | ValueError | TypeError):
        return _error(400, str(exc), "invalid_input")
    if isinstance(exc, DesktopAgentError):
        return _error(400, str(exc), "error")
    raise exc


async def _body(request: Request) -> dict[str, Any]:
    return parse_object(await read_body(request))


class Api:
    """The routes' handlers over one client (see the module's docstring).

    Args:
        db_path: the database.
        start_workers: start a worker when a request gives runs something to do.
        tokens: the token requests bear (an event stream ends once its token is refused).
    """

    def __init__(self, db_path: Path, start_workers: bool, tokens: TokenCheck) -> None:
        self.db_path = db_path
        self.start_workers = start_workers
        self.tokens = tokens
        self._client: Client | None = None
        self._waking = threading.Lock()
        self._started: psutil.Process | None = None

    @asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        """Open the client at start, close it at the end."""
        self._client = await run_in_threadpool(Client, self.db_path)
        yield
        self._client.close()

    def client(self) -> Client:
        """The client (open while the app runs)."""
        assert self._client is not None
        return self._client

    @staticmethod
    async def call(fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (blocking) in a thread."""
        return await run_in_threadpool(fn)

    async def wake(self) -> None:
        """Start a worker when none is alive (as the CLI does)."""
        if self.start_workers:
            await self.call(self._ensure_worker)

    def _ensure_worker(self) -> None:
        """Start a worker unless one is alive or the one we started still runs.

        Requests at the same time, or before the worker we started has registered, must
        not start a second one for the data folder.
        """
        with self._waking:
            started = self._started
            if started is not None and _running(started):
                return  # ours, maybe not registered yet; it serves the folder
            if self.client().worker_status().alive:
                return
            pid = self.client().spawn_worker()
            try:
                self._started = psutil.Process(pid)
            except psutil.Error:
                self._started = None

    async def start_run(self, request: Request) -> Response:
        """``POST /v1/runs`` (attachments: :mod:`desktop_agent.httpapi.attachments`)."""
        body = await _body(request)
        goal = text(body, "goal")
        workspace, placement = optional_text(body, "workspace"), optional_text(body, "placement")
        options = run_options(body)
        tags = body.get("tags") or []
        if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            raise InvalidInputError("'tags' must be a list of tags")
        files = await self.call(lambda: uploads.decoded(body))

        def start(sources: list[AttachmentSource]) -> tuple[Any, str]:
            c = self.client()
            run = c.start_run(
                goal,
                workspace=workspace,
                placement=placement,
                tags=tags,
                attachments=sources,
                **options,
            )
            return run, model_notice(c)

        run, notice = await self.call(lambda: uploads.with_files(files, start))
        await self.wake()
        url = f"/v1/runs/{run.id}"
        answer = {"id": run.id, "status_url": url, "status": run.status.value}
        if notice:
            answer["notice"] = notice
        return JSONResponse(answer, status_code=202, headers={"Location": url})

    async def list_models(self, request: Request) -> Response:
        """``GET /v1/models``: the models runs can use (``all=true``: retired ones too)."""
        everything = request.query_params.get("all", "").lower() in ("1", "true", "yes")
        models = await self.call(lambda: self.client().models(include_retired=everything))
        return JSONResponse(models.to_json())

    async def list_runs(self, request: Request) -> Response:
        """``GET /v1/runs``."""
        q = request.query_params
        statuses = [RunStatus(s) for s in q.getlist("status")] if "status" in q else None
        limit = query_int(q, "limit", 100, 1, 1000)
        search = q.get("search")
        tags = q.getlist("tag")
        runs = await self.call(
            lambda: self.client().runs(statuses, search=search, limit=limit, tags=tags)
        )
        return JSONResponse([run_json(r) for r in runs])

    async def get_run(self, request: Request) -> Response:
        """``GET /v1/runs/{run_id}``, with its kept forecast and its place in a batch.

        ``batch``: where the turn of a run waiting in a Message Batch is (else null).
        """

        def read() -> tuple[Any, Any, Any]:
            c = self.client()
            run = c.run(request.path_params["run_id"])
            in_batch = run.status == RunStatus.WAITING and run.wait_reason == WaitReason.BATCH
            return run, run_forecast(c, run.id), batch_wait(c, run.id) if in_batch else None

        run, forecast, wait = await self.call(read)
        return JSONResponse(
            {
                **run_json(run),
                "batch": batch_wait_json(wait),
                "forecast": forecast_json(forecast) if forecast else None,
            }
        )

    async def get_report(self, request: Request) -> Response:
        """``GET /v1/runs/{run_id}/report``: its final report, references and cited sentences.

        404 ``no_report`` while the run has none (no report file, no answer yet).
        """
        run_id = request.path_params["run_id"]

        def read() -> tuple[str, Any]:
            c = self.client()
            run = c.run(run_id)
            return run.id, run_report(c, run.id)

        found, report = await self.call(read)
        if report is None:
            return _error(404, f"run {found} has no report yet", "no_report")
        return JSONResponse({"run_id": found, **(report_json(report) or {})})

    async def estimate_run(self, request: Request) -> Response:
        """``POST /v1/runs/estimate``: the forecast of a run, nothing started."""
        options = estimate_options(await _body(request))
        forecast = await self.call(lambda: estimate_run(self.client(), **options))
        return JSONResponse(forecast_json(forecast))

    async def get_steps(self, request: Request) -> Response:
        """``GET /v1/runs/{run_id}/steps``: a page."""
        q = request.query_params
        after = query_int(q, "after_seq", 0, 0, MAX_INT)
        limit = query_int(q, "limit", PAGE, 1, 1000)
        run_id = request.path_params["run_id"]

        def read() -> Any:
            run = self.client().run(run_id)
            return run, self.client().steps(run.id, after + 1, limit + 1)

        run, steps = await self.call(read)
        page = steps[:limit]
        more = len(steps) > limit
        return JSONResponse(
            {
                "run_id": run.id,
                "steps": [step_json(s) for s in page],
                "next_after_seq": page[-1].seq if more and page else None,
            }
        )

    async def command(self, request: Request) -> Response:
        """``POST /v1/runs/{run_id}/{command}``."""
        run_id, verb = request.path_params["run_id"], request.path_params["command"]
        if verb not in COMMANDS:
            return _error(404, f"no command {verb!r}; one of {', '.join(COMMANDS)}", "not_found")
        body = await _body(request)
        run = await self.call(lambda: _carry_out(self.client(), run_id, verb, body))
        await self.wake()
        return JSONResponse({"run_id": run.id, "command": verb, "queued": True}, status_code=202)

    async def list_approvals(self, _request: Request) -> Response:
        """``GET /v1/approvals``."""
        found = await self.call(lambda: self.client().approvals())
        return JSONResponse([approval_json(a) for a in found])

    async def decide(self, request: Request) -> Response:
        """``POST /v1/approvals/{approval_id}/approve|reject``."""
        approval_id, verb = request.path_params["approval_id"], request.path_params["decision"]
        body = await _body(request)
        c = self.client()
        if verb == "approve":
            arguments = body.get("arguments")
            if arguments is not None and not isinstance(arguments, dict):
                raise InvalidInputError("'arguments' must be a JSON object of edited arguments")
            note = "approved through the API" + (" with edits" if arguments else "")
            decided = await self.call(lambda: c.approve(approval_id, arguments, note))
        elif verb == "reject":
            reason = text(body, "reason")
            decided = await self.call(lambda: c.reject(approval_id, reason))
        else:
            return _error(404, f"no decision {verb!r}; approve or reject", "not_found")
        await self.wake()
        # The decision is recorded; the worker carries it out at the run's next step.
        return JSONResponse(
            {"approval_id": decided.id, "run_id": decided.run_id, "decision": verb, "queued": True},
            status_code=202,
        )

    async def events(self, request: Request) -> Response:
        """``GET /v1/runs/{run_id}/events``: server-sent events until the run ends."""
        run = await self.call(lambda: self.client().run(request.path_params["run_id"]))
        token = request.headers.get("authorization", "").partition(" ")[2]
        return StreamingResponse(self._stream(run.id, token), media_type="text/event-stream")

    async def _stream(self, run_id: str, token: str) -> AsyncIterator[str]:
        sent, status, rounds = 0, "", 0
        while True:
            if self.tokens.stale():
                await run_in_threadpool(self.tokens.reload)
            if not self.tokens.accepts(token):
                return  # the token was rotated: a stream opened with it ends too
            current = await self.call(lambda: self.client().run(run_id))
            for step in await self.call(partial(self.client().steps, run_id, sent + 1)):
                if step.finished_at is None:
                    break
                yield f"event: step\ndata: {json.dumps(step_json(step), default=str)}\n\n"
                sent = step.seq
            if current.status.value != status:
                status = current.status.value
                yield f"event: status\ndata: {json.dumps(run_json(current), default=str)}\n\n"
            if current.status.is_terminal and sent >= current.last_seq:
                yield f"event: end\ndata: {json.dumps({'status': status})}\n\n"
                return
            rounds += 1
            if rounds % 60 == 0:
                yield ": still here\n\n"  # a heartbeat keeps proxies from closing it
            await asyncio.sleep(POLL_S)

    async def trigger(self, request: Request) -> Response:
        """``POST /v1/schedules/{schedule_id}/trigger``: a webhook starting a run now."""
        from desktop_agent.client.schedules import Scheduling

        body = await _body(request)
        item = body.get("item")
        if item is not None and not isinstance(item, str):
            raise InvalidInputError("'item' must be a string")
        schedule_id = request.path_params["schedule_id"]
        run = await self.call(lambda: Scheduling(self.client()).trigger(schedule_id, item))
        await self.wake()
        url = f"/v1/runs/{run.id}"
        return JSONResponse(
            {"id": run.id, "status_url": url, "status": run.status.value},
            status_code=202,
            headers={"Location": url},
        )

    @staticmethod
    async def openapi(_request: Request) -> Response:
        """``GET /v1/openapi.json``."""
        return JSONResponse(DESCRIPTION)


def _running(proc: psutil.Process) -> bool:
    """Whether ``proc`` (the same process, not a reused pid) runs and is no zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _carry_out(c: Client, run_id: str, verb: str, body: dict[str, Any]) -> Any:
    """One of :data:`COMMANDS` on ``run_id`` (blocking)."""
    if verb == "steer":
        return c.steer(run_id, text(body, "text"))
    if verb == "answer":
        return c.answer(run_id, text(body, "text"))
    if verb == "resolve":
        return c.resolve(run_id, text(body, "action"))
    if verb == "budget":
        return c.extend_budget(
            run_id,
            cost_usd=number(body, "add_cost_usd", 0.0) or 0.0,
            steps=integer(body, "add_steps") or 0,
            time_s=number(body, "add_time_s", 0.0) or 0.0,
            tokens=integer(body, "add_tokens") or 0,
        )
    simple: dict[str, Callable[[str], Any]] = {
        "pause": c.pause,
        "resume": c.resume,
        "cancel": c.cancel,
        "stop": c.stop,
    }
    return simple[verb](run_id)


def _handled(
    route: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        try:
            return await route(request)
        except Exception as exc:  # mapped to 4xx, or raised on (a 500, our bug)
            return _mapped(exc)

    return wrapped


async def _not_found(_request: Request, _exc: Exception) -> Response:
    return _error(404, "no such endpoint; GET /v1/openapi.json lists them", "not_found")


async def _not_allowed(_request: Request, _exc: Exception) -> Response:
    return _error(405, "this endpoint does not take that method", "method")


def create_app(db_path: Path, token: str | TokenCheck, *, start_workers: bool = True) -> Starlette:
    """The API over the database at ``db_path``, answering requests bearing ``token``.

    ``token`` is a token for the server's life, or a check that follows rotations
    (:class:`~desktop_agent.httpapi.auth.CurrentToken`, what ``desktop-agent serve`` uses).
    """
    tokens = FixedToken(token) if isinstance(token, str) else token
    api = Api(db_path, start_workers, tokens)
    routes = [
        Route("/v1/openapi.json", _handled(api.openapi), methods=["GET"]),
        Route("/v1/runs", _handled(api.start_run), methods=["POST"]),
        Route("/v1/runs/estimate", _handled(api.estimate_run), methods=["POST"]),
        Route("/v1/runs", _handled(api.list_runs), methods=["GET"]),
        Route("/v1/runs/{run_id}", _handled(api.get_run), methods=["GET"]),
        Route("/v1/runs/{run_id}/steps", _handled(api.get_steps), methods=["GET"]),
        Route("/v1/runs/{run_id}/report", _handled(api.get_report), methods=["GET"]),
        Route("/v1/runs/{run_id}/events", _handled(api.events), methods=["GET"]),
        Route("/v1/runs/{run_id}/{command}", _handled(api.command), methods=["POST"]),
        Route("/v1/approvals", _handled(api.list_approvals), methods=["GET"]),
        Route("/v1/models", _handled(api.list_models), methods=["GET"]),
        Route("/v1/schedules/{schedule_id}/trigger", _handled(api.trigger), methods=["POST"]),
        Route("/v1/approvals/{approval_id}/{decision}", _handled(api.decide), methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=api.lifespan,
        exception_handlers={404: _not_found, 405: _not_allowed},
    )
    app.add_middleware(Guard, tokens=tokens)
    return app
