"""Which status changes deserve a notification, found by diffing statuses between polls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from desktop_agent.client.views import RunRow
from desktop_agent.domain import Run, RunStatus, WaitReason
from desktop_agent.gui import theme


class NoticeKind(StrEnum):
    """Why the analyst is told."""

    NEEDS_USER = "needs_user"
    FINISHED = "finished"
    FAILED = "failed"
    STALLED = "stalled"


@dataclass(frozen=True)
class Notice:
    """One notification."""

    kind: NoticeKind
    run_id: str
    title: str
    text: str


State = tuple[RunStatus, WaitReason | None]


def state_of(run: Run) -> State:
    """What the diff compares."""
    return (run.status, run.wait_reason)


def _title(run: Run) -> str:
    title = run.title or run.goal
    return title if len(title) <= 60 else title[:59] + "…"


def transitions(before: Mapping[str, State], rows: Iterable[RunRow]) -> list[Notice]:
    """Notices for runs whose state changed since ``before`` (new runs count from queued)."""
    out = []
    for row in rows:
        run = row.run
        old = before.get(run.id, (RunStatus.QUEUED, None))
        new = state_of(run)
        if new == old:
            continue
        if run.status == RunStatus.COMPLETED:
            out.append(Notice(NoticeKind.FINISHED, run.id, "Run finished", _title(run)))
        elif run.status == RunStatus.FAILED:
            why = run.status_message or "the run failed"
            out.append(Notice(NoticeKind.FAILED, run.id, "Run failed", f"{_title(run)}: {why}"))
        elif theme.needs_user(run):
            what = run.status_message or theme.status_text(run)
            out.append(
                Notice(NoticeKind.NEEDS_USER, run.id, "A run needs you", f"{_title(run)}: {what}")
            )
    return out


def stalls(
    rows: Iterable[RunRow], now: float, after_s: float, noticed: dict[str, int]
) -> list[Notice]:
    """Notices for running runs that made no progress for ``after_s`` seconds.

    Once per stall: ``noticed`` remembers the step count at which a run was reported
    (updated here); a run that moves on and stalls again is reported again. Runs that
    stopped running are forgotten.
    """
    out = []
    running = set()
    for row in rows:
        run = row.run
        if run.status != RunStatus.RUNNING:
            continue
        running.add(run.id)
        if noticed.get(run.id) == run.last_seq:
            continue
        noticed.pop(run.id, None)
        idle = now - max(run.updated_at, run.started_at or 0.0)
        if after_s > 0 and idle >= after_s:
            noticed[run.id] = run.last_seq
            minutes = int(idle // 60)
            out.append(
                Notice(
                    NoticeKind.STALLED,
                    run.id,
                    "A run makes no progress",
                    f"{_title(run)}: no new step for {minutes} min",
                )
            )
    for run_id in set(noticed) - running:
        del noticed[run_id]
    return out
