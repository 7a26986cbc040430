"""The schema, declared once: SQLAlchemy Core tables on one :data:`metadata`.

Every query of ``persistence`` is built from these objects (or compiled from them, on the
journal's hot path), and every row is read by the names declared here: a column renamed
here and not in the migrations fails ``tests/persistence/test_schema.py``; one renamed in a
query fails when the module builds the query, at import.

Why Core tables rather than SQLModel classes: the store maps rows to the frozen dataclasses
of ``domain`` (a :class:`~desktop_agent.domain.Run`, not a ``RunRow``), builds its
statements itself (conditional updates that fence a lease, ``CASE`` expressions, journal
inserts compiled once for the hot path) and never loads or flushes objects through a
session. SQLModel's value is a pydantic model that is also an ORM class; none of that is
used here, while its defaults were in the way of declaring what the migrations create
(``str`` becomes ``VARCHAR`` where the migrations have ``TEXT``, Python-side defaults
instead of the server defaults that rows inserted by older releases rely on). A
``Table`` says exactly the DDL, and its columns (``runs.c.status``) are what select, insert
and update take.

The declaration is what the migrations produce, column for column: type, nullability,
server default, primary keys, foreign keys and index names. The migrations are what users'
databases have, so they win; a change of schema is a new migration and the same change
here, and the test compares the two.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
)

metadata = MetaData()
"""Every table of the database (Alembic's ``target_metadata``)."""


def _text(name: str, default: str | None = None) -> Column[str]:
    """A non-null TEXT column, with a server default when rows may omit it."""
    return Column(name, Text(), nullable=False, server_default=default)


def _count(name: str, default: str = "0") -> Column[int]:
    """A non-null INTEGER counter (``0`` unless set)."""
    return Column(name, Integer(), nullable=False, server_default=default)


def _amount(name: str, default: str = "0") -> Column[float]:
    """A non-null FLOAT total (``0`` unless set)."""
    return Column(name, Float(), nullable=False, server_default=default)


def _time(name: str, *, nullable: bool = False) -> Column[float]:
    """A time, in seconds since the epoch."""
    return Column(name, Float(), nullable=nullable)


def _tokens() -> list[Column[int]]:
    """Token counts of a model call (input, output, cache writes, cache reads)."""
    return [
        _count("input_tokens"),
        _count("output_tokens"),
        _count("cache_write_tokens"),
        _count("cache_read_tokens"),
    ]


# --------------------------------------------------------------------------- journal
# Migration 0001, and 0003 for ``runs.lease_epoch`` and ``run_events``, 0006 for forks.

runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    _text("goal"),
    _text("title", ""),
    Column("status", String(32), nullable=False),
    Column("wait_reason", String(32)),
    _time("wake_at", nullable=True),
    _text("status_message", ""),
    Column("attention_seq", Integer()),
    _text("spec"),
    Column("definition_hash", String(64), nullable=False),
    _text("workspace"),
    _text("budget", "{}"),
    _time("created_at"),
    _time("updated_at"),
    _time("started_at", nullable=True),
    _time("finished_at", nullable=True),
    _count("last_seq"),
    _amount("cost_usd"),
    *_tokens(),
    _amount("active_seconds"),
    Column("lease_owner", String(128)),
    _time("lease_expires_at", nullable=True),
    Column("parent_id", String(64)),
    Column("schedule_id", String(64)),
    _count("lease_epoch"),
    Column("placement", String(200), nullable=False, server_default="any"),
    Column("forked_from", String(64)),
    Column("forked_at_seq", Integer()),
    Index("ix_runs_status", "status"),
    Index("ix_runs_wake_at", "wake_at"),
    Index("ix_runs_updated_at", "updated_at"),
    Index("ix_runs_lease_owner", "lease_owner"),
    Index("ix_runs_schedule_id", "schedule_id"),
    Index("ix_runs_parent_id", "parent_id"),
    Index("ix_runs_forked_from", "forked_from"),
)
"""A run and its running totals; ``lease_epoch`` is the fencing token (one more per claim).

``parent_id`` is the batch a run belongs to; ``forked_from`` and ``forked_at_seq`` (migration
0006) the run a fork shares its first ``forked_at_seq`` steps with (0: a "run again", which
shares none). See :mod:`desktop_agent.persistence.forks`."""

