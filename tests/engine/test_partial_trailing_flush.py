"""The partial answer's saver leaves nothing unsaved behind a stall, and no thread behind.

``PartialStreamer`` saves a streaming model call's text and spend at most once per
``partial_flush_s``. A delta that arrives inside that interval is saved when it ends, even
if nothing more streams (the API stalls, the worker freezes): a trailing flush, made by the
process's one flusher thread, shared by all streamers, started when one is scheduled and
ended when none is pending. These tests drive the streamer against a journal that records
each save, with a hand-moved clock for the throttle where a count must be exact. They
wait for what they expect on a condition (with a generous timeout), never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import cast

import pytest

from desktop_agent.domain import JSON, AgentSpec, Run, RunStatus, StepKind, Usage
from desktop_agent.domain.errors import LeaseLost, RunCancelled
from desktop_agent.engine.flusher import THREAD_NAME
from desktop_agent.engine.model_calls import PartialStreamer, stream_model
from desktop_agent.engine.ports import (
    CancelToken,
    JournalStore,
    ModelRequest,
    ModelResponse,
    Tool,
)
from desktop_agent.engine.run_state import EngineConfig, RunState
from tests.helpers.fakes import FakeClock

WAIT_S = 10.0
"""How long a test waits for what it expects (generous: a loaded machine is slow)."""


@dataclass(frozen=True)
class Save:
    text: str
    usage: Usage | None
    cost_usd: float
    thread: str
    at: float
    """The throttle's clock when the save was made."""


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds


class SavingJournal:
    """The part of the journal a streaming model call writes: partial saves, events.

    Records each save (and the outcome's moment, through the crash hook) and lets a test
    wait for a condition on them. ``refuse`` makes every save raise ``LeaseLost``.
    """

    def __init__(self, ticks: Callable[[], float] | None = None) -> None:
        self.saves: list[Save] = []
        self.log: list[str] = []
        self.refuse = False
        self.ticks = ticks or (lambda: 0.0)
        self._changed = threading.Condition()

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: object = None,
    ) -> None:
        with self._changed:
            self.log.append("save")
            self._changed.notify_all()
            if self.refuse:
                raise LeaseLost(f"run {run_id} was claimed by another worker")
            name = threading.current_thread().name
            self.saves.append(Save(text, usage, cost_usd, name, self.ticks()))
            self._changed.notify_all()

    def record_event(self, run_id: str, *args: object, **kwargs: object) -> None:
        with self._changed:
            self.log.append("event")

    def outcome_recorded(self, point: str) -> None:
        """The crash hook: ``after_effect`` is where the call's outcome is recorded."""
        if point == "after_effect":
            with self._changed:
                self.log.append("outcome")

    def texts(self) -> list[str]:
        """The texts saved so far."""
        with self._changed:
            return [s.text for s in self.saves]

    def wait_for(self, condition: Callable[[], bool]) -> bool:
        """Whether ``condition`` (read under the journal's lock) became true in time."""
        with self._changed:
            return self._changed.wait_for(condition, timeout=WAIT_S)


class NoTools:
    def get(self, name: str) -> Tool | None:
        return None


def flushers() -> list[threading.Thread]:
    """The flusher threads alive now (one at most), found by name."""
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def run_state(journal: SavingJournal, tmp_path: Path, flush_s: float) -> RunState:
    run = Run(
        id="run-1",
        goal="Summarise the sources",
        status=RunStatus.RUNNING,
        spec=AgentSpec(model="demo", system_prompt=""),
        workspace=str(tmp_path),
    )
    return RunState(
        run=run,
        store=cast(JournalStore, journal),  # only what a model call writes is used
        clock=FakeClock(),
        cfg=EngineConfig(partial_flush_s=flush_s, crash_hook=journal.outcome_recorded),
        cancel=CancelToken(),
        tools=NoTools(),
        model_for=lambda name: StallingModel(lambda: None),
    )


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def journal(ticks: Ticks) -> SavingJournal:
    return SavingJournal(ticks)


