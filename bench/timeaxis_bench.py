"""The time-axis view: opening 10,000- and 100,000-step runs; stalls while a run grows.

    python bench/timeaxis_bench.py [--repeats 5] [--grow-seconds 10]

Open time: from the moment a run's steps are handed to the view to its first paint
completed (``set_entries`` then ``repaint``), several tries, min and median; as a baseline
in the same process, the list timeline's open time on the same steps (the model reset
then its viewport painted). The steps are made in memory (a realistic mix: model calls,
tools, retried and salvaged attempts, approvals, timers, rate limits, questions): the
database read is the poller's, measured by ``bench/gui_bench.py``; here only the view.

Growth: the view and the list side by side, visible, showing a 10,000-step run that
grows by a few steps every 50 ms (its newest step open, then closed, as the poller
delivers them) while the app's one-second tick runs; a 5 ms precise timer measures the
event loop's longest stall. Offscreen unless ``QT_QPA_PLATFORM`` says otherwise.
Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from gui_bench import StallMeter, spin  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QSplitter  # noqa: E402

from desktop_agent.client.views import StepEntry  # noqa: E402
from desktop_agent.domain import EffectClass, StepKind, StepStatus  # noqa: E402
from desktop_agent.gui.app import create_app  # noqa: E402
from desktop_agent.gui.models.steps import StepTimelineModel  # noqa: E402
from desktop_agent.gui.widgets.timeaxis import TimeAxisPanel  # noqa: E402
from desktop_agent.gui.widgets.timeline import TimelineView  # noqa: E402

TARGETS_MS = {10_000: 300.0, 100_000: 1000.0}
STALL_TARGET_MS = 50.0

_MODEL_OUT = json.dumps(
    {
        "content": [
            {"type": "text", "text": "Looking at the next part of the sources."},
            {"type": "tool_use", "id": "tu", "name": "read_file", "input": {"path": "a.md"}},
        ]
    }
)
_TOOL_OUT = json.dumps({"content": "alpha " * 30, "is_error": False})
_RATE = json.dumps({"partial": "", "error_code": "rate_limited"})


def _entry(
    seq: int,
    kind: StepKind,
    name: str,
    start: float,
    end: float | None,
    *,
    status: StepStatus = StepStatus.COMPLETED,
    attempt: int = 1,
    output: str | None = None,
    salvaged: str | None = None,
) -> StepEntry:
    return StepEntry(
        "bench",
        seq,
        kind,
        name,
        StepStatus.STARTED if end is None else status,
        attempt,
        EffectClass.READ_ONLY if kind == StepKind.TOOL_CALL else None,
        start,
        end,
        0.0014 if kind == StepKind.MODEL_CALL else 0.0,
        (1200, 40, 0, 0) if kind == StepKind.MODEL_CALL else (0, 0, 0, 0),
        None,
        "",
        '{"model": "demo"}',
        output,
        salvaged,
    )


def make_run(steps: int, start: float, seed: int = 1) -> list[StepEntry]:
    """A run of ``steps`` finished steps: mostly model and tool calls, some waits."""
    rng = random.Random(seed)
    out: list[StepEntry] = []
    t = start
    for seq in range(1, steps + 1):
        roll = rng.random()
        if seq % 2:
            took = rng.uniform(0.5, 12.0)
            if roll < 0.01:
                out.append(
                    _entry(
                        seq,
                        StepKind.MODEL_CALL,
                        "demo",
                        t,
                        t + 1,
                        status=StepStatus.FAILED,
                        output=_RATE,
                    )
                )
                t += 1 + rng.uniform(20, 120)
                continue
            salvaged = '["half a thought"]' if roll < 0.02 else None
            out.append(
                _entry(
                    seq,
                    StepKind.MODEL_CALL,
                    "demo",
                    t,
                    t + took,
                    attempt=2 if salvaged else 1,
                    output=_MODEL_OUT,
                    salvaged=salvaged,
                )
            )
        elif roll < 0.005:
            took = rng.uniform(60, 3600)
            out.append(_entry(seq, StepKind.APPROVAL, "write_file", t, t + took, output="{}"))
        elif roll < 0.008:
            took = rng.uniform(60, 900)
            out.append(_entry(seq, StepKind.SLEEP, "sleep", t, t + took, output="{}"))
        elif roll < 0.009:
            took = rng.uniform(60, 900)
            out.append(_entry(seq, StepKind.QUESTION, "question", t, t + took, output="{}"))
        else:
            took = rng.uniform(0.01, 3.0)
            failed = roll > 0.99
            out.append(
                _entry(
                    seq,
                    StepKind.TOOL_CALL,
                    "read_file",
                    t,
                    t + took,
                    status=StepStatus.FAILED if failed else StepStatus.COMPLETED,
                    output=_TOOL_OUT,
                )
            )
        t += took
    return out


class Bench:
    """The list and the time axis side by side, as in the run pane."""

    def __init__(self) -> None:
        self.split = QSplitter()
        self.model = StepTimelineModel(self.split)
        self.timeline = TimelineView(self.split)
        self.timeline.setModel(self.model)
        self.panel = TimeAxisPanel(self.split)
        self.split.addWidget(self.timeline)
        self.split.addWidget(self.panel)
        self.split.resize(1600, 700)
        self.split.setSizes([700, 900])
        self.split.show()

    def open_axis(self, entries: list[StepEntry]) -> float:
        """Milliseconds from handing the steps to the view to its first paint completed."""
        self.panel.view.set_entries((), live=False)
        QApplication.processEvents()
        clock = time.perf_counter()
        self.panel.view.set_entries(entries, live=False)
        self.panel.view.repaint()
        return (time.perf_counter() - clock) * 1000

    def open_list(self, entries: list[StepEntry]) -> float:
        """The same for the list timeline (the baseline)."""
        self.model.reset(None)
        QApplication.processEvents()
        clock = time.perf_counter()
        self.model.reset("bench", entries)
        self.timeline.viewport().repaint()
        return (time.perf_counter() - clock) * 1000


def measure_growth(
    app: QApplication, bench: Bench, seconds: float, *, axis: bool = True
) -> tuple[StallMeter, int]:
    """The longest event-loop stall while a live 10,000-step run grows.

    With ``axis`` the time axis is visible beside the list; else the list is alone (the
    baseline).
    """
    bench.panel.setVisible(axis)
    now = time.time()
    base = make_run(10_000, now - 10_000 * 4.0, seed=2)
    bench.model.reset("bench", base)
    bench.panel.view.set_entries(base, live=True)
    seq = len(base)
    state: dict[str, int | None] = {"open": None}

    def grow() -> None:
        nonlocal seq
        batch: list[StepEntry] = []
        t = time.time()
        opened = state["open"]
        if opened is not None:  # the open step finishes
            batch.append(_entry(opened, StepKind.MODEL_CALL, "demo", t - 0.05, t))
        for _ in range(3):
            seq += 1
            batch.append(
                _entry(seq, StepKind.TOOL_CALL, "read_file", t, t + 0.01, output=_TOOL_OUT)
            )
        seq += 1
        batch.append(_entry(seq, StepKind.MODEL_CALL, "demo", t, None))
        state["open"] = seq
        bench.model.merge(batch)
        bench.panel.view.update_entries(batch)

    def tick() -> None:
        bench.panel.view.tick()
        bench.timeline.viewport().update()

    grower = QTimer()
    grower.setInterval(50)
    grower.timeout.connect(grow)
    ticker = QTimer()
    ticker.setInterval(1000)
    ticker.timeout.connect(tick)
    spin(app, 0.5)
    meter = StallMeter()
    meter.start()
    grower.start()
    ticker.start()
    spin(app, seconds)
    grower.stop()
    ticker.stop()
    meter.stop()
    return meter, seq - len(base)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grow-seconds", type=float, default=10.0)
    args = parser.parse_args()
    app = create_app()
    bench = Bench()
    spin(app, 0.3)
    ok = True
    for steps, target in TARGETS_MS.items():
        entries = make_run(steps, time.time() - steps * 4.0)
        axis = [bench.open_axis(entries) for _ in range(args.repeats)]
        listed = [bench.open_list(entries) for _ in range(args.repeats)]
        med = statistics.median(axis)
        print(
            f"open a {steps:,}-step run in the time axis: min {min(axis):.0f} ms, "
            f"median {med:.0f} ms ({args.repeats} tries); the list timeline on the same "
            f"steps: min {min(listed):.0f} ms, median {statistics.median(listed):.0f} ms "
            f"(ratio {med / statistics.median(listed):.2f}); target < {target:.0f} ms: "
            f"{'met' if med < target else 'MISSED'}"
        )
        ok = ok and med < target
    base, _ = measure_growth(app, bench, args.grow_seconds, axis=False)
    meter, added = measure_growth(app, bench, args.grow_seconds)
    stall = meter.stall_ms()
    print(
        f"baseline, the list alone: longest stall {base.stall_ms():.1f} ms, p99 "
        f"{base.percentile_ms(0.99):.1f} ms ({len(base.gaps)} ticks of 5 ms)"
    )
    print(
        f"a live 10,000-step run growing by {added} steps over {args.grow_seconds:.0f} s, "
        f"both views visible: longest stall {stall:.1f} ms, p99 "
        f"{meter.percentile_ms(0.99):.1f} ms ({len(meter.gaps)} ticks of 5 ms); "
        f"target < {STALL_TARGET_MS:.0f} ms: {'met' if stall < STALL_TARGET_MS else 'MISSED'}"
    )
    ok = ok and stall < STALL_TARGET_MS
    bench.split.close()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