steps = Table(
    "steps",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id"), primary_key=True),
    Column("seq", Integer(), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("name", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("effect", String(16)),
    _count("attempt", "1"),
    Column("input", Text()),
    Column("output", Text()),
    Column("error", Text()),
    _text("partial_text", ""),
    Column("salvaged", Text()),
    *_tokens(),
    _amount("cost_usd"),
    _time("started_at"),
    _time("finished_at", nullable=True),
)
"""One journal record, keyed ``(run_id, seq)``."""

snapshots = Table(
    "snapshots",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id"), primary_key=True),
    Column("seq", Integer(), nullable=False),
    _text("state"),
    _time("created_at"),
)
"""The newest fold of a run's scalars (one row per run, replaced in place)."""

commands = Table(
    "commands",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("payload", Text()),
    _time("created_at"),
    _time("applied_at", nullable=True),
    _text("result", ""),
    Index("ix_commands_run_id", "run_id"),
    Index("ix_commands_applied_at", "applied_at"),
)
"""A request from the GUI or CLI, applied by the worker."""

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(100), primary_key=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False),
    Column("seq", Integer(), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("arguments", Text()),
    Column("state", String(32), nullable=False),
    _text("reason", ""),
    _text("rule", ""),
    Column("decided_arguments", Text()),
    _text("decision_note", ""),
    _time("deadline", nullable=True),
    Column("default_action", String(16), nullable=False, server_default="reject"),
    _time("created_at"),
    _time("decided_at", nullable=True),
    Index("ix_approvals_run_id", "run_id"),
    Index("ix_approvals_state", "state"),
)
"""An approval request and its decision."""

workers = Table(
    "workers",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer(), nullable=False),
    _amount("proc_started_at"),
    _time("started_at"),
    _time("heartbeat_at"),
    _time("stopped_at", nullable=True),
)
"""A worker process and its heartbeat."""

run_events = Table(
    "run_events",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False),
    Column("seq", Integer()),
    Column("kind", String(32), nullable=False),
    _text("message", ""),
    Column("data", Text()),
    _time("created_at"),
    Index("ix_run_events_run_id", "run_id"),
)
"""Something that happened to a run outside its journal."""

# --------------------------------------------------------------------------- scheduling
# Migration 0002.

schedules = Table(
    "schedules",
    metadata,
    Column("id", String(64), primary_key=True),
    _text("name", ""),
    _text("template"),
    Column("cron", String(200)),
    _time("every_s", nullable=True),
    Column("timezone", String(64), nullable=False, server_default=""),
    Column("overlap", String(16), nullable=False, server_default="skip"),
    Column("paused", Boolean(), nullable=False, server_default=false()),
    _time("created_at"),
    _time("updated_at"),
    _time("last_fire_at", nullable=True),
    _count("fire_count"),
    _count("skipped"),
    _count("queued"),
    Column("last_run_id", String(64)),
    _text("last_result", ""),
    _count("version"),
)
"""A run template started on a cron expression or an interval."""

batches = Table(
    "batches",
    metadata,
    Column("id", String(64), primary_key=True),
    _text("template"),
    _text("source", ""),
    _count("concurrency", "4"),
    _count("total"),
    Column("from_folder", Boolean(), nullable=False, server_default=false()),
    _time("created_at"),
)
"""One goal template over a list of items."""