@pytest.fixture
def streamer(journal: SavingJournal, ticks: Ticks, tmp_path: Path) -> Iterator[PartialStreamer]:
    # The flusher re-reads the hand-moved clock at least every 50 ms of real time.
    rs = run_state(journal, tmp_path, flush_s=0.05)
    s = PartialStreamer(rs, 1, monotonic=ticks)
    yield s
    s.close()


# --------------------------------------------------------------------------- the streamer


def test_a_delta_inside_the_interval_is_saved_when_it_ends_with_no_delta_after_it(
    streamer: PartialStreamer, journal: SavingJournal, ticks: Ticks
) -> None:
    streamer.on_usage(Usage(1200, 1), 0.004)  # the prompt: saved at once
    assert [s.text for s in journal.saves] == [""]

    streamer.on_text("Half an answer")  # inside the interval, then silence
    assert len(journal.saves) == 1  # the clock has not moved: not yet due
    ticks.advance(0.05)  # the interval ends; nothing more streams

    assert journal.wait_for(lambda: len(journal.saves) == 2), "the delta was never saved"
    trailing = journal.saves[1]
    assert (trailing.text, trailing.usage) == ("Half an answer", Usage(1200, 1))
    assert trailing.thread.startswith("partial-flush")  # not the streaming thread
    assert streamer.rs.saved_spend[1] == (Usage(1200, 1), 0.004)


def test_a_burst_inside_the_interval_is_one_save_and_close_cancels_the_pending_one(
    streamer: PartialStreamer, journal: SavingJournal, ticks: Ticks
) -> None:
    streamer.on_usage(Usage(1200, 1), 0.004)
    for i in range(200):
        streamer.on_text(f"{i} ")
    ticks.advance(0.05)
    assert journal.wait_for(lambda: len(journal.saves) == 2)
    assert journal.saves[1].text == "".join(f"{i} " for i in range(200))

    for i in range(200, 400):  # the clock stands still: the throttle holds them all
        streamer.on_text(f"{i} ")
    assert len(journal.saves) == 2
    assert flushers()  # a trailing flush is pending

    streamer.close()
    assert flushers() == []  # close ended it, and left no thread
    ticks.advance(10.0)  # long past due: nothing is left that could save
    assert len(journal.saves) == 2

    streamer.flush()  # the final save, on the caller's thread, as at the end of a call
    assert len(journal.saves) == 3
    assert journal.saves[2].text == "".join(f"{i} " for i in range(400))
    assert not journal.saves[2].thread.startswith("partial-flush")


def test_saves_are_at_least_one_interval_apart_under_a_steady_stream(
    journal: SavingJournal, ticks: Ticks, tmp_path: Path
) -> None:
    rs = run_state(journal, tmp_path, flush_s=0.25)
    streamer = PartialStreamer(rs, 1, monotonic=ticks)
    try:
        for i in range(100):  # a delta every 1/16 s of the throttle's clock, for 6.25 s
            ticks.advance(0.0625)
            streamer.on_text(f"{i} ")
    finally:
        streamer.close()
    assert flushers() == []
    times = [s.at for s in journal.saves]
    assert all(b - a >= 0.25 for a, b in pairwise(times)), times
    assert 1 <= len(times) <= 100 * 0.0625 / 0.25 + 1


def test_a_trailing_save_that_finds_the_run_taken_is_raised_on_the_streaming_thread(
    streamer: PartialStreamer, journal: SavingJournal, ticks: Ticks
) -> None:
    streamer.on_usage(Usage(1200, 1), 0.004)
    journal.refuse = True  # another worker claims the run
    streamer.on_text("Half an answer")
    ticks.advance(0.05)
    assert journal.wait_for(lambda: journal.log.count("save") == 2)  # the trailing save
    streamer.close()
    assert flushers() == []
    with pytest.raises(LeaseLost):
        streamer.on_text(" and more")  # the next callback learns it
    with pytest.raises(LeaseLost):
        streamer.flush()  # and so does the final save
    assert streamer.rs.saved_spend[1] == (Usage(1200, 1), 0.004)  # what the last save held
    assert journal.log.count("save") == 2  # nothing saved after the refusal


