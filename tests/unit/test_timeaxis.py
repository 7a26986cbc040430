"""The time axis: lanes, waits by reason, hibernation, retry states, per-pixel bars."""

from __future__ import annotations

import json
import random

from desktop_agent.client.timeaxis import (
    IDLE_GAP_S,
    LANES,
    Lane,
    Span,
    SpanState,
    TimeAxis,
    tick_step,
)
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import StepKind, StepStatus

T0 = 1_700_000_000.0


def entry(
    seq: int,
    kind: StepKind,
    start: float,
    end: float | None,
    *,
    status: StepStatus | None = None,
    name: str = "",
    attempt: int = 1,
    output: object = None,
    salvaged: list[str] | None = None,
    input_: object = None,
) -> StepEntry:
    if status is None:
        status = StepStatus.STARTED if end is None else StepStatus.COMPLETED
    return StepEntry(
        "run",
        seq,
        kind,
        name or kind.value,
        status,
        attempt,
        None,
        T0 + start,
        None if end is None else T0 + end,
        0.0,
        (0, 0, 0, 0),
        None,
        "",
        None if input_ is None else json.dumps(input_, separators=(",", ":")),
        None if output is None else json.dumps(output),
        None if salvaged is None else json.dumps(salvaged),
    )


def lanes_of(axis: TimeAxis) -> dict[Lane, list[tuple[int, float, float | None, SpanState]]]:
    return {
        lane: [
            (s.seq, s.start - T0, None if s.end is None else s.end - T0, s.state)
            for s in axis.spans(lane)
        ]
        for lane in LANES
    }


def a_run() -> list[StepEntry]:
    return [
        entry(1, StepKind.MODEL_CALL, 0, 2, name="demo"),
        entry(2, StepKind.TOOL_CALL, 2, 3, name="read_file"),
        entry(3, StepKind.APPROVAL, 3, 100),
        entry(4, StepKind.TOOL_CALL, 100, 101, name="write_file"),
        entry(5, StepKind.SLEEP, 101, 400),
        entry(
            6,
            StepKind.MODEL_CALL,
            400,
            401,
            status=StepStatus.FAILED,
            output={"error_code": "rate_limited", "partial": ""},
        ),
        entry(7, StepKind.MODEL_CALL, 460, 470),
        entry(8, StepKind.BUDGET, 470, 480),
        entry(9, StepKind.QUESTION, 480, 500),
        entry(10, StepKind.STEER, 500, 500),
        entry(11, StepKind.MODEL_CALL, 500 + IDLE_GAP_S + 100, 700),
    ]


def test_steps_go_to_their_lanes_and_waits_by_reason() -> None:
    lanes = lanes_of(TimeAxis(a_run(), live=False))
    assert [s[0] for s in lanes[Lane.MODEL]] == [1, 6, 7, 11]
    assert [s[0] for s in lanes[Lane.TOOLS]] == [2, 4]
    assert lanes[Lane.APPROVAL] == [(3, 3.0, 100.0, SpanState.OK)]
    assert lanes[Lane.TIMER] == [(5, 101.0, 400.0, SpanState.OK)]
    assert lanes[Lane.RATE_LIMIT] == [(6, 401.0, 460.0, SpanState.OK)]
    assert lanes[Lane.BUDGET] == [(8, 470.0, 480.0, SpanState.OK)]
    assert lanes[Lane.QUESTION] == [(9, 480.0, 500.0, SpanState.OK)]
    assert [s[0] for s in lanes[Lane.OTHER]] == [10]


def test_hibernation_covers_waits_rate_limits_and_idle_gaps() -> None:
    lanes = lanes_of(TimeAxis(a_run(), live=False))
    assert [(s[1], s[2]) for s in lanes[Lane.HIBERNATION]] == [
        (3.0, 100.0),  # approval
        (101.0, 400.0),  # timer
        (401.0, 460.0),  # rate limit
        (470.0, 480.0),  # budget
        (480.0, 500.0),  # question
        (500.0, 500 + IDLE_GAP_S + 100),  # nothing ran: paused or stopped
    ]


def test_retried_salvaged_failed_open_and_in_doubt_states() -> None:
    steps = [
        entry(1, StepKind.MODEL_CALL, 0, 1, status=StepStatus.FAILED, output={"partial": ""}),
        entry(2, StepKind.MODEL_CALL, 1, 2, attempt=2, salvaged=["half an answer"]),
        entry(3, StepKind.TOOL_CALL, 2, 3, attempt=2),
        entry(4, StepKind.TOOL_CALL, 3, 4, status=StepStatus.FAILED),
        entry(5, StepKind.TOOL_CALL, 4, None),
    ]
    live = {s.seq: s.state for s in TimeAxis(steps, live=True).all_spans()}
    assert live == {
        1: SpanState.RETRIED,
        2: SpanState.SALVAGED,
        3: SpanState.RETRIED,
        4: SpanState.FAILED,
        5: SpanState.OPEN,
    }
    axis = TimeAxis(steps, live=True)
    assert axis.spans(Lane.TOOLS)[-1].end is None
    axis.set_live(False)
    last = axis.spans(Lane.TOOLS)[-1]
    assert last.state == SpanState.IN_DOUBT and last.end == last.start


def test_an_open_wait_grows_with_the_clock() -> None:
    axis = TimeAxis([entry(1, StepKind.MODEL_CALL, 0, 1), entry(2, StepKind.APPROVAL, 1, None)])
    wait = axis.spans(Lane.APPROVAL)[0]
    assert wait.state == SpanState.OPEN and wait.end is None
    assert wait.end_at(T0 + 50) == T0 + 50
    assert axis.extent(T0 + 50) == (T0, T0 + 50)
    assert axis.has_open()


