"""The analyst's settings: one typed model, read by the app, the CLI, the worker and the tools.

:class:`Settings` is the only description of a setting's name, type, default and valid
values. The settings file is validated against it once, when it is read
(:meth:`desktop_agent.config.Settings.load`, which keeps a bad file aside and reports
what was wrong); every assignment is validated too, so a value that got in is a valid
one. The engine and the tools read attributes (``settings.smtp_host``), never keys of an
untyped dict.

This module only describes the settings; where they are kept is
:mod:`desktop_agent.config`'s business.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from desktop_agent.domain.errors import InvalidInputError

PALETTES = ("system", "light", "dark")
"""The desktop app's palette choices (``Settings.palette``)."""

HTTP_TIMEOUT_S = 20.0
"""The default wait of the tools' network operations (:mod:`desktop_agent.http_client`)."""
WEB_FETCH_MAX_BYTES = 5_000_000
MODEL_ATTEMPTS = 5
"""The default of ``model_attempts``."""

Positive = Annotated[float, Field(gt=0)]
"""A number above 0 (dollars, seconds, minutes, days)."""
Port = Annotated[int, Field(ge=1, le=65_535)]
Count = Annotated[int, Field(ge=1)]

UNSAFE_DEFAULTS = {"monthly_spend_cap_usd": 0.0}
"""Settings whose default is not a safe stand-in for a value that could not be read.

A spending cap the file states but that cannot be read is not dropped (no cap would let
runs spend without limit): it stands at 0, so nothing is spent until it is fixed."""


def _http_address(value: str, what: str) -> str:
    value = value.strip()
    if value and (
        not value.startswith(("http://", "https://"))
        or any(c.isspace() for c in value)
        or len(value) <= len("https://")
    ):
        raise ValueError(f"{what} must be an http:// or https:// address (or empty)")
    return value