def test_a_call_that_never_stalls_in_the_interval_starts_no_thread(
    journal: SavingJournal, ticks: Ticks, tmp_path: Path
) -> None:
    rs = run_state(journal, tmp_path, flush_s=0.0)  # every delta is due: saved at once
    streamer = PartialStreamer(rs, 1, monotonic=ticks)
    for i in range(20):
        streamer.on_text(f"{i} ")
        assert flushers() == []
    streamer.close()
    assert len(journal.saves) == 20


# --------------------------------------------------------------------------- one flusher


def test_fifty_streamers_with_a_pending_save_share_one_flusher_that_ends_after_them(
    journal: SavingJournal, ticks: Ticks, tmp_path: Path
) -> None:
    rs = run_state(journal, tmp_path, flush_s=0.05)
    streamers = [PartialStreamer(rs, seq, monotonic=ticks) for seq in range(1, 51)]
    alive: list[int] = []
    try:
        for s in streamers:
            s.on_usage(Usage(1200, 1), 0.004)  # the prompt: saved at once
            s.on_text(f"answer {s.seq}")  # inside the interval: a trailing save pending
            alive.append(len(flushers()))
        assert alive == [1] * 50  # one flusher for all fifty, from the first on
        (flusher,) = flushers()
        ticks.advance(0.05)  # all fifty are due; nothing more streams

        def trailing() -> list[str]:
            return [s.text for s in journal.saves if s.thread == THREAD_NAME]

        assert journal.wait_for(lambda: len(trailing()) == 50), trailing()
        assert sorted(trailing()) == sorted(f"answer {seq}" for seq in range(1, 51))
        assert all(rs.saved_spend[seq] == (Usage(1200, 1), 0.004) for seq in range(1, 51))
        assert len(flushers()) <= 1
    finally:
        for s in streamers:
            s.close()
    flusher.join(WAIT_S)  # nothing pending: it ended by itself (or close ended it)
    assert not flusher.is_alive()
    assert flushers() == []


class HeldJournal(SavingJournal):
    """A journal whose save of one step's text on the flusher's thread waits for a gate.

    Stands for a save blocked on a database lock. ``held`` is set once that save waits.
    """

    def __init__(self, ticks: Callable[[], float], text: str) -> None:
        super().__init__(ticks)
        self.text = text
        self.held = threading.Event()
        self.gate = threading.Event()

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: object = None,
    ) -> None:
        if text == self.text and threading.current_thread().name == THREAD_NAME:
            self.held.set()
            self.gate.wait(WAIT_S)  # released by the test (or the timeout, if it failed)
        super().save_partial(run_id, seq, text, usage, cost_usd, lease)


def test_closing_a_streamer_never_waits_for_another_streamers_save_under_way(
    tmp_path: Path,
) -> None:
    """The flusher is inside A's save (held on a lock): B's close returns regardless.

    C, due meanwhile, waits for A's save (the one flusher makes them one after the other)
    and is saved when it ends; B, closed with its trailing save pending, is never saved.
    """
    clocks = {"A": Ticks(), "B": Ticks(), "C": Ticks()}
    journal = HeldJournal(clocks["A"], "slow answer")
    rs = run_state(journal, tmp_path, flush_s=0.05)
    a, b, c = (PartialStreamer(rs, seq, monotonic=clocks[n]) for seq, n in enumerate("ABC", 1))
    try:
        for s, text in ((a, "slow answer"), (b, "closed answer"), (c, "waiting answer")):
            s.on_usage(Usage(1200, 1), 0.004)
            s.on_text(text)  # each has a trailing save pending
        (flusher,) = flushers()
        clocks["A"].advance(0.05)  # A's trailing save is due: the flusher starts it
        assert journal.held.wait(WAIT_S), "A's trailing save never started"

        b.close()  # had it waited for A's save, that would have ended by its timeout
        assert not journal.gate.is_set() and "slow answer" not in journal.texts()

        clocks["C"].advance(0.05)  # due, but the flusher is inside A's save
        clocks["B"].advance(10.0)  # long past due, but closed: nothing saves it
        assert "waiting answer" not in journal.texts()
        journal.gate.set()  # the lock is released
        assert journal.wait_for(lambda: "waiting answer" in journal.texts())
        assert "slow answer" in journal.texts()
    finally:
        journal.gate.set()
        for s in (a, b, c):
            s.close()
    flusher.join(WAIT_S)
    assert not flusher.is_alive()
    assert "closed answer" not in journal.texts()  # no save of B after its close
    b.flush()  # the final save, on the caller's thread
    assert journal.saves[-1].text == "closed answer"
    assert journal.saves[-1].thread != THREAD_NAME