batch_items = Table(
    "batch_items",
    metadata,
    Column("batch_id", String(64), ForeignKey("batches.id"), primary_key=True),
    Column("idx", Integer(), primary_key=True),
    _text("item"),
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("run_id", String(64)),
    _count("attempts"),
    _time("updated_at"),
    Index("ix_batch_items_status", "status"),
    Index("ix_batch_items_run_id", "run_id"),
)
"""One item of a batch, with its current run (its durable progress)."""

watches = Table(
    "watches",
    metadata,
    Column("id", String(64), primary_key=True),
    _text("folder"),
    Column("pattern", String(200), nullable=False, server_default="*"),
    _text("template"),
    _amount("scan_s", "10"),
    Column("paused", Boolean(), nullable=False, server_default=false()),
    _time("created_at"),
    _time("updated_at"),
    _count("version"),
)
"""A folder whose new files each start a run."""

seen_files = Table(
    "seen_files",
    metadata,
    Column("watch_id", String(64), ForeignKey("watches.id"), primary_key=True),
    Column("path", Text(), primary_key=True),
    Column("size", BigInteger(), primary_key=True),
    Column("mtime_ns", BigInteger(), primary_key=True),
    Column("run_id", String(64)),
    _time("seen_at"),
)
"""A file a watch has already started a run for (path, size and mtime)."""

run_alerts = Table(
    "run_alerts",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id"), primary_key=True),
    Column("kind", String(32), primary_key=True),
    _time("since"),
    _time("raised_at"),
    _text("message", ""),
    _time("cleared_at", nullable=True),
)
"""Something wrong with a run that is not a status: for now, a stuck run."""

# --------------------------------------------------------------------------- search
# Migration 0004. The full-text index itself (``search_fts``, an FTS5 virtual table over
# ``search_docs.body``, and its triggers) is SQLite DDL that Core does not declare; see
# :mod:`desktop_agent.persistence.search`.

search_docs = Table(
    "search_docs",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("seq", Integer(), nullable=False),
    Column("source", String(16), nullable=False),
    Column("kind", String(32), nullable=False),
    _text("tool", ""),
    _time("at"),
    _text("body"),
    Index("ix_search_docs_run_id_seq", "run_id", "seq"),
)
"""The searchable text of a step, a run's goal or an approval (kept after archiving)."""

search_runs = Table(
    "search_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    _text("goal", ""),
    _text("title", ""),
    Column("status", String(32), nullable=False),
    _text("model", ""),
    _amount("cost_usd"),
    Column("schedule_id", String(64)),
    Column("batch_id", String(64)),
    _time("created_at"),
    _count("indexed_seq"),
    _amount("seen_updated_at"),
    Column("archived", Boolean(), nullable=False, server_default=false()),
    Column("first_doc_id", Integer()),
    Column("last_doc_id", Integer()),
)
"""What search filters on, per run (kept after archiving), and how far it is indexed.
``first_doc_id``/``last_doc_id`` (migration 0007): the lowest and highest ``search_docs.id``
ever indexed for the run (other runs' documents may lie between)."""

search_hours = Table(
    "search_hours",
    metadata,
    Column("hour", Integer(), primary_key=True, autoincrement=False),
    Column("first_id", Integer(), nullable=False),
    Column("last_id", Integer(), nullable=False),
)
"""Migration 0007. The lowest and highest ``search_docs.id`` ever indexed per hour of
``search_docs.at`` (``CAST(at / 3600 AS INTEGER)``), kept by a trigger on SQLite: a date
window becomes a range of ids the FTS5 index seeks to."""

# --------------------------------------------------------------------------- models
# Migration 0009.

model_catalogue = Table(
    "model_catalogue",
    metadata,
    Column("id", String(128), primary_key=True),
    _count("position"),
    Column("data", Text(), nullable=False),
    _time("read_at"),
)
"""The API's catalogue of models (``GET /v1/models``) as a worker last read it."""

# --------------------------------------------------------------------------- spend
# Migration 0010.

