"""Economy mode's queue: model turns waiting for, inside, and back from Message Batches.

The protocol that keeps a turn from being sent twice and its result from being applied
twice, across crashes of any worker:

1. **Queue.** The run's activation writes the step's intent to the journal, then queues
   the request under its ``custom_id`` (``RUNID-SEQ-ATTEMPT``, the row's key: queuing again
   changes nothing), and hibernates (:class:`SqlBatchQueue`).
2. **Claim.** A worker moves the queued rows of runs that wait for them to ``submitting``
   under a fresh submission token, in one transaction (:meth:`BatchBook.claim`): two
   workers never claim the same row.
3. **Create** the batch (the API), then **record** its id on the rows and in
   ``message_batches`` (:meth:`BatchBook.submitted`). A worker that dies between 3's
   call and its record leaves rows ``submitting``: the submission is *in doubt*.
4. **In doubt** (:meth:`BatchBook.in_doubt`, once the submission is older than any create
   call can take): the API's list of batches is read; a batch created since the claim,
   unknown here and holding as many requests, may be ours. None: the create never
   happened, the rows go back to the queue (:meth:`BatchBook.requeue`). Some: they are
   kept as *suspects* (:meth:`BatchBook.suspect`) and read once they end; a result whose
   ``custom_id`` is one of the rows settles it; rows no suspect held are queued again.
   A row is never sent again while a batch that may hold it has not ended.
5. **Results** (:meth:`BatchBook.apply_results`): each is written with a conditional
   update (only a row still ``submitted``/``submitting`` takes it), so results read twice
   are applied once; the run is woken (its wake time set to now). The run's next
   activation closes the step from the stored result and marks the run's results
   consumed; a result that came while the run was busy is found by
   :meth:`BatchBook.wake_missed`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from desktop_agent.domain import JSON, RunStatus, WaitReason
from desktop_agent.engine.ports import BATCH_PENDING, BatchEntry
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.tables import batch_requests, message_batches, runs

ENDED = ("succeeded", "errored", "expired", "canceled")
"""The result types of a request (the API's ``result.type``)."""

_b = batch_requests.c
_m = message_batches.c


def _entry(row: Any) -> BatchEntry:
    r = row._mapping
    result: JSON = None
    raw = r["result"]
    if isinstance(raw, str) and raw:
        try:
            result = json.loads(raw)
        except ValueError:
            result = {"type": "errored", "error": {"type": "unreadable", "message": raw[:200]}}
    return BatchEntry(
        custom_id=str(r["custom_id"]),
        run_id=str(r["run_id"]),
        seq=int(str(r["seq"])),
        attempt=int(str(r["attempt"])),
        state=str(r["state"]),
        queued_at=float(str(r["queued_at"])),
        submitted_at=float(str(r["submitted_at"])) if r["submitted_at"] is not None else None,
        batch_id=str(r["batch_id"]) if r["batch_id"] is not None else None,
        result=result,
    )


_ENTRY_COLUMNS = (
    _b.custom_id,
    _b.run_id,
    _b.seq,
    _b.attempt,
    _b.state,
    _b.queued_at,
    _b.submitted_at,
    _b.batch_id,
    _b.result,
)


class SqlBatchQueue:
    """The engine's :class:`~desktop_agent.engine.ports.BatchQueue` on the database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def enqueue(self, entry: BatchEntry, model: str, params: Mapping[str, JSON]) -> BatchEntry:
        """Queue ``entry`` unless queued already (see the port)."""
        body = dict(params)
        betas = body.pop("betas", None)
        group = ",".join(sorted(str(b) for b in betas)) if isinstance(betas, list) else ""
        with self.db.write() as conn:
            found = conn.execute(
                select(*_ENTRY_COLUMNS).where(_b.custom_id == entry.custom_id)
            ).first()
            if found is None:
                conn.execute(
                    insert(batch_requests).values(
                        custom_id=entry.custom_id,
                        run_id=entry.run_id,
                        seq=entry.seq,
                        attempt=entry.attempt,
                        model=model,
                        betas=group,
                        params=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                        state="queued",
                        queued_at=entry.queued_at,
                    )
                )
                return BatchEntry(
                    entry.custom_id, entry.run_id, entry.seq, entry.attempt, "queued",
                    entry.queued_at,
                )  # fmt: skip
            stored = _entry(found)
            if stored.state != "withdrawn":
                return stored
            conn.execute(
                update(batch_requests)
                .where(_b.custom_id == entry.custom_id, _b.state == "withdrawn")
                .values(state="queued", queued_at=entry.queued_at, submission=None)
            )
        return BatchEntry(
            entry.custom_id, entry.run_id, entry.seq, entry.attempt, "queued", entry.queued_at
        )

    def entry(self, custom_id: str) -> BatchEntry | None:
        """The stored entry (None: never queued)."""
        with self.db.read() as conn:
            row = conn.execute(select(*_ENTRY_COLUMNS).where(_b.custom_id == custom_id)).first()
        return _entry(row) if row is not None else None

    def consumed(self, run_id: str, now: float) -> None:
        """Every result of the run read so far was taken by its step."""
        with self.db.write() as conn:
            conn.execute(
                update(batch_requests)
                .where(_b.run_id == run_id, _b.state.in_(ENDED), _b.consumed_at.is_(None))
                .values(consumed_at=now)
            )

    def latest(self, run_id: str) -> BatchEntry | None:
        """The run's newest request (what its header says while it waits)."""
        with self.db.read() as conn:
            row = conn.execute(
                select(*_ENTRY_COLUMNS)
                .where(_b.run_id == run_id)
                .order_by(_b.queued_at.desc(), _b.seq.desc(), _b.attempt.desc())
                .limit(1)
            ).first()
        return _entry(row) if row is not None else None


@dataclass(frozen=True)
class Claimed:
    """Rows a worker claimed for one batch: their token, group of beta headers, requests."""

    submission: str
    betas: tuple[str, ...]
    requests: tuple[tuple[str, dict[str, JSON]], ...]
    """(custom_id, params) of each request, in queue order."""


@dataclass(frozen=True)
class KnownBatch:
    """A batch as ``message_batches`` keeps it."""

    id: str
    submission: str | None
    status: str
    requests: int
    suspect: bool
    created_at: float
    polls: int


@dataclass(frozen=True)
class Doubt:
    """A submission whose batch id was never recorded."""

    submission: str
    claimed_at: float
    requests: int
    suspects: tuple[KnownBatch, ...]


class BatchBook:
    """The workers' side of the queue: claims, batches, results, wake-ups (see the module)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ queue

    def active(self) -> bool:
        """Whether any request is queued, in a batch, or back and not yet taken."""
        with self.db.read() as conn:
            found = conn.execute(
                select(_b.custom_id)
                .where(
                    or_(
                        _b.state.in_(BATCH_PENDING),
                        and_(_b.state.in_(ENDED), _b.consumed_at.is_(None)),
                    )
                )
                .limit(1)
            ).first()
        return found is not None

    def oldest_queued(self) -> tuple[float | None, int]:
        """When the oldest sendable request was queued, and how many are sendable.

        Sendable: queued, and its run still waits for it (a paused run's request stays
        queued until it is resumed; one of a run that ended is withdrawn by
        :meth:`withdraw_ended`).
        """
        with self.db.read() as conn:
            row = conn.execute(
                select(func.min(_b.queued_at), func.count())
                .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                .where(_b.state == "queued", *_waits_for_batch())
            ).one()
        return (float(row[0]) if row[0] is not None else None), int(row[1])

    def claim(self, now: float, limit: int, max_bytes: int) -> Claimed | None:
        """Claim up to ``limit`` sendable requests sharing one set of beta headers.

        The oldest request's group is taken, oldest first, until ``limit`` requests or
        ``max_bytes`` of params (the API's own limits are 100,000 and 256 MB).
        """
        token = secrets.token_hex(8)
        with self.db.write() as conn:
            first = conn.execute(
                select(_b.betas)
                .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                .where(_b.state == "queued", *_waits_for_batch())
                .order_by(_b.queued_at)
                .limit(1)
            ).first()
            if first is None:
                return None
            group = str(first[0])
            rows = conn.execute(
                select(_b.custom_id, _b.params)
                .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                .where(_b.state == "queued", _b.betas == group, *_waits_for_batch())
                .order_by(_b.queued_at, _b.custom_id)
                .limit(limit)
            ).all()
            taken: list[tuple[str, dict[str, JSON]]] = []
            size = 0
            for custom_id, params in rows:
                size += len(params.encode()) + len(custom_id) + 64
                if taken and size > max_bytes:
                    break
                taken.append((str(custom_id), json.loads(params)))
            conn.execute(
                update(batch_requests)
                .where(_b.custom_id.in_([c for c, _ in taken]), _b.state == "queued")
                .values(state="submitting", submission=token, submitted_at=now)
            )
        betas = tuple(b for b in group.split(",") if b)
        return Claimed(token, betas, tuple(taken))

    def submitted(self, claim: Claimed, batch_id: str, created_at: float, now: float,
                  next_poll_at: float) -> None:  # fmt: skip
        """Record the batch that carries ``claim``'s requests."""
        with self.db.write() as conn:
            conn.execute(
                update(batch_requests)
                .where(_b.submission == claim.submission, _b.state == "submitting")
                .values(state="submitted", batch_id=batch_id)
            )
            if not conn.execute(select(_m.id).where(_m.id == batch_id)).first():
                conn.execute(
                    insert(message_batches).values(
                        id=batch_id,
                        submission=claim.submission,
                        status="in_progress",
                        requests=len(claim.requests),
                        created_at=created_at,
                        next_poll_at=next_poll_at,
                        polls=0,
                    )
                )

    def requeue(self, submission: str) -> int:
        """The submission's requests no batch holds go back to the queue; how many."""
        with self.db.write() as conn:
            result = conn.execute(
                update(batch_requests)
                .where(_b.submission == submission, _b.state == "submitting")
                .values(state="queued", submission=None, submitted_at=None)
            )
            conn.execute(
                update(message_batches)
                .where(_m.submission == submission, _m.suspect.is_(True))
                .values(submission=None)
            )
        return int(result.rowcount or 0)

    def withdraw_ended(self) -> int:
        """Requests still queued whose run has ended are never sent; how many."""
        ended = (str(RunStatus.COMPLETED), str(RunStatus.FAILED), str(RunStatus.CANCELLED))
        with self.db.write() as conn:
            ids = (
                conn.execute(
                    select(_b.custom_id)
                    .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                    .where(_b.state == "queued", runs.c.status.in_(ended))
                )
                .scalars()
                .all()
            )
            if ids:
                conn.execute(
                    update(batch_requests)
                    .where(_b.custom_id.in_(ids), _b.state == "queued")
                    .values(state="withdrawn")
                )
        return len(ids)

    # ------------------------------------------------------------------ batches

    def known_ids(self) -> set[str]:
        """Every batch id recorded here (the API's list is read against it)."""
        with self.db.read() as conn:
            return {str(i) for i in conn.execute(select(_m.id)).scalars()}

    def due(self, now: float) -> list[KnownBatch]:
        """Batches whose results are not read yet and whose next poll has come."""
        with self.db.read() as conn:
            rows = conn.execute(
                select(message_batches)
                .where(_m.results_read.is_(False), _m.next_poll_at <= now)
                .order_by(_m.next_poll_at)
            ).all()
        return [_batch(r) for r in rows]

    def next_poll_at(self) -> float | None:
        """The soonest poll due of a batch not read yet (None: none is outstanding)."""
        with self.db.read() as conn:
            value = conn.execute(
                select(func.min(_m.next_poll_at)).where(_m.results_read.is_(False))
            ).scalar()
        return float(value) if value is not None else None

    def polled(self, batch_id: str, status: str, next_poll_at: float) -> None:
        """A poll found the batch still going (or canceling)."""
        with self.db.write() as conn:
            conn.execute(
                update(message_batches)
                .where(_m.id == batch_id)
                .values(status=status, next_poll_at=next_poll_at, polls=_m.polls + 1)
            )

    def apply_results(
        self, batch_id: str, results: Iterable[tuple[str, str, JSON]], now: float
    ) -> tuple[int, list[str]]:
        """Write the results of ``batch_id`` (custom_id, type, result) and wake their runs.

        A result is taken only by a row that still waits for it (submitted, or submitting
        when it settles a doubt): a result read twice is applied once, and results of
        requests that are not ours are ignored.

        Returns:
            How many results were applied, and the runs woken.
        """
        applied = 0
        answered: list[str] = []
        with self.db.write() as conn:
            for custom_id, kind, result in results:
                kind = kind if kind in ENDED else "errored"
                row = conn.execute(
                    select(_b.run_id).where(
                        _b.custom_id == custom_id, _b.state.in_(("submitted", "submitting"))
                    )
                ).first()
                if row is None:
                    continue
                done = conn.execute(
                    update(batch_requests)
                    .where(_b.custom_id == custom_id, _b.state.in_(("submitted", "submitting")))
                    .values(
                        state=kind,
                        batch_id=batch_id,
                        result=json.dumps(result, ensure_ascii=False, separators=(",", ":")),
                        ended_at=now,
                    )
                )
                if done.rowcount:
                    applied += 1
                    answered.append(str(row[0]))
            woken = _wake(conn, answered, now)
        return applied, woken

    def read_done(self, batch_id: str, now: float) -> None:
        """Every result of the batch was read and applied."""
        with self.db.write() as conn:
            conn.execute(
                update(message_batches)
                .where(_m.id == batch_id)
                .values(status="ended", results_read=True, ended_at=now)
            )
            # A submitted request its batch did not answer (it should not happen) would
            # wait for ever: it ends as errored, and its run retries the turn.
            lost = conn.execute(
                select(_b.custom_id, _b.run_id).where(
                    _b.batch_id == batch_id, _b.state == "submitted"
                )
            ).all()
            for custom_id, _run in lost:
                conn.execute(
                    update(batch_requests)
                    .where(_b.custom_id == custom_id, _b.state == "submitted")
                    .values(
                        state="errored",
                        ended_at=now,
                        result=json.dumps(
                            {
                                "type": "errored",
                                "error": {
                                    "type": "error",
                                    "error": {
                                        "type": "api_error",
                                        "message": "the batch ended without a result "
                                        "for this request",
                                    },
                                },
                            }
                        ),
                    )
                )
            _wake(conn, [str(r) for _c, r in lost], now)

    def to_cancel(self) -> list[str]:
        """Batches still going whose every unanswered request belongs to a run that ended."""
        ended = (str(RunStatus.COMPLETED), str(RunStatus.FAILED), str(RunStatus.CANCELLED))
        with self.db.read() as conn:
            going = (
                conn.execute(
                    select(_m.id).where(_m.status == "in_progress", _m.results_read.is_(False))
                )
                .scalars()
                .all()
            )
            out: list[str] = []
            for batch_id in going:
                statuses = (
                    conn.execute(
                        select(runs.c.status)
                        .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                        .where(_b.batch_id == batch_id, _b.state == "submitted")
                    )
                    .scalars()
                    .all()
                )
                if statuses and all(s in ended for s in statuses):
                    out.append(str(batch_id))
        return out

    # ------------------------------------------------------------------ doubt

    def in_doubt(self, older_than: float) -> list[Doubt]:
        """Submissions claimed before ``older_than`` whose batch was never recorded."""
        with self.db.read() as conn:
            rows = conn.execute(
                select(_b.submission, func.min(_b.submitted_at), func.count())
                .where(_b.state == "submitting", _b.submitted_at < older_than)
                .group_by(_b.submission)
            ).all()
            out = []
            for submission, claimed_at, count in rows:
                suspects = conn.execute(
                    select(message_batches).where(
                        _m.submission == submission,
                        _m.suspect.is_(True),
                        _m.results_read.is_(False),
                    )
                ).all()
                out.append(
                    Doubt(
                        str(submission),
                        float(claimed_at),
                        int(count),
                        tuple(_batch(s) for s in suspects),
                    )
                )
        return out

    def unread_suspects(self) -> bool:
        """Whether a suspected batch has not ended and been read yet."""
        with self.db.read() as conn:
            found = conn.execute(
                select(_m.id).where(_m.suspect.is_(True), _m.results_read.is_(False)).limit(1)
            ).first()
        return found is not None

    def settled_doubts(self) -> list[str]:
        """Submissions in doubt whose suspected batches were all read.

        What those batches did not answer was never sent: it may be queued again
        (:meth:`requeue`).
        """
        if self.unread_suspects():
            return []
        with self.db.read() as conn:
            rows = conn.execute(
                select(_b.submission)
                .distinct()
                .where(
                    _b.state == "submitting",
                    _b.submission.in_(
                        select(_m.submission).where(
                            _m.suspect.is_(True), _m.submission.is_not(None)
                        )
                    ),
                )
            ).scalars()
            return [str(r) for r in rows]

    def refused(self, claim: Claimed, refusal: JSON, now: float) -> list[str]:
        """The API refused the batch for good: its requests end ``errored``; the runs woken.

        The result holds the refusal: the runs say why and wait for the analyst.
        """
        result = json.dumps({"type": "errored", "error": refusal}, ensure_ascii=False)
        with self.db.write() as conn:
            run_ids = (
                conn.execute(
                    select(_b.run_id).where(
                        _b.submission == claim.submission, _b.state == "submitting"
                    )
                )
                .scalars()
                .all()
            )
            conn.execute(
                update(batch_requests)
                .where(_b.submission == claim.submission, _b.state == "submitting")
                .values(state="errored", result=result, ended_at=now)
            )
            return _wake(conn, [str(r) for r in run_ids], now)

    def suspect(self, doubt: Doubt, batches: Sequence[tuple[str, float]], now: float) -> None:
        """Keep batches (id, created_at) that may hold ``doubt``'s requests, to read later."""
        with self.db.write() as conn:
            for batch_id, created_at in batches:
                if conn.execute(select(_m.id).where(_m.id == batch_id)).first():
                    continue
                conn.execute(
                    insert(message_batches).values(
                        id=batch_id,
                        submission=doubt.submission,
                        status="in_progress",
                        requests=doubt.requests,
                        suspect=True,
                        created_at=created_at,
                        next_poll_at=now,
                        polls=0,
                    )
                )

    def wake_missed(self, now: float) -> list[str]:
        """Wake runs that wait for a batch although a result of theirs is in and untaken.

        A result written while its run's activation was still under way (a command woke
        it) finds the run running, not waiting: the run then hibernates again, and this
        wakes it at the pump's next pass.
        """
        with self.db.write() as conn:
            ids = (
                conn.execute(
                    select(_b.run_id)
                    .distinct()
                    .select_from(batch_requests.join(runs, runs.c.id == _b.run_id))
                    .where(
                        _b.state.in_(ENDED),
                        _b.consumed_at.is_(None),
                        *_waits_for_batch(),
                        or_(runs.c.wake_at.is_(None), runs.c.wake_at > now),
                    )
                )
                .scalars()
                .all()
            )
            return _wake(conn, [str(i) for i in ids], now)


def _waits_for_batch() -> tuple[ColumnElement[bool], ...]:
    return (
        runs.c.status == str(RunStatus.WAITING),
        runs.c.wait_reason == str(WaitReason.BATCH),
    )


def _wake(conn: Connection, run_ids: Sequence[str], now: float) -> list[str]:
    """Make the runs among ``run_ids`` that wait for a batch runnable now; which ones."""
    if not run_ids:
        return []
    waiting = [
        str(r)
        for r in conn.execute(
            select(runs.c.id).where(runs.c.id.in_(sorted(set(run_ids))), *_waits_for_batch())
        ).scalars()
    ]
    if waiting:
        conn.execute(update(runs).where(runs.c.id.in_(waiting)).values(wake_at=now))
    return waiting


def _batch(row: Any) -> KnownBatch:
    r = row._mapping
    return KnownBatch(
        id=str(r["id"]),
        submission=str(r["submission"]) if r["submission"] is not None else None,
        status=str(r["status"]),
        requests=int(str(r["requests"])),
        suspect=bool(r["suspect"]),
        created_at=float(str(r["created_at"])),
        polls=int(str(r["polls"])),
    )
