"""A run laid out on a time axis: spans per lane, built as steps arrive, read per pixel.

The run pane's time-axis view paints this, and an export can draw the same picture (an
SVG) from it: it is plain Python, no Qt. A :class:`TimeAxis` holds a run's timeline
entries and derives, for each, the spans it puts on the lanes (a model call on the model
lane, a tool call on the tools lane, a wait on the lane of its reason and on the
hibernation lane). Entries arrive as the list's poller reads them: :meth:`TimeAxis.update`
takes new and changed entries and re-derives only those (and the one before each, whose
spans read the next entry), so a live run costs what it adds, not what it has.

What is drawn from what:

* a wait (approval, ``wait`` timer, budget, question) is an open step while the run
  waits; the run hibernates meanwhile (no worker holds it), so the wait is on its reason's
  lane and on the hibernation lane;
* an economy-mode model call (its intent says ``"mode": "economy"``) waits in a Message
  Batch until its result is in: its time is a wait on the batch lane and on the
  hibernation lane, and the answer is a mark on the model lane where the result came;
* a rate limit is not a step: the failed model call says ``rate_limited`` and the run
  sleeps until the next attempt, the gap between the two is the rate-limit wait;
* a gap of more than :data:`IDLE_GAP_S` between two steps (paused, stopped, waiting for
  a worker to pick the run up) is hibernation too;
* a failed model call that the next step tried again is ``retried``; a step that was
  restarted after its worker died is ``salvaged`` when the interrupted attempts left
  output, ``retried`` otherwise; an open effect of a run that no longer works is
  ``in doubt``.

:meth:`TimeAxis.bars` answers "what is in [t0, t1] on this lane" reduced to at most about
one bar per pixel column, using binary searches over start times and a running maximum of
end times, so painting a 100,000-step run costs what the view is wide.
"""

from __future__ import annotations

import gc
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from desktop_agent.client.stepkinds import describe
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import StepKind, StepStatus

_GC_PAUSE_STEPS = 2000
"""Updates bigger than this pause the garbage collector (a run opened whole)."""

IDLE_GAP_S = 30.0
"""A gap between two steps longer than this is drawn as hibernation (steps of a working
run follow each other within milliseconds)."""


class Lane(StrEnum):
    """A row of the time axis, top to bottom in declaration order."""

    MODEL = "model"
    TOOLS = "tools"
    APPROVAL = "approval"
    TIMER = "timer"
    RATE_LIMIT = "rate_limit"
    BUDGET = "budget"
    QUESTION = "question"
    BATCH = "batch"
    HIBERNATION = "hibernation"
    OTHER = "other"

    @property
    def label(self) -> str:
        """The lane's name as the view shows it."""
        return _LANE_LABELS[self]

    @property
    def is_wait(self) -> bool:
        """A lane of waits (one per reason)."""
        return self in WAIT_LANES


_LANE_LABELS = {
    Lane.MODEL: "Model calls",
    Lane.TOOLS: "Tools",
    Lane.APPROVAL: "Wait: approval",
    Lane.TIMER: "Wait: timer",
    Lane.RATE_LIMIT: "Wait: rate limit",
    Lane.BUDGET: "Wait: budget",
    Lane.QUESTION: "Wait: question",
    Lane.BATCH: "Wait: batch",
    Lane.HIBERNATION: "Hibernating",
    Lane.OTHER: "Notes, errors",
}

LANES: tuple[Lane, ...] = tuple(Lane)
WAIT_LANES = frozenset(
    {Lane.APPROVAL, Lane.TIMER, Lane.RATE_LIMIT, Lane.BUDGET, Lane.QUESTION, Lane.BATCH}
)

ECONOMY_MARK = '"mode":"economy"'
"""How an economy-mode model call's intent reads in the journal's JSON."""

_LANE_OF_KIND = {
    StepKind.MODEL_CALL: Lane.MODEL,
    StepKind.COMPACTION: Lane.MODEL,
    StepKind.TOOL_CALL: Lane.TOOLS,
    StepKind.REPORT: Lane.TOOLS,
    StepKind.APPROVAL: Lane.APPROVAL,
    StepKind.SLEEP: Lane.TIMER,
    StepKind.BUDGET: Lane.BUDGET,
    StepKind.QUESTION: Lane.QUESTION,
    StepKind.STEER: Lane.OTHER,
    StepKind.ERROR: Lane.OTHER,
}
_WAIT_KINDS = frozenset({StepKind.APPROVAL, StepKind.SLEEP, StepKind.BUDGET, StepKind.QUESTION})

