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
    """One notification.

    ``run_ids``: the runs of a notice about several (then ``run_id`` is ""): a click
    shows them together (:func:`coalesce`).
    """

    kind: NoticeKind
    run_id: str
    title: str
    text: str
    run_ids: tuple[str, ...] = ()

    @property
    def runs(self) -> tuple[str, ...]:
        """Every run the notice is about."""
        return self.run_ids or ((self.run_id,) if self.run_id else ())

    @property
    def key(self) -> str:
        """What a newer notice replaces (the run's, or the group's of its kind)."""
        return self.run_id or f"group:{self.kind.value}"


_MANY_TITLES = {
    NoticeKind.NEEDS_USER: "{n} runs need you",
    NoticeKind.FINISHED: "{n} runs finished",
    NoticeKind.FAILED: "{n} runs failed",
    NoticeKind.STALLED: "{n} runs make no progress",
}

MIN_GAP_S = {
    NoticeKind.NEEDS_USER: 20.0,
    NoticeKind.FAILED: 20.0,
    NoticeKind.STALLED: 60.0,
    NoticeKind.FINISHED: 60.0,
}
"""The least time between two notices of a kind: what comes between waits and is merged.

Finishes and stalls are quieter than what needs the analyst."""


def coalesce(notices: Iterable[Notice]) -> list[Notice]:
    """One notice per kind: a kind with several runs becomes "3 runs need you".

    ``notices`` are each about one run (the gate keeps them so); a run's newest notice of
    a kind counts once, and the order of kinds is kept.
    """
    by_kind: dict[NoticeKind, dict[str, Notice]] = {}
    for notice in notices:
        group = by_kind.setdefault(notice.kind, {})
        group.pop(notice.key, None)  # the newest last
        group[notice.key] = notice
    out: list[Notice] = []
    for kind, group in by_kind.items():
        items = list(group.values())
        if len(items) == 1:
            out.append(items[0])
            continue
        texts = [n.text.split(":", 1)[0] for n in items]
        shown = "; ".join(texts[:3]) + (f"; and {len(texts) - 3} more" if len(texts) > 3 else "")
        ids = tuple(n.run_id for n in items if n.run_id)
        out.append(Notice(kind, "", _MANY_TITLES[kind].format(n=len(items)), shown, ids))
    return out


class NoticeGate:
    """Rate-limits notices per kind, and holds them while the analyst is in a dialog.

    :meth:`offer` sends what may go now and keeps the rest; :meth:`due` (called about once
    a second) releases what was kept once its kind's gap (:data:`MIN_GAP_S`) has passed
    and no dialog is open, merged into one notice per kind (:func:`coalesce`). With ten
    live runs a balloon came every six seconds and covered the approval dialog's buttons.
    """

    def __init__(self, gaps: dict[NoticeKind, float] | None = None) -> None:
        self.gaps = dict(MIN_GAP_S if gaps is None else gaps)
        self._last: dict[NoticeKind, float] = {}
        self._held: list[Notice] = []

    @property
    def held(self) -> list[Notice]:
        """Notices kept back, oldest first."""
        return list(self._held)

    def offer(self, notices: Iterable[Notice], now: float, *, busy: bool = False) -> list[Notice]:
        """``notices`` to send now (coalesced); the others wait for :meth:`due`."""
        self._held.extend(notices)
        return self.due(now, busy=busy)

    def due(self, now: float, *, busy: bool = False) -> list[Notice]:
        """The kept notices whose kind may be told now (none while ``busy``)."""
        if busy or not self._held:
            return []
        ready: set[NoticeKind] = set()
        for notice in self._held:
            last = self._last.get(notice.kind)
            if last is None or now - last >= self.gaps.get(notice.kind, 0.0):
                ready.add(notice.kind)
        for kind in ready:
            self._last[kind] = now
        out = coalesce(n for n in self._held if n.kind in ready)
        self._held = [n for n in self._held if n.kind not in ready]
        return out


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
