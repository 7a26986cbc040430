"""SQLModel tables. Rows never leave ``persistence``: the store maps them to domain objects."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index
from sqlmodel import Field, SQLModel


class RunRow(SQLModel, table=True):
    """A run and its running totals."""

    __tablename__ = "runs"

    id: str = Field(primary_key=True, max_length=64)
    goal: str
    title: str = ""
    status: str = Field(index=True, max_length=32)
    wait_reason: str | None = Field(default=None, max_length=32)
    wake_at: float | None = Field(default=None, index=True)
    status_message: str = ""
    attention_seq: int | None = None
    spec: str
    definition_hash: str = Field(max_length=64)
    workspace: str
    budget: str = "{}"
    created_at: float
    updated_at: float = Field(index=True)
    started_at: float | None = None
    finished_at: float | None = None
    last_seq: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    active_seconds: float = 0.0
    lease_owner: str | None = Field(default=None, index=True, max_length=128)
    lease_expires_at: float | None = None
    lease_epoch: int = 0
    """The fencing token: grows by one with every claim (migration 0003)."""
    parent_id: str | None = Field(default=None, max_length=64)
    schedule_id: str | None = Field(default=None, max_length=64)


class StepRow(SQLModel, table=True):
    """One journal record."""

    __tablename__ = "steps"

    run_id: str = Field(primary_key=True, foreign_key="runs.id", max_length=64)
    seq: int = Field(primary_key=True)
    kind: str = Field(max_length=32)
    name: str = Field(max_length=200)
    status: str = Field(max_length=16)
    effect: str | None = Field(default=None, max_length=16)
    attempt: int = 1
    input: str | None = None
    output: str | None = None
    error: str | None = None
    partial_text: str = ""
    salvaged: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    started_at: float
    finished_at: float | None = None


class SnapshotRow(SQLModel, table=True):
    """The newest fold of a run's scalars (one row per run, replaced in place)."""

    __tablename__ = "snapshots"

    run_id: str = Field(primary_key=True, foreign_key="runs.id", max_length=64)
    seq: int
    state: str
    created_at: float


class CommandRow(SQLModel, table=True):
    """A request from the GUI or CLI, applied by the worker."""

    __tablename__ = "commands"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=64)
    kind: str = Field(max_length=32)
    payload: str | None = None
    created_at: float
    applied_at: float | None = Field(default=None, index=True)
    result: str = ""


class ApprovalRow(SQLModel, table=True):
    """An approval request and its decision."""

    __tablename__ = "approvals"

    id: str = Field(primary_key=True, max_length=100)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=64)
    seq: int
    tool: str = Field(max_length=200)
    arguments: str | None = None
    state: str = Field(index=True, max_length=32)
    reason: str = ""
    rule: str = ""
    decided_arguments: str | None = None
    decision_note: str = ""
    deadline: float | None = None
    default_action: str = "reject"
    created_at: float
    decided_at: float | None = None


class WorkerRow(SQLModel, table=True):
    """A worker process and its heartbeat."""

    __tablename__ = "workers"

    id: str = Field(primary_key=True, max_length=128)
    host: str = Field(max_length=255)
    pid: int
    proc_started_at: float = 0.0
    started_at: float
    heartbeat_at: float
    stopped_at: float | None = None


class RunEventRow(SQLModel, table=True):
    """Something that happened to a run outside its journal (migration 0003)."""

    __tablename__ = "run_events"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=64)
    seq: int | None = None
    kind: str = Field(max_length=32)
    message: str = ""
    data: str | None = None
    created_at: float


# --------------------------------------------------------------------------- scheduling
# Schedules, batches, folder watches and run alerts (migration 0002).


class ScheduleRow(SQLModel, table=True):
    """A run template started on a cron expression or an interval."""

    __tablename__ = "schedules"

    id: str = Field(primary_key=True, max_length=64)
    name: str = ""
    template: str
    cron: str | None = Field(default=None, max_length=200)
    every_s: float | None = None
    timezone: str = Field(default="", max_length=64)
    overlap: str = Field(default="skip", max_length=16)
    paused: bool = False
    created_at: float
    updated_at: float
    last_fire_at: float | None = None
    fire_count: int = 0
    skipped: int = 0
    queued: int = 0
    last_run_id: str | None = Field(default=None, max_length=64)
    last_result: str = ""
    version: int = 0


class BatchRow(SQLModel, table=True):
    """One goal template over a list of items."""

    __tablename__ = "batches"

    id: str = Field(primary_key=True, max_length=64)
    template: str
    source: str = ""
    concurrency: int = 4
    total: int = 0
    from_folder: bool = False
    created_at: float


class BatchItemRow(SQLModel, table=True):
    """One item of a batch, with its current run (its durable progress)."""

    __tablename__ = "batch_items"

    batch_id: str = Field(primary_key=True, foreign_key="batches.id", max_length=64)
    idx: int = Field(primary_key=True)
    item: str
    status: str = Field(default="pending", index=True, max_length=16)
    run_id: str | None = Field(default=None, index=True, max_length=64)
    attempts: int = 0
    updated_at: float


class WatchRow(SQLModel, table=True):
    """A folder whose new files each start a run."""

    __tablename__ = "watches"

    id: str = Field(primary_key=True, max_length=64)
    folder: str
    pattern: str = Field(default="*", max_length=200)
    template: str
    scan_s: float = 10.0
    paused: bool = False
    created_at: float
    updated_at: float
    version: int = 0


class SeenFileRow(SQLModel, table=True):
    """A file a watch has already started a run for (path, size and mtime)."""

    __tablename__ = "seen_files"

    watch_id: str = Field(primary_key=True, foreign_key="watches.id", max_length=64)
    path: str = Field(primary_key=True)
    size: int = Field(primary_key=True, sa_type=BigInteger)
    mtime_ns: int = Field(primary_key=True, sa_type=BigInteger)
    run_id: str | None = Field(default=None, max_length=64)
    seen_at: float


class RunAlertRow(SQLModel, table=True):
    """Something wrong with a run that is not a status: for now, a stuck run."""

    __tablename__ = "run_alerts"

    run_id: str = Field(primary_key=True, foreign_key="runs.id", max_length=64)
    kind: str = Field(primary_key=True, max_length=32)
    since: float
    raised_at: float
    message: str = ""
    cleared_at: float | None = None


# Runs are looked up by the schedule or batch that started them.
Index("ix_runs_schedule_id", RunRow.schedule_id)  # type: ignore[arg-type]
Index("ix_runs_parent_id", RunRow.parent_id)  # type: ignore[arg-type]