# Enum members hash in Python code (``Enum.__hash__``) and class attribute lookups of
# members are slow on 3.11: deriving 100,000 steps spent most of its time there. The
# derivation looks kinds up by identity instead (members are singletons).
_WAITS_BY_ID = frozenset(id(k) for k in _WAIT_KINDS)
_LANE_BY_KIND_ID = {id(k): lane for k, lane in _LANE_OF_KIND.items()}
_LABEL_BY_KIND_ID = {id(k): describe(k).label for k in StepKind}
_MODEL_CALL = StepKind.MODEL_CALL
_STARTED = StepStatus.STARTED
_FAILED = StepStatus.FAILED


def in_batch(entry: StepEntry) -> bool:
    """Whether the entry is a model call sent through a Message Batch (economy mode)."""
    return (
        entry.kind is _MODEL_CALL
        and entry.input_json is not None
        and ECONOMY_MARK in entry.input_json
    )


def lane_of(kind: StepKind) -> Lane:
    """The lane a step of ``kind`` is drawn on."""
    return _LANE_OF_KIND[kind]


class SpanState(StrEnum):
    """How a span ended (or that it has not)."""

    OK = "ok"
    FAILED = "failed"
    RETRIED = "retried"
    """Failed, and tried again (a model call retried by the next step), or restarted."""
    SALVAGED = "salvaged"
    """Restarted after its worker died; output of the interrupted attempts was kept."""
    OPEN = "open"
    """Still going: it grows with the clock."""
    IN_DOUBT = "in_doubt"
    """Started but never finished, and the run no longer works on it."""


_S_OK, _S_FAILED, _S_RETRIED = SpanState.OK, SpanState.FAILED, SpanState.RETRIED
_S_SALVAGED, _S_OPEN, _S_IN_DOUBT = SpanState.SALVAGED, SpanState.OPEN, SpanState.IN_DOUBT


@dataclass(frozen=True, slots=True)
class Span:
    """One bar on one lane.

    Attributes:
        lane: where it is drawn.
        start: when it began (epoch seconds).
        end: when it ended, or None while it is open (it grows with the clock).
        seq: the journal step it stands for (a gap's is the step after it).
        kind: that step's kind.
        label: a short name (``tool read_file``, ``rate limit``).
        state: how it ended.
        attempt: the step's attempt number.
    """

    lane: Lane
    start: float
    end: float | None
    seq: int
    kind: StepKind
    label: str
    state: SpanState
    attempt: int = 1

    def end_at(self, now: float) -> float:
        """Its end, an open span ending ``now`` (never before its start)."""
        return self.end if self.end is not None else max(self.start, now)


@dataclass(frozen=True, slots=True)
class Bar:
    """What a view paints in one lane: pixel columns ``x0`` to ``x1`` (inclusive).

    ``span`` is the first span in those columns; ``merged`` counts the spans drawn as this
    one bar (more than one when several share a pixel column).
    """

    x0: int
    x1: int
    span: Span
    merged: int = 1


class _LaneIndex:
    """The spans of one lane, ordered by the index of the entry they came from."""

    __slots__ = ("max_end", "origins", "spans", "starts")

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.origins: list[int] = []
        self.starts: list[float] = []
        self.max_end: list[float] = []
        """Running maximum of the ends (an open span counts as infinity)."""

    def truncate(self, origin: int) -> None:
        """Drop the spans that came from entries ``origin`` onwards."""
        cut = bisect_left(self.origins, origin)
        del self.spans[cut:], self.origins[cut:], self.starts[cut:], self.max_end[cut:]

    def append(self, origin: int, span: Span) -> None:
        end = math.inf if span.end is None else span.end
        self.spans.append(span)
        self.origins.append(origin)
        # Starts are kept non-decreasing for bisection (clocks of two workers may
        # disagree by a little; such a span sorts at its predecessor's start).
        self.starts.append(max(span.start, self.starts[-1]) if self.starts else span.start)
        self.max_end.append(max(end, self.max_end[-1]) if self.max_end else end)