class Settings(BaseModel):
    """The analyst's settings, stored as ``settings.json`` beside the database.

    Attributes:
        default_model: model for new runs.
        default_max_cost_usd: default cost budget of new runs (None: unlimited).
        default_max_steps: default step budget.
        default_max_time_s: default time budget.
        monthly_spend_cap_usd: what all runs together may spend in a calendar month (local
            time; None: no cap; 0: nothing); checked before every model call, like a run's
            budget.
        durability: ``FULL`` or ``NORMAL`` (SQLite ``synchronous``).
        workers: runs executed at once by one worker.
        close_action: what closing the main window does: ``tray`` or ``quit``.
        approval_deadline_s: default deadline of approvals (None: none).
        approval_default: what an expired approval does: ``reject`` or ``approve``.
        ask_unsafe: ask before every tool with an unsafe effect.
        ask_overwrite: ask before a write that overwrites different content.
        webhook_url: where to POST notifications (empty: none).
        notify_needs_user: the desktop app notifies when a run needs the analyst.
        notify_finished: the desktop app notifies when a run finishes.
        notify_failed: the desktop app notifies when a run fails.
        allow_private_fetch: let web_fetch and http_post reach private, loopback and
            link-local addresses.
        http_timeout_s: how long web_fetch and http_post wait for each network operation
            (connect, read, write).
        web_fetch_max_bytes: the most web_fetch reads of one page.
        web_fetch_total_s: the longest web_fetch spends on one page, redirects included.
        web_search: offer Anthropic's server-side web search to runs that list it.
        web_search_max_uses: searches allowed per model call.
        idempotent_post_prefixes: URL prefixes of endpoints that honour the
            ``Idempotency-Key`` header; http_post calls under them are idempotent.
        smtp_host: mail server for send_email (empty: e-mail is not set up).
        smtp_port: its port (none: 465 with ``ssl``, else 587).
        smtp_security: ``starttls``, ``ssl`` or ``none``.
        smtp_username: login name (the password is in the OS keyring, service
            ``desktop-agent``, user ``smtp-password``; never in this file).
        smtp_from: sender address.
        smtp_timeout_s: how long send_email waits for the mail server.
        imap_host: IMAP server used to look for sent mail after a crash (empty: none).
        imap_port: its port (none: 993 with ``ssl``, else 143).
        imap_security: ``ssl``, ``starttls`` or ``none``.
        imap_username: login name (default: ``smtp_username``).
        imap_sent_folder: folder holding sent mail.
        imap_timeout_s: how long the look for sent mail waits for the IMAP server.
        model_attempts: how many failed attempts in a row of a model call are retried
            before the run asks the analyst.
        notify_stall_minutes: notify when a running run makes no progress this long
            (the scheduler also flags such runs as stuck).
        retention_days: archive runs finished longer ago than this into a compressed
            file beside the database, and remove them from it (None: keep everything).
        fallback_model: model used after repeated overload (empty: none).
        compaction_threshold: fraction of the context window that triggers compaction.
        prompt_cache_ttl: how long a run's prompt cache is written for: ``auto`` (an hour
            for runs that can wait for the analyst or a timer, else five minutes), ``5m``
            or ``1h``. The hour costs 2x input instead of 1.25x and pays back after a wait
            longer than five minutes (figures: bench/README.md, cache share).
        batch_window_s: economy mode: how long a queued turn waits for others to share
            its Message Batch (the first one queued is sent this long after it was).
        batch_poll_s: economy mode: the first look at a batch's status after it was sent;
            later looks wait longer each time, up to ten minutes.
        batch_doubt_s: economy mode: a batch a worker was sending when it died is looked
            for in the API's list of batches this long after (never sent twice).
        palette: the desktop app's colors: ``system`` (follow the desktop), ``light`` or
            ``dark``.
        mcp_servers: MCP servers whose tools runs may use: ``{"name", "command", "args",
            "env"}`` (stdio) or ``{"name", "url", "headers"}`` (Streamable HTTP), with
            optional ``effects`` (per-tool ``read_only``/``idempotent``/``unsafe``) and
            ``timeout_s``; ``env`` and ``headers`` values ``keyring:NAME`` are secrets kept
            in the OS keyring (each entry is checked by :mod:`desktop_agent.tools.mcp`).
        shared_paths: folders every worker can reach (a shared mount): on PostgreSQL, a
            run whose workspace lies under one may run on any worker, else only on the
            workers of the machine that started it.
        otel_endpoint: an OpenTelemetry collector's OTLP/HTTP address (e.g.
            ``http://127.0.0.1:4318``): workers send a trace of every run there (empty:
            no tracing).
        otel_include_content: traces carry prompts, answers and tool results (cut and
            redacted); off by default.
        claude_code_watch: workers import Claude Code's new and grown sessions by
            themselves, every half minute (as ``desktop-agent import claude-code`` does).

    Names the model does not know are kept (and written back when the settings are
    saved), so a file written by a newer version loses nothing here.
    """

    model_config = ConfigDict(
        validate_assignment=True,
        validate_default=True,
        extra="allow",
        allow_inf_nan=False,
        str_strip_whitespace=False,
    )

    default_model: Annotated[str, Field(min_length=1, pattern=r"^\S+$")] = "demo"
    default_max_cost_usd: Positive | None = 5.0
    default_max_steps: Count | None = 200
    default_max_time_s: Positive | None = None
    monthly_spend_cap_usd: Annotated[float, Field(ge=0)] | None = None
    durability: Literal["FULL", "NORMAL"] = "FULL"
    workers: Annotated[int, Field(ge=1, le=256)] = 8
    close_action: Literal["tray", "quit"] = "tray"
    approval_deadline_s: Positive | None = None
    approval_default: Literal["reject", "approve"] = "reject"
    ask_unsafe: bool = True
    ask_overwrite: bool = True
    webhook_url: str = ""
    notify_needs_user: bool = True
    notify_finished: bool = True
    notify_failed: bool = True
    allow_private_fetch: bool = False
    http_timeout_s: Positive = HTTP_TIMEOUT_S
    web_fetch_max_bytes: Count = WEB_FETCH_MAX_BYTES
    web_fetch_total_s: Positive = 60.0
    web_search: bool = False
    web_search_max_uses: Count = 5
    idempotent_post_prefixes: list[str] = Field(default_factory=list)
    smtp_host: str = ""
    smtp_port: Port | None = None
    smtp_security: Literal["starttls", "ssl", "none"] = "starttls"
    smtp_username: str = ""
    smtp_from: str = ""
    smtp_timeout_s: Positive = 30.0
    imap_host: str = ""
    imap_port: Port | None = None
    imap_security: Literal["ssl", "starttls", "none"] = "ssl"
    imap_username: str = ""
    imap_sent_folder: str = "Sent"
    imap_timeout_s: Positive = 30.0
    model_attempts: Annotated[int, Field(ge=1, le=100)] = MODEL_ATTEMPTS
    notify_stall_minutes: Positive = 30.0
    retention_days: Positive | None = None
    fallback_model: Annotated[str, Field(pattern=r"^\S*$")] = ""
    compaction_threshold: Annotated[float, Field(gt=0, le=1)] = 0.8
    prompt_cache_ttl: Literal["auto", "5m", "1h"] = "auto"
    batch_window_s: Positive = 10.0
    batch_poll_s: Positive = 30.0
    batch_doubt_s: Positive = 600.0
    palette: Literal["system", "light", "dark"] = "system"
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    shared_paths: list[str] = Field(default_factory=list)
    otel_endpoint: str = ""
    otel_include_content: bool = False
    claude_code_watch: bool = False

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, value: str) -> str:
        return _http_address(value, "the webhook")

    @field_validator("otel_endpoint")
    @classmethod
    def _otel(cls, value: str) -> str:
        return _http_address(value, "the OpenTelemetry endpoint")

    @model_validator(mode="before")
    @classmethod
    def _lift(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = cls.lift_extra(data)
        for name in secret_names(data):  # never kept, so never written back
            del data[name]
        return data

    @classmethod
    def lift_extra(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Files of older versions kept engine knobs under ``extra``: lift the known ones."""
        if not isinstance(data.get("extra"), dict):
            return dict(data)
        data = dict(data)
        extra = dict(data.pop("extra"))
        for name in list(extra):
            if name in cls.model_fields and name not in data:
                data[name] = extra.pop(name)
        if extra:
            data["extra"] = extra
        return data

    def updated(self, changes: Mapping[str, Any]) -> Self:
        """A copy with ``changes``, checked as a file is (the original is left as it is).

        Raises:
            InvalidInputError: a changed value does not fit its setting (named).
        """
        try:
            return self.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            raise InvalidInputError(explain(exc)) from None

    def unknown_names(self) -> list[str]:
        """Names in the file that no setting has (kept and saved back, not used)."""
        return sorted(self.model_extra or {})


_SECRET_WORDS = ("password", "secret", "token", "api_key", "apikey", "credential")


def secret_names(data: Mapping[str, Any]) -> list[str]:
    """Names in ``data`` that are no setting and look like secrets (``smtp_password``).

    Secrets live in the OS keyring; one written into the settings file by hand is not
    used, and not kept: the file loses it the next time the settings are saved.
    """
    return sorted(
        name
        for name in data
        if name not in Settings.model_fields
        and any(word in name.lower().replace("-", "_") for word in _SECRET_WORDS)
    )


def explain(exc: ValidationError) -> str:
    """What was wrong, one clause per setting (``name: why``)."""
    parts = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(p) for p in error["loc"]) or "settings"
        parts.append(f"{name}: {error['msg']}")
    return "; ".join(parts)


def field_names() -> tuple[str, ...]:
    """Every setting's name, in the model's order."""
    return tuple(Settings.model_fields)
