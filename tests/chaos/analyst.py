"""The analyst of the chaos tests: answers approvals and decides about effects in doubt.

Decisions are random (approve four times in five; skip, retry or mark done an effect in
doubt) but fixed by the seed and what they are about (the run, the step), not by the order
in which things happen. They go through the real CLI (every third decision about an effect
in doubt) or the client API, and each is recorded with whether it was refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from desktop_agent.domain import CommandKind, RunStatus
from desktop_agent.domain.errors import DesktopAgentError
from tests.chaos.chaos import rng_for, short
from tests.chaos.harness import ChaosLab

DECISIONS = ("skip", "retry", "mark_done")


@dataclass(frozen=True)
class Decision:
    """What the analyst decided.

    Attributes:
        kind: ``resolve``, ``approve``, ``reject`` or ``resume``.
        seq: the step decided about (an approval's step, the step in doubt).
        action: skip, retry, mark_done, approve, reject; for a resume, why it was needed.
        marker: the effect decided about.
        via: ``cli`` or ``api``.
        refused: why the CLI or the client refused it ("" if it did not).
    """

    kind: str
    run_id: str
    seq: int | None
    action: str
    marker: str | None
    via: str
    refused: str = ""


class Analyst:
    """Answers approvals and resolves effects in doubt, at random, recording each decision.

    Args:
        lab: the lab.
        seed: the seed of every decision.
        cli_every: every n-th decision goes through the real CLI, the others through
            the client API.
    """

    def __init__(self, lab: ChaosLab, seed: int, cli_every: int = 3) -> None:
        self.lab = lab
        self.seed = seed
        self.cli_every = cli_every
        self.decisions: list[Decision] = []
        self.errors: list[str] = []
        self._answered: dict[str, int] = {}
        """Approvals answered (-1), or how many answers were refused so far."""
        self._parked: set[tuple[str, str]] = set()
        self._resolves = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="analyst", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        """Start answering."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering (its last error, if any, is re-raised)."""
        self._stop.set()
        self._thread.join(timeout=90)
        if self.error is not None:
            raise self.error

    def retries(self, marker: str) -> int:
        """How many times the analyst chose retry for the effect named ``marker``."""
        return sum(
            1
            for d in self.decisions
            if d.marker == marker and d.action == "retry" and not d.refused
        )

    def rejected(self, marker: str) -> bool:
        """Whether the analyst rejected the call named ``marker``."""
        return any(
            d.marker == marker and d.action == "reject" and not d.refused for d in self.decisions
        )

    def stuck(self) -> bool:
        """Whether every run ended, or waits for a decision the analyst cannot make.

        A run parked by an error whose resume the analyst already tried gets no further:
        waiting longer for it would only make the failing test slower.
        """
        return all(
            run.status.is_terminal
            or (
                run.status == RunStatus.NEEDS_ATTENTION
                and run.attention_seq is None
                and (run.id, run.status_message) in self._parked
            )
            for run in self.lab.runs()
        )

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._answer_approvals()
                self._resolve_doubts()
                self._stop.wait(0.05)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _answer_approvals(self) -> None:
        for approval in self.lab.client.approvals():
            tries = self._answered.get(approval.id, 0)
            if tries < 0 or tries >= 3:
                continue  # answered (or refused three times: the test reports it)
            key = self.lab.keys[approval.run_id]
            rng = rng_for(self.seed, "approval", key, approval.seq, approval.tool)
            marker = self._marker_in(approval.run_id, str(approval.arguments))
            if rng.random() < 0.8:
                refused = self._client_call(partial(self.lab.client.approve, approval.id))
                self._record("approve", approval.run_id, approval.seq, "approve", marker, refused)
            else:
                refused = self._client_call(partial(self.lab.client.reject, approval.id, "not now"))
                self._record("reject", approval.run_id, approval.seq, "reject", marker, refused)
            self._answered[approval.id] = tries + 1 if refused else -1

    def _resolve_doubts(self) -> None:
        for run in self.lab.client.runs([RunStatus.NEEDS_ATTENTION]):
            pending = self.lab.client.store.pending_commands(run.id)
            if any(c.kind in (CommandKind.RESOLVE, CommandKind.RESUME) for c in pending):
                continue  # our last decision is not applied yet
            if run.attention_seq is None:
                # Parked by an error: the scenario has none. Try a resume, once per error
                # (the test reports these runs, whatever becomes of them).
                if (run.id, run.status_message) in self._parked:
                    continue
                self._parked.add((run.id, run.status_message))
                refused = self._client_call(partial(self.lab.client.resume, run.id))
                self._record("resume", run.id, None, short(run.status_message), None, refused)
                continue
            seq = run.attention_seq
            step = self.lab.client.store.get_step(run.id, seq)
            marker = self._marker_in(run.id, str(step.input))
            n = sum(1 for d in self.decisions if d.run_id == run.id and d.seq == seq)
            rng = rng_for(self.seed, "doubt", self.lab.keys[run.id], seq, n)
            action = rng.choice(DECISIONS)
            self._resolves += 1
            if self._resolves % self.cli_every == 1:
                done = self.lab.cli("resolve", run.id, action)
                refused = done.stderr.strip() if done.returncode != 0 else ""
                self._record("resolve", run.id, seq, action, marker, refused, via="cli")
            else:
                refused = self._client_call(partial(self.lab.client.resolve, run.id, action))
                self._record("resolve", run.id, seq, action, marker, refused)

    def _record(
        self,
        kind: str,
        run_id: str,
        seq: int | None,
        action: str,
        marker: str | None,
        refused: str,
        via: str = "api",
    ) -> None:
        self.decisions.append(Decision(kind, run_id, seq, action, marker, via, refused))
        if refused and refused not in self.errors:
            self.errors.append(f"{kind} {action} of run {run_id} refused: {refused}")

    def _marker_in(self, run_id: str, text: str) -> str | None:
        for action in self.lab.plan_of(run_id):
            if action.marker in text:
                return action.marker
        return None

    @staticmethod
    def _client_call(call: Callable[[], object]) -> str:
        """Make the call; returns why it was refused ("" if it was not)."""
        try:
            call()
        except DesktopAgentError as exc:  # e.g. the run moved on meanwhile
            return str(exc)
        return ""