class TimeAxis:
    """The spans of one run, per lane, kept up to date as its steps arrive.

    Args:
        entries: the run's steps so far, in journal order.
        live: the run still works (an open effect is growing, not in doubt).
    """

    def __init__(self, entries: Iterable[StepEntry] = (), *, live: bool = True) -> None:
        self._entries: list[StepEntry] = []
        self._by_seq: dict[int, int] = {}
        self._derived: list[tuple[Span, ...]] = []
        self._lanes: dict[Lane, _LaneIndex] = {lane: _LaneIndex() for lane in LANES}
        self._live = live
        self._open: set[int] = set()
        self._dirty = 0
        self._labels: dict[tuple[int, str], str] = {}
        self.update(entries)

    # ------------------------------------------------------------------ updates

    @property
    def live(self) -> bool:
        """Whether the run still works."""
        return self._live

    def set_live(self, live: bool) -> None:
        """The run started or stopped working (open effects turn in doubt, or back)."""
        if live == self._live:
            return
        self._live = live
        if self._open:
            self._mark(min(self._open))
        elif self._entries:
            self._mark(len(self._entries) - 1)  # a rate-limit wait may be open
        self._flush()

    def update(self, entries: Iterable[StepEntry]) -> int:
        """Take new and changed steps; returns how many were new.

        Only the changed steps and the one before each are derived again (a step's spans
        read the next step: its retry, the end of a rate-limit wait or of an idle gap).
        """
        if not isinstance(entries, Sequence) or len(entries) > _GC_PAUSE_STEPS:
            paused = gc.isenabled()
            gc.disable()  # every object made here is kept: collections would find nothing
            try:
                return self._update(entries)
            finally:
                if paused:
                    gc.enable()
        return self._update(entries)

    def _update(self, entries: Iterable[StepEntry]) -> int:
        added = 0
        for entry in entries:
            i = self._by_seq.get(entry.seq)
            if i is None:
                i = len(self._entries)
                self._entries.append(entry)
                self._derived.append(())
                self._by_seq[entry.seq] = i
                added += 1
            elif self._entries[i] == entry:
                continue
            else:
                self._entries[i] = entry
            if entry.is_open:
                self._open.add(i)
            else:
                self._open.discard(i)
            self._mark(max(0, i - 1))
        self._flush()
        return added

    def _mark(self, index: int) -> None:
        self._dirty = min(self._dirty, index)

    def _flush(self) -> None:
        start = self._dirty
        n = len(self._entries)
        if start >= n:
            self._dirty = n
            return
        for lane in self._lanes.values():
            lane.truncate(start)
        lanes = {id(lane): index for lane, index in self._lanes.items()}
        for i in range(start, n):
            spans = self._derive(i)
            self._derived[i] = spans
            for span in spans:
                lanes[id(span.lane)].append(i, span)
        self._dirty = n

    # ------------------------------------------------------------------ derivation

    def _derive(self, i: int) -> tuple[Span, ...]:
        """The spans that entry ``i`` puts on the lanes (reading entry ``i + 1``)."""
        entry = self._entries[i]
        after = self._entries[i + 1] if i + 1 < len(self._entries) else None
        if in_batch(entry):
            return self._batched(entry, after)
        out = [self._main_span(entry, after)]
        waits = id(entry.kind) in _WAITS_BY_ID
        if waits:
            out.append(_replace_lane(out[0], Lane.HIBERNATION))
        if _rate_limited(entry):
            end = after.started_at if after is not None else None
            if end is not None or self._live:
                finished = entry.finished_at if entry.finished_at is not None else entry.started_at
                state = SpanState.OPEN if end is None else SpanState.OK
                wait = Span(
                    Lane.RATE_LIMIT, finished, end, entry.seq, entry.kind, "rate limit", state
                )
                out.append(wait)
                out.append(_replace_lane(wait, Lane.HIBERNATION))
                return tuple(out)
        if after is not None and not waits:
            done = entry.finished_at if entry.finished_at is not None else entry.started_at
            if after.started_at - done > IDLE_GAP_S:
                out.append(
                    Span(
                        Lane.HIBERNATION,
                        done,
                        after.started_at,
                        after.seq,
                        after.kind,
                        "not working (paused, stopped or waiting for a worker)",
                        SpanState.OK,
                    )
                )
        return tuple(out)

    def _batched(self, entry: StepEntry, after: StepEntry | None) -> tuple[Span, ...]:
        """An economy-mode call: the queue as a wait, the answer as a mark where it came.

        While its result is out, the call is a wait like a timer's: open, growing with the
        clock, whether or not a worker holds the run.
        """
        done = entry.finished_at
        state = self._state(entry, after) if done is not None else _S_OPEN
        label = f"in a batch {entry.name}".strip()
        wait = Span(
            Lane.BATCH, entry.started_at, done, entry.seq, entry.kind, label, state, entry.attempt
        )
        out = [wait, _replace_lane(wait, Lane.HIBERNATION)]
        if done is not None:
            main = self._main_span(entry, after)
            out.insert(0, _replace_lane(Span(
                main.lane, done, done, main.seq, main.kind, main.label, main.state, main.attempt
            ), Lane.MODEL))  # fmt: skip
        return tuple(out)

    def _main_span(self, entry: StepEntry, after: StepEntry | None) -> Span:
        kind_id = id(entry.kind)
        key = (kind_id, entry.name)
        label = self._labels.get(key)
        if label is None:
            label = f"{_LABEL_BY_KIND_ID[kind_id]} {entry.name}".strip()
            self._labels[key] = label
        return Span(
            _LANE_BY_KIND_ID[kind_id],
            entry.started_at,
            entry.finished_at if entry.finished_at is not None else self._open_end(entry),
            entry.seq,
            entry.kind,
            label,
            self._state(entry, after),
            entry.attempt,
        )

    def _open_end(self, entry: StepEntry) -> float | None:
        """An open step grows while the run works; else it ends where it was last seen."""
        if self._live or id(entry.kind) in _WAITS_BY_ID:
            return None
        return entry.started_at

    def _state(self, entry: StepEntry, after: StepEntry | None) -> SpanState:
        status = entry.status
        if status is _STARTED:
            if self._live or id(entry.kind) in _WAITS_BY_ID:
                return _S_OPEN
            return _S_IN_DOUBT
        if status is _FAILED:
            retried = entry.kind is _MODEL_CALL and after is not None and after.kind is _MODEL_CALL
            return _S_RETRIED if retried else _S_FAILED
        if entry.salvaged_json and entry.salvaged_json not in ("[]", "null"):
            return _S_SALVAGED
        if entry.attempt > 1:
            return _S_RETRIED
        return _S_OK

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> Sequence[StepEntry]:
        """The steps, in journal order."""
        return self._entries

    def entry(self, seq: int) -> StepEntry | None:
        """Step ``seq``, if known."""
        i = self._by_seq.get(seq)
        return None if i is None else self._entries[i]

    def spans(self, lane: Lane) -> Sequence[Span]:
        """Every span of ``lane``, in journal order."""
        return self._lanes[lane].spans

    def all_spans(self) -> list[Span]:
        """Every span of every lane (lane by lane, in journal order within each)."""
        return [s for lane in LANES for s in self._lanes[lane].spans]

    def has_open(self) -> bool:
        """Whether some span grows with the clock."""
        return any(idx.max_end and idx.max_end[-1] == math.inf for idx in self._lanes.values())

    def extent(self, now: float) -> tuple[float, float] | None:
        """The first start and the last end of the run (open spans end ``now``)."""
        if not self._entries:
            return None
        t0 = min(idx.starts[0] for idx in self._lanes.values() if idx.starts)
        t1 = t0
        for idx in self._lanes.values():
            if idx.max_end:
                last = idx.max_end[-1]
                t1 = max(t1, now if last == math.inf else last, idx.starts[-1])
        return t0, t1

    def bars(self, lane: Lane, t0: float, t1: float, width: int, now: float) -> list[Bar]:
        """The spans of ``lane`` over [t0, t1] drawn ``width`` pixels wide, one bar a column.

        A span narrower than a pixel column shares the column with the others that start
        there (one bar, ``merged`` counting them); a wider one keeps its own bar. Every
        column that some span covers is covered by a bar. The work is about ``width``
        binary searches, whatever the number of spans.
        """
        idx = self._lanes[lane]
        out: list[Bar] = []
        if width <= 0 or t1 <= t0 or not idx.spans:
            return out
        per_px = (t1 - t0) / width
        starts, max_end, spans = idx.starts, idx.max_end, idx.spans
        n = len(spans)
        last_col = width - 1
        # The first span that reaches t0: the running maximum of ends passes t0 there.
        i = bisect_left(max_end, t0)
        while i < n and starts[i] <= t1:
            col = max(0, int((starts[i] - t0) / per_px))
            if col > last_col:
                break
            # Spans i..j-1 start in this column: one bar, as far as the furthest reaches.
            j = bisect_left(starts, t0 + (col + 1) * per_px, i + 1)
            reach = max_end[j - 1]
            reach = now if reach == math.inf else reach
            end_col = min(last_col, max(col, int((reach - t0) / per_px)))
            if not out or out[-1].x1 < col:
                out.append(Bar(col, end_col, spans[i], j - i))
            elif end_col > out[-1].x1:  # an earlier wide bar covers the start already
                out.append(Bar(out[-1].x1 + 1, end_col, spans[i], j - i))
            i = j
        return out

    def labels_between(self, lane: Lane, t0: float, t1: float) -> dict[str, int]:
        """How many spans of each label start in [t0, t1) on ``lane``."""
        idx = self._lanes[lane]
        counts: dict[str, int] = {}
        for span in idx.spans[bisect_left(idx.starts, t0) : bisect_left(idx.starts, t1)]:
            counts[span.label] = counts.get(span.label, 0) + 1
        return counts

    def span_at(self, lane: Lane, t: float, slack: float, now: float) -> Span | None:
        """The span of ``lane`` under time ``t`` (or within ``slack`` of it), if any."""
        idx = self._lanes[lane]
        if not idx.spans:
            return None
        i = bisect_right(idx.starts, t + slack) - 1
        best: Span | None = None
        best_d = math.inf
        lo = bisect_left(idx.max_end, t - slack)
        for k in range(i, max(lo, i - 64) - 1, -1):
            span = idx.spans[k]
            end = span.end_at(now)
            d = 0.0 if span.start <= t <= end else min(abs(span.start - t), abs(end - t))
            if d <= slack and d < best_d:
                best, best_d = span, d
                if d == 0.0:
                    break
        return best