# --------------------------------------------------------------------------- stream_model


class StallingModel:
    """Streams the prompt's usage and one piece of text, then stalls in ``during``.

    ``during`` returns what the call does then: None to answer, or an exception to raise.
    """

    def __init__(self, during: Callable[[], BaseException | None]) -> None:
        self.during = during

    def context_window(self, model: str) -> int:
        return 200_000

    def compacts_on_server(self, model: str) -> bool:
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        return 0.01

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        assert on_usage is not None
        on_usage(Usage(1200, 1), 0.004)
        on_text("Half an answer")
        raised = self.during()
        if raised is not None:
            raise raised
        on_usage(Usage(1200, 9), 0.005)
        return ModelResponse(
            content=[{"type": "text", "text": "Half an answer."}],
            stop_reason="end_turn",
            usage=Usage(1200, 9),
            cost_usd=0.005,
            model=request.model,
        )


REQUEST = ModelRequest(
    model="demo",
    system="",
    messages=[{"role": "user", "content": "Summarise the sources"}],
    tools=[],
    max_tokens=1024,
)
INPUT: JSON = {"model": "demo", "messages": 1}


def test_a_stalled_call_has_its_last_delta_saved_while_it_stalls(
    journal: SavingJournal, tmp_path: Path
) -> None:
    """The real clock: whichever thread saves it, the delta is saved with none after it."""
    rs = run_state(journal, tmp_path, flush_s=0.25)
    seen: list[bool] = []

    def stall() -> None:
        seen.append(journal.wait_for(lambda: "Half an answer" in [s.text for s in journal.saves]))

    response = stream_model(rs, 1, StepKind.MODEL_CALL, INPUT, REQUEST, StallingModel(stall))
    assert seen == [True], "the last delta was not saved while the call stalled"
    assert response.stop_reason == "end_turn"
    assert flushers() == []
    assert journal.saves[-1].usage == Usage(1200, 9)  # the final save, as before
    assert rs.saved_spend[1] == (Usage(1200, 9), 0.005)


@pytest.mark.parametrize(
    "raised",
    [RunCancelled("cancelled during the model's answer"), RuntimeError("the adapter broke")],
    ids=["cancelled", "crashed"],
)
def test_an_interrupted_call_leaves_no_thread_and_no_save_after_its_outcome(
    journal: SavingJournal, tmp_path: Path, raised: BaseException
) -> None:
    # An hour's interval: the delta's trailing flush is surely pending when the call ends.
    rs = run_state(journal, tmp_path, flush_s=3600.0)
    pending: list[int] = []

    def interrupt() -> BaseException:
        pending.append(len(flushers()))
        return raised

    with pytest.raises(type(raised)):
        stream_model(rs, 1, StepKind.MODEL_CALL, INPUT, REQUEST, StallingModel(interrupt))
    assert pending == [1]
    assert flushers() == []  # cancelled and joined before the call unwound
    assert [s.text for s in journal.saves] == [""]  # the prompt's save; the pending one never
    if isinstance(raised, RunCancelled):
        assert journal.log == ["save", "outcome"]  # no save after the outcome
        assert rs.outcome is not None and rs.outcome.output == {"partial": "Half an answer"}


def test_without_a_thread_to_be_had_the_delta_waits_for_the_next_save(
    streamer: PartialStreamer, journal: SavingJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As before trailing saves: a streamer that cannot start its flusher still streams."""

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    streamer.on_usage(Usage(1200, 1), 0.004)
    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refuse)
        streamer.on_text("Half an answer")  # inside the interval: no flusher, no error
    assert flushers() == []
    streamer.close()
    streamer.flush()
    assert [s.text for s in journal.saves] == ["", "Half an answer"]