spend_reservations = Table(
    "spend_reservations",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("token", String(32), nullable=False),
    Column("amount_usd", Float(), nullable=False),
    _time("reserved_at"),
)
"""The worst case of each run's model call in flight, held against the monthly cap."""

# --------------------------------------------------------------------------- batches
# Migration 0012.

batch_requests = Table(
    "batch_requests",
    metadata,
    Column("custom_id", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False, index=True),
    _count("seq"),
    _count("attempt", "1"),
    Column("model", String(128), nullable=False),
    Column("betas", String(400), nullable=False, server_default=""),
    Column("params", Text(), nullable=False),
    Column("state", String(16), nullable=False, server_default="queued", index=True),
    Column("submission", String(32), index=True),
    Column("batch_id", String(64), index=True),
    Column("result", Text()),
    _time("queued_at"),
    _time("submitted_at", nullable=True),
    _time("ended_at", nullable=True),
    _time("consumed_at", nullable=True),
)
"""One model turn of an economy-mode run as a request of a Message Batch.

``custom_id`` (``RUNID-SEQ-ATTEMPT``) is the request's name in the batch and the row's key:
queued once, however often the run's activation asks. ``state``: ``queued`` (waiting for
the next batch), ``submitting`` (handed to the API under ``submission``, the batch's id not
yet known), ``submitted``, then the result's type (``succeeded``, ``errored``, ``expired``,
``canceled``), or ``withdrawn`` (its run ended before it was sent). ``consumed_at``: when
the run's step took the result."""

message_batches = Table(
    "message_batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("submission", String(32), index=True),
    Column("status", String(16), nullable=False, server_default="in_progress"),
    _count("requests"),
    Column("suspect", Boolean(), nullable=False, server_default=false()),
    Column("results_read", Boolean(), nullable=False, server_default=false(), index=True),
    _time("created_at"),
    _time("next_poll_at"),
    _count("polls"),
    _time("ended_at", nullable=True),
)
"""The Message Batches the workers created (or, ``suspect``, found in the API's list while
settling a submission whose answer was lost), polled until they end and their results
are read."""

# --------------------------------------------------------------------------- annotations
# Migration 0013. The analyst's own: never part of a journal, never sent to the model.

run_tags = Table(
    "run_tags",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id"), primary_key=True),
    Column("tag", String(40), primary_key=True),
    Index("ix_run_tags_tag", "tag"),
)
"""A tag of a run (lowercase; see :mod:`desktop_agent.domain.tags`)."""

step_notes = Table(
    "step_notes",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id"), nullable=False),
    Column("seq", Integer(), nullable=False),
    _text("text"),
    _time("created_at"),
    Index("ix_step_notes_run_id_seq", "run_id", "seq"),
)
"""The analyst's note on step ``seq`` of a run (the analyst's, never the agent's)."""

# --------------------------------------------------------------------------- Agent SDK
# Migration 0014. Sessions of the Claude Agent SDK, kept in the journal's database.

sdk_session_entries = Table(
    "sdk_session_entries",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=True),
    _text("project_key"),
    _text("session_id"),
    _text("subpath", ""),
    Column("uuid", Text()),
    _text("entry"),
    Column("mtime_ms", BigInteger(), nullable=False),
    Index("ix_sdk_session_entries_key", "project_key", "session_id", "subpath", "id"),
    Index(
        "ux_sdk_session_entries_uuid",
        "project_key",
        "session_id",
        "subpath",
        "uuid",
        unique=True,
    ),
)
"""One transcript line of an Agent SDK session (the SDK's ``SessionStore``), in append order.

A session is ``(project_key, session_id)``; ``subpath`` is "" for its main transcript, else
a sub-agent's (``subagents/agent-ID``). ``uuid`` (the entry's own, when it has one) makes an
append idempotent: the same line sent twice is kept once (entries without one are never
duplicates of each other). ``entry`` is the line as JSON, never read by the app beyond its
``uuid``; ``mtime_ms`` when it was stored, in milliseconds since the epoch."""