def _replace_lane(span: Span, lane: Lane) -> Span:
    return Span(
        lane, span.start, span.end, span.seq, span.kind, span.label, span.state, span.attempt
    )


def _rate_limited(entry: StepEntry) -> bool:
    """A failed model call the API turned away for now (the run sleeps, then retries)."""
    if entry.kind is not _MODEL_CALL or entry.status is not _FAILED:
        return False
    if not entry.output_json or "rate_limited" not in entry.output_json:
        return False
    try:
        output = json.loads(entry.output_json)
    except ValueError:
        return False
    return isinstance(output, dict) and output.get("error_code") == "rate_limited"


@dataclass(frozen=True, slots=True)
class Group:
    """Neighbouring bars of a lane read as one block.

    Columns ``x0``..``x1`` hold ``count`` steps; a view labels the block "270 × read_file"
    where it is wide enough.
    """

    x0: int
    x1: int
    count: int


def group_bars(bars: Sequence[Bar], gap: int = 3) -> list[Group]:
    """Bars at most ``gap`` columns apart, as blocks of their steps (left to right)."""
    out: list[Group] = []
    for bar in bars:
        if out and bar.x0 - out[-1].x1 <= gap:
            last = out[-1]
            out[-1] = Group(last.x0, max(last.x1, bar.x1), last.count + bar.merged)
        else:
            out.append(Group(bar.x0, bar.x1, bar.merged))
    return out