def test_incremental_updates_equal_a_full_rebuild() -> None:
    rng = random.Random(7)
    steps = a_run()
    axis = TimeAxis(live=True)
    shown: dict[int, StepEntry] = {}
    for e in steps:
        # Each step first arrives open, then closed (as a live run's poller sees it).
        opened = entry(e.seq, e.kind, e.started_at - T0, None, name=e.name)
        axis.update([opened])
        shown[e.seq] = opened
        if rng.random() < 0.8:
            axis.update([e])
            shown[e.seq] = e
        assert lanes_of(axis) == lanes_of(TimeAxis(shown.values(), live=True))
    axis.update(steps)
    assert lanes_of(axis) == lanes_of(TimeAxis(steps, live=True))
    assert axis.update(steps) == 0


def test_bars_keep_every_covered_column_and_are_bounded_by_the_width() -> None:
    rng = random.Random(3)
    steps: list[StepEntry] = []
    t = 0.0
    for seq in range(1, 5001):
        d = rng.choice([0.001, 0.01, 0.2, 3.0, 40.0])
        steps.append(entry(seq, StepKind.TOOL_CALL, t, t + d))
        t += d + rng.choice([0.0, 0.5, 5.0])
    axis = TimeAxis(steps, live=False)
    width = 300
    for t0, t1 in [(0.0, t), (t / 3, t / 2), (100.0, 160.0)]:
        lo, hi = T0 + t0, T0 + t1
        bars = axis.bars(Lane.TOOLS, lo, hi, width, now=hi)
        assert len(bars) <= width
        drawn: set[int] = set()
        for b in bars:
            assert 0 <= b.x0 <= b.x1 < width
            drawn.update(range(b.x0, b.x1 + 1))
        per_px = (hi - lo) / width
        covered: set[int] = set()
        for s in axis.spans(Lane.TOOLS):
            end = s.end_at(hi)
            if end < lo or s.start > hi:
                continue
            first = max(0, int((s.start - lo) / per_px))
            last = min(width - 1, int((end - lo) / per_px))
            covered.update(range(first, last + 1))
        assert covered == drawn
        assert sum(b.merged for b in bars) >= len(bars)


def test_span_at_finds_the_bar_under_the_pointer() -> None:
    axis = TimeAxis(a_run(), live=False)
    span = axis.span_at(Lane.TOOLS, T0 + 100.5, 0.1, now=T0 + 1000)
    assert span is not None and span.seq == 4
    assert axis.span_at(Lane.TOOLS, T0 + 50, 1.0, now=T0 + 1000) is None


def test_ticks_go_from_milliseconds_to_days() -> None:
    assert tick_step(0.01, 10) == 0.001
    assert tick_step(60, 10) == 10.0
    assert tick_step(86400 * 3, 10) == 12 * 3600.0
    assert tick_step(86400 * 1000, 10) >= 86400 * 100


def test_an_economy_call_is_a_batch_wait_then_a_mark_where_its_answer_came() -> None:
    economy = {"model": "claude-sonnet-5-5", "messages": 3, "mode": "economy"}
    axis = TimeAxis(
        [
            entry(1, StepKind.MODEL_CALL, 0, 2),
            entry(2, StepKind.TOOL_CALL, 2, 3),
            entry(3, StepKind.MODEL_CALL, 3, 1803, input_=economy),
            entry(4, StepKind.MODEL_CALL, 1804, None, input_=economy),
        ],
        live=False,
    )
    lanes = lanes_of(axis)
    assert lanes[Lane.BATCH] == [
        (3, 3.0, 1803.0, SpanState.OK),
        (4, 1804.0, None, SpanState.OPEN),  # out in a batch: open, though no worker holds it
    ]
    assert [s[:3] for s in lanes[Lane.HIBERNATION]] == [(3, 3.0, 1803.0), (4, 1804.0, None)]
    # The streamed call keeps its bar; the batched one is a mark where its result came.
    assert lanes[Lane.MODEL] == [(1, 0.0, 2.0, SpanState.OK), (3, 1803.0, 1803.0, SpanState.OK)]
    assert Lane.BATCH.is_wait and Lane.BATCH.label == "Wait: batch"


def test_neighbouring_bars_group_and_their_labels_say_what_repeats() -> None:
    from desktop_agent.client.timeaxis import Bar, Group, group_bars, group_label

    span = Span(Lane.TOOLS, 0.0, 1.0, 1, StepKind.TOOL_CALL, "tool read_file", SpanState.OK)
    bars = [Bar(0, 0, span, 3), Bar(2, 4, span, 1), Bar(20, 21, span, 2)]
    assert group_bars(bars) == [Group(0, 4, 4), Group(20, 21, 2)]
    assert group_label({"tool read_file": 270}) == "270 × read_file"
    assert group_label({"tool read_file": 2, "tool web_fetch": 1}) == "3 steps"
    assert group_label({"model demo": 1}) == "demo"


def test_ticks_read_as_time_since_the_run_began() -> None:
    from desktop_agent.client.timeaxis import elapsed_label

    assert elapsed_label(0.0, 60.0) == "0"
    assert elapsed_label(45.0, 15.0) == "+45s"
    assert elapsed_label(5400.0, 1800.0) == "+1h 30m"
    assert elapsed_label(90000.0, 3600.0) == "+1d 1h"
    assert elapsed_label(1.25, 0.05) == "+1.25s"