def group_label(labels: dict[str, int]) -> str:
    """A block's label: "270 × read_file" when its steps share a name, else "270 steps"."""
    count = sum(labels.values())
    if len(labels) == 1:
        name = next(iter(labels)).removeprefix("tool ").removeprefix("model ")
        return f"{count} × {name}" if count > 1 else name
    return f"{count} steps"


def elapsed_label(seconds: float, step: float) -> str:
    """A tick's label as time since the run began ("+1h 30m"), as precise as ``step``."""
    if seconds <= 0:
        return "0"
    if step < 1:
        places = 3 if step < 0.01 else 2 if step < 0.1 else 1
        return f"+{seconds:.{places}f}s"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return "+" + " ".join(parts[:2])


def tick_step(span_s: float, max_ticks: int) -> float:
    """A round tick interval (ms to days) giving at most ``max_ticks`` ticks over ``span_s``."""
    for step in _TICK_STEPS:
        if span_s / step <= max_ticks:
            return step
    days = span_s / max_ticks / 86400.0
    return 86400.0 * float(10 ** math.ceil(math.log10(max(days, 1.0))))


_TICK_STEPS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    900.0,
    1800.0,
    3600.0,
    7200.0,
    3 * 3600.0,
    6 * 3600.0,
    12 * 3600.0,
    86400.0,
    2 * 86400.0,
    7 * 86400.0,
    14 * 86400.0,
    30 * 86400.0,
)
