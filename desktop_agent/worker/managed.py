"""The driver of runs that follow a Managed Agents session (``agent``: ``managed-agents``).

Registered in :mod:`desktop_agent.worker.agents`. A worker claims such a run like any
other (lease, fencing) and hands it here; one activation reads what the session did since
the last one and ends, holding no thread while the session works: a running session is read
again ``poll_s`` later (the run waits on a timer), an idle one every ``idle_poll_s``. Each
activation:

1. settles what an earlier one left in doubt: an event it wrote it would send and may or
   may not have sent (its ``tool_call`` step is open). A tool confirmation or a message
   found among the session's events was sent: it is not sent again; an interrupt is sent
   again (twice is harmless: the API takes an interrupt of an idle session as a no-op);
2. applies the analyst's commands: pause, stop and cancel interrupt the session
   (``user.interrupt``) and stop following it; a note or an answer is sent as a
   ``user.message``; approve and reject decide the approval; more budget lifts the
   budget's wait;
3. reads the session's events after the journal's cursor and writes them as steps
   (:func:`desktop_agent.agents.managed.import_events`), pricing each model request's
   tokens with :mod:`desktop_agent.llm.pricing` (the adapter imports no other adapter: the
   worker, which may import both, passes the price in);
4. a session that stops with ``requires_action`` on tool uses that need a confirmation
   opens an approval step and its ``approvals`` rows, as the engine's ``open_approvals``
   does (the inbox and the approval dialog show the tool, its arguments and why), and the
   run waits for the decision with no wake time. Once every call is decided, one commit
   closes the approval and writes a ``tool_call`` step per confirmation to send; then each
   ``user.tool_confirmation`` (``allow``, or ``deny`` with the analyst's reason as
   ``deny_message``) is sent and its step closed with the event id the API gave it;
5. checks the run's own budget: past its cost (the steps' prices) or time (the session's
   active seconds), the session is interrupted and the run waits on a ``budget`` step
   shaped as the engine's (``engine/budget.py``), so *extend the budget* works; once
   extended, the session is asked to go on (a ``user.message``) if the run interrupted it.

The session's status decides the run's: running, a waiting timer; idle after its turn,
waiting for the analyst's answer (which is sent to it); terminated, completed. Every write
is fenced by the lease; what the driver knows of the session between activations (the
cursor, the open steps, the sends under way) is the run's snapshot, written in the same
transaction as each step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from desktop_agent.agents.managed import (
    ACTIVE,
    Follow,
    ManagedAgents,
    Price,
    SessionInfo,
    import_events,
    text_of,
)
from desktop_agent.config import Settings
from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalState,
    Command,
    CommandKind,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
)
from desktop_agent.domain.errors import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    TransientError,
)
from desktop_agent.engine.budget import describe
from desktop_agent.engine.ports import (
    CancelToken,
    Clock,
    JournalStore,
    LeaseGuard,
    RunPatch,
    Snapshot,
    StepIntent,
    StepOutcome,
    SystemClock,
)

POLL_S = 2.0
"""Seconds between two readings of a running session."""

IDLE_POLL_S = 30.0
"""Seconds between two readings of an idle session (another client may send it work)."""

READ_LIMIT = 1000
"""The most events one activation reads (one page of the API's list)."""

RETRY_S = 15.0
"""Seconds before another try when the API could not be reached."""

BEFORE_SEND = "managed_before_send"
AFTER_SEND = "managed_after_send"
"""Crash points (``DESKTOP_AGENT_CRASH_AT``): an event's step written, before it is sent;
sent, before its step is closed."""

CONTINUE = (
    "The analyst extended the budget of this work: continue where you stopped when you "
    "were interrupted."
)
"""What a session interrupted at the run's budget is told once the budget is extended."""

_SENDERS = {
    "user.tool_confirmation": "session.confirm",
    "user.interrupt": "session.interrupt",
    "user.message": "session.message",
}
"""The step name of each event desktop-agent sends."""


def list_price(model: str, usage: Usage) -> float:
    """Dollars of ``usage`` on ``model`` at the list prices of :mod:`desktop_agent.llm.pricing`."""
    from desktop_agent.llm.pricing import model_info

    return model_info(model).cost(usage)


class ManagedDriver:
    """Moves Managed Agents runs forward (the engine's ``ForeignAgent`` port).

    Args:
        store: the journal.
        api: the Managed Agents client (the analyst's key).
        settings: the settings (approval deadlines and their default action).
        clock: time of wake-ups and decisions.
        price: dollars of a model request's tokens.
        poll_s: seconds between readings of a running session.
        idle_poll_s: seconds between readings of an idle one.
        crash_hook: the crash tests' hook (see :mod:`desktop_agent.worker.crash`).
        read_limit: the most events one activation reads (the rest the next one, at once).
    """

    def __init__(
        self,
        store: JournalStore,
        api: ManagedAgents,
        settings: Settings,
        *,
        clock: Clock | None = None,
        price: Price = list_price,
        poll_s: float = POLL_S,
        idle_poll_s: float = IDLE_POLL_S,
        crash_hook: Callable[[str], None] | None = None,
        read_limit: int = READ_LIMIT,
    ) -> None:
        self.store = store
        self.read_limit = read_limit
        self.api = api
        self.settings = settings
        self.clock = clock or SystemClock()
        self.price = price
        self.poll_s = poll_s
        self.idle_poll_s = idle_poll_s
        self.crash_hook = crash_hook

    def execute(self, run: Run, cancel: CancelToken, lease: LeaseGuard | None) -> RunStatus:
        """One activation of ``run`` (see the module); its status at the end."""
        return _Activation(self, run, lease).go()


class _Stop(Exception):  # noqa: N818 - not an error: the activation's end
    """Ends the activation: the run's status is written."""


class _Activation:
    def __init__(self, driver: ManagedDriver, run: Run, guard: LeaseGuard | None) -> None:
        self.d = driver
        self.store = driver.store
        self.run = run
        self.guard = guard
        self.sid = run.spec.session_id
        self.last_seq = run.last_seq
        snap = self.store.load_snapshot(run.id)
        state = snap.state if snap is not None and isinstance(snap.state, dict) else {}
        self.f = Follow.from_json(state.get("managed"))

    # ------------------------------------------------------------------ the whole

    def go(self) -> RunStatus:
        try:
            self._go()
        except _Stop:
            pass
        except AuthenticationError as exc:
            self.wait(
                WaitReason.CREDENTIALS,
                None,
                f"{exc}: store a key that can read Managed Agents sessions, then resume",
            )
        except NotFoundError as exc:
            with contextlib.suppress(_Stop):
                self.end(RunStatus.FAILED, f"The session cannot be read any more: {exc}")
        except TransientError as exc:
            reason = WaitReason.RATE_LIMIT if exc.code == "rate_limited" else WaitReason.TIMER
            delay = exc.retry_after or RETRY_S
            when = time.strftime("%H:%M:%S", time.localtime(self.now() + delay))
            self.wait(reason, self.now() + delay, f"{exc}; trying again at {when}")
        return self.run.status

    def _go(self) -> None:
        if self.run.status == RunStatus.QUEUED:
            self.commit(
                patch=RunPatch(
                    status=RunStatus.RUNNING,
                    started_at=self.now(),
                    status_message="Following the Managed Agents session",
                )
            )
        self.settle_sends()
        self.commands()
        if self.run.status in (RunStatus.PAUSED, RunStatus.STOPPED):
            raise _Stop
        info = self.d.api.session(self.sid)
        if self.f.budget_seq:
            self.budget_wait(info)
        if not self.read_events():
            self.wait(WaitReason.TIMER, self.now(), "Reading the session's events so far")
            raise _Stop
        self.approvals()
        self.check_budget(info)
        self.settle(info)

    # ------------------------------------------------------------------ journal

    def now(self) -> float:
        return self.d.clock.now()

    def commit(
        self,
        *,
        outcome: StepOutcome | None = None,
        intents: Sequence[StepIntent] = (),
        patch: RunPatch | None = None,
        approvals: Sequence[Approval] = (),
        applied: Sequence[tuple[int, str]] = (),
        follow: Follow | None = None,
    ) -> None:
        """One fenced transaction, with the fold after it as the run's snapshot."""
        after = follow if follow is not None else self.f
        last = max([self.last_seq, *(i.seq for i in intents)])
        self.store.commit(
            self.run.id,
            outcome=outcome,
            intents=intents,
            patch=patch,
            snapshot=Snapshot(seq=last, state={"managed": after.to_json()}),
            applied_commands=applied,
            approvals=approvals,
            lease=self.guard.lease if self.guard is not None else None,
        )
        self.f, self.last_seq = after, last
        if patch is not None or outcome is not None:
            self.run = self.store.get_run(self.run.id)

    def wait(self, reason: WaitReason, wake_at: float | None, message: str) -> None:
        patch = RunPatch(
            status=RunStatus.WAITING, wait_reason=reason, wake_at=wake_at, status_message=message
        )
        self.commit(patch=patch)

    def crash(self, point: str) -> None:
        if self.d.crash_hook is not None:
            self.d.crash_hook(point)

    # ------------------------------------------------------------------ sending

    def send_intents(
        self, follow: Follow, events: Sequence[tuple[dict[str, JSON], JSON]]
    ) -> list[StepIntent]:
        """The open steps of events to send (``(event, extra input)``), kept in ``follow``."""
        out = []
        for i, (event, extra) in enumerate(events, start=self.last_seq + 1):
            name = _SENDERS[str(event["type"])]
            follow.sends[str(i)] = {"event": event, "name": name}
            step_input: dict[str, JSON] = {"arguments": event, "session_id": self.sid}
            if isinstance(extra, dict):
                step_input.update(extra)
            out.append(StepIntent(seq=i, kind=StepKind.TOOL_CALL, name=name, input=step_input))
        return out

    def send(self, event: dict[str, JSON], **commit: Any) -> None:
        """Write the step of ``event`` (with ``commit``'s other changes), then send it."""
        follow = commit.pop("follow", None) or self.f.copy()
        self.commit(intents=self.send_intents(follow, [(event, None)]), follow=follow, **commit)
        self.deliver_open()

    def deliver_open(self) -> None:
        """Send every event whose step is open (written this activation: never sent)."""
        for seq in sorted(self.f.sends, key=int):
            self.deliver(int(seq), self.f.sends[seq]["event"])

    def deliver(self, seq: int, event: dict[str, JSON]) -> None:
        self.crash(BEFORE_SEND)
        if self.guard is not None:
            self.guard.confirm(30.0)  # the point of no return: the run must still be ours
        try:
            sent = self.d.api.send(self.sid, event)
        except BadRequestError as exc:
            self.close_send(seq, "", error=str(exc))
            return
        self.crash(AFTER_SEND)
        self.close_send(seq, sent[0].key if sent else "")

    def close_send(self, seq: int, key: str, *, error: str | None = None, note: str = "") -> None:
        follow = self.f.copy()
        follow.sends.pop(str(seq), None)
        follow.remember_sent(key)
        output: dict[str, JSON] = {"content": note or ("not sent" if error else "sent")}
        if key:
            output["event"] = key
        status = StepStatus.FAILED if error else StepStatus.COMPLETED
        self.commit(outcome=StepOutcome(seq, status, output, error), follow=follow)

    def settle_sends(self) -> None:
        """Events an earlier activation may have sent: found, or sent now (see the module)."""
        for seq in sorted(self.f.sends, key=int):
            event = self.f.sends[seq]["event"]
            found = self.find_sent(event)
            if found:
                note = "sent (found in the session's events: the worker stopped after sending)"
                self.close_send(int(seq), found, note=note)
            else:
                self.deliver(int(seq), event)

    def find_sent(self, event: dict[str, JSON]) -> str:
        """The key of ``event`` among the session's events ("" if it is not there)."""
        kind = str(event["type"])
        if kind == "user.tool_confirmation":
            for ev in self.d.api.events(self.sid, types=[kind]):
                if ev.data.get("tool_use_id") == event.get("tool_use_id"):
                    return ev.key
        elif kind == "user.message":
            text = text_of(event.get("content"))
            found = [
                ev.key
                for ev in self.d.api.events(self.sid, types=[kind])
                if text_of(ev.data.get("content")) == text and ev.key not in self.f.sent
            ]
            return found[-1] if found else ""
        return ""

    def interrupt(self) -> None:
        """Send ``user.interrupt`` (unless the session has ended); a failure is recorded.

        The run stops following the session either way: an interrupt that could not be
        sent is closed failed, saying why, rather than left for an activation that may
        never come (a cancelled run has none).
        """
        if self.f.status == "terminated":
            return
        event: dict[str, JSON] = {"type": "user.interrupt"}
        follow = self.f.copy()
        intents = self.send_intents(follow, [(event, None)])
        self.commit(intents=intents, follow=follow)
        try:
            self.deliver(intents[0].seq, event)
        except (TransientError, NotFoundError) as exc:
            self.close_send(intents[0].seq, "", error=f"not interrupted: {exc}")

    def message(self, text: str, applied: Sequence[tuple[int, str]] = ()) -> None:
        event: dict[str, JSON] = {
            "type": "user.message",
            "content": [{"type": "text", "text": text}],
        }
        self.send(event, applied=applied)

    # ------------------------------------------------------------------ commands

    def commands(self) -> None:
        for cmd in self.store.pending_commands(self.run.id):
            if self.run.status.is_terminal:
                return
            handler = _COMMANDS.get(cmd.kind)
            if handler is not None:
                handler(self, cmd)
            else:
                self.commit(
                    applied=[(cmd.id, "ignored: nothing is in doubt in a followed session")]
                )

    def on_cancel(self, cmd: Command) -> None:
        self.interrupt()
        self.end(
            RunStatus.CANCELLED,
            "Cancelled: the session was interrupted and is no longer followed",
            cmd,
        )

    def on_stop(self, cmd: Command) -> None:
        self.halt(
            cmd,
            RunStatus.STOPPED,
            "Stopped: the session was interrupted; resume to follow it again",
        )

    def on_pause(self, cmd: Command) -> None:
        self.halt(
            cmd, RunStatus.PAUSED, "Paused: the session was interrupted; resume to follow it again"
        )

    def halt(self, cmd: Command, status: RunStatus, message: str) -> None:
        if self.run.status in (RunStatus.PAUSED, RunStatus.STOPPED):
            self.commit(applied=[(cmd.id, f"ignored: run is {self.run.status}")])
            return
        self.interrupt()
        self.commit(
            patch=RunPatch(status=status, status_message=message), applied=[(cmd.id, str(status))]
        )

    def on_resume(self, cmd: Command) -> None:
        if self.run.status in (RunStatus.RUNNING, RunStatus.QUEUED):
            self.commit(applied=[(cmd.id, f"ignored: run is {self.run.status}")])
            return
        patch = RunPatch(
            status=RunStatus.RUNNING, clear_wait=True, clear_attention=True, status_message=""
        )
        self.commit(patch=patch, applied=[(cmd.id, "resumed")])

    def on_note(self, cmd: Command) -> None:
        text = str((cmd.payload or {}).get("text", ""))
        if self.f.status == "terminated" or not text.strip():
            self.commit(applied=[(cmd.id, "ignored: the session has ended")])
            return
        self.message(
            text, applied=[(cmd.id, f"sent to the session as a message (step {self.last_seq + 1})")]
        )

    def on_answer(self, cmd: Command) -> None:
        if self.run.wait_reason != WaitReason.HUMAN_INPUT:
            self.commit(applied=[(cmd.id, "ignored: the session asked nothing")])
            return
        self.on_note(cmd)

    def on_extend(self, cmd: Command) -> None:
        from desktop_agent.engine.commands import extend

        budget = extend(self.run.budget, cmd.payload or {})
        self.commit(patch=RunPatch(budget=budget.to_json()), applied=[(cmd.id, "budget extended")])

    def on_decision(self, cmd: Command) -> None:
        payload = cmd.payload if isinstance(cmd.payload, dict) else {}
        approval_id = str(payload.get("approval_id", ""))
        try:
            seq = int(approval_id.rsplit(".", 2)[1])
        except (IndexError, ValueError):
            self.commit(applied=[(cmd.id, f"ignored: no approval {approval_id}")])
            return
        match = [a for a in self.store.get_approvals(self.run.id, seq) if a.id == approval_id]
        if not match or match[0].state != ApprovalState.PENDING:
            self.commit(applied=[(cmd.id, f"ignored: approval {approval_id} is not pending")])
            return
        if cmd.kind == CommandKind.APPROVE and "arguments" in payload:
            refused = (
                f"refused: a Managed Agents session takes allow or deny, not edited "
                f"arguments; approval {approval_id} pending"
            )
            self.commit(applied=[(cmd.id, refused)])
            return
        state = ApprovalState.REJECTED if cmd.kind == CommandKind.REJECT else ApprovalState.APPROVED
        decided = dataclasses.replace(
            match[0],
            state=state,
            decided_arguments=match[0].arguments,
            decision_note=str(payload.get("reason", "")),
            decided_at=self.now(),
        )
        self.commit(approvals=[decided], applied=[(cmd.id, str(state))])

    # ------------------------------------------------------------------ events

    def read_events(self) -> bool:
        """Write the events after the cursor as steps; whether every event was read.

        A reading stops at ``read_limit`` events: the session's status the events read so
        far tell is then not its status now (an old stop may have been answered since).
        """
        events = self.d.api.events(self.sid, since=self.f.cursor_at, limit=self.d.read_limit)
        units, after = import_events(
            events,
            self.f,
            next_seq=self.last_seq + 1,
            model=self.run.spec.model,
            price=self.d.price,
        )
        for unit in units:
            self.commit(outcome=unit.outcome, intents=unit.intents, follow=unit.follow)
        self.f = after  # the events that made no step are written with the next commit
        return len(events) < self.d.read_limit

    # ------------------------------------------------------------------ approvals

    def approvals(self) -> None:
        if self.f.approval_seq:
            self.resume_approval()
            return
        stop = self.f.stop
        if self.f.status != "idle" or stop.get("type") != "requires_action":
            return
        ids = [str(i) for i in stop.get("event_ids") or []]
        need = [
            i
            for i in ids
            if i in self.f.tools
            and self.f.tools[i].get("kind") in ("tool", "mcp")
            and i not in self.f.asked
            and i not in self.f.confirmed
        ]
        if need:
            self.open_approval(need)

    def open_approval(self, uses: list[str]) -> None:
        seq = self.last_seq + 1
        now = self.now()
        deadline_s = self.d.settings.approval_deadline_s
        deadline = now + deadline_s if deadline_s is not None else None
        follow = self.f.copy()
        records, items = [], []
        for i, use in enumerate(uses, start=1):
            tool = self.f.tools[use]
            step = self.store.load_steps(self.run.id, from_seq=int(str(tool["seq"])))[0]
            step_input = step.input if isinstance(step.input, dict) else {}
            name = str(tool.get("name"))
            where = (
                f" (MCP server {step_input['mcp_server']})" if step_input.get("mcp_server") else ""
            )
            rule = f"Managed Agents permission policy: {step_input.get('policy') or 'always_ask'}"
            approval_id = f"{self.run.id}.{seq}.{i}"
            records.append(
                Approval(
                    id=approval_id,
                    run_id=self.run.id,
                    seq=seq,
                    tool=name,
                    arguments=step_input.get("arguments"),
                    reason=(
                        "The Managed Agents session waits for your confirmation before it "
                        f"runs {name}{where}"
                    ),
                    rule=rule,
                    deadline=deadline,
                    default_action=self.d.settings.approval_default,
                    created_at=now,
                )
            )
            items.append(
                {
                    "tool_use_id": use,
                    "name": name,
                    "arguments": step_input.get("arguments"),
                    "approval_id": approval_id,
                    "rule": rule,
                    "tool_seq": step.seq,
                }
            )
            follow.asked[use] = approval_id
        follow.approval_seq = seq
        names = ", ".join(str(item["name"]) for item in items)
        self.commit(
            intents=[
                StepIntent(
                    seq=seq, kind=StepKind.APPROVAL, name="approval", input={"requests": items}
                )
            ],
            approvals=records,
            follow=follow,
            patch=RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.APPROVAL,
                wake_at=deadline,
                status_message=f"Waiting for approval: {names}",
            ),
        )
        raise _Stop

    def resume_approval(self) -> None:
        seq = self.f.approval_seq
        step = self.store.load_steps(self.run.id, from_seq=seq)[0]
        requests = (step.input or {}).get("requests", [])
        by_use = {str(r["approval_id"]): str(r["tool_use_id"]) for r in requests}
        now = self.now()
        changed = []
        for rec in self.store.get_approvals(self.run.id, seq):
            if rec.state != ApprovalState.PENDING:
                continue
            use = by_use.get(rec.id, "")
            elsewhere = self.f.confirmed.get(use) or ("" if use in self.f.tools else "ran")
            if elsewhere:
                state = ApprovalState.REJECTED if elsewhere == "deny" else ApprovalState.APPROVED
                note = "decided in another client of the session (not sent from here)"
                changed.append(
                    dataclasses.replace(rec, state=state, decision_note=note, decided_at=now)
                )
            elif rec.deadline is not None and rec.deadline <= now:
                action = "approve" if rec.default_action == "approve" else "reject"
                note = f"no decision before the deadline; the default action ({action}) was applied"
                changed.append(
                    dataclasses.replace(
                        rec,
                        state=ApprovalState.EXPIRED,
                        decided_arguments=rec.arguments,
                        decision_note=note,
                        decided_at=now,
                    )
                )
        if changed:
            self.commit(approvals=changed)
        records = self.store.get_approvals(self.run.id, seq)
        pending = [r for r in records if r.state == ApprovalState.PENDING]
        if pending:
            deadlines = [r.deadline for r in pending if r.deadline is not None]
            names = ", ".join(r.tool for r in pending)
            self.wait(
                WaitReason.APPROVAL,
                min(deadlines) if deadlines else None,
                f"Waiting for approval: {names}",
            )
            raise _Stop
        self.close_approval(step.seq, requests, {r.id: r for r in records})

    def close_approval(
        self, seq: int, requests: list[dict[str, Any]], records: dict[str, Approval]
    ) -> None:
        decisions: list[JSON] = []
        sends: list[tuple[dict[str, JSON], JSON]] = []
        for item in requests:
            rec = records[str(item["approval_id"])]
            use = str(item["tool_use_id"])
            allow = rec.state == ApprovalState.APPROVED or (
                rec.state == ApprovalState.EXPIRED and rec.default_action == "approve"
            )
            label = str(rec.state)
            if rec.state == ApprovalState.EXPIRED:
                label = "expired_approved" if allow else "expired_rejected"
            decisions.append(
                {
                    "tool_use_id": use,
                    "approval_id": rec.id,
                    "state": label,
                    "arguments": rec.decided_arguments,
                    "note": rec.decision_note,
                }
            )
            if rec.decision_note.startswith("decided in another client"):
                continue
            event: dict[str, JSON] = {
                "type": "user.tool_confirmation",
                "tool_use_id": use,
                "result": "allow" if allow else "deny",
            }
            if not allow and rec.decision_note.strip():
                event["deny_message"] = rec.decision_note.strip()
            sends.append((event, {"tool_use_id": use, "approval_id": rec.id}))
        follow = self.f.copy()
        follow.approval_seq = 0
        intents = self.send_intents(follow, sends)
        self.commit(
            outcome=StepOutcome(seq, StepStatus.COMPLETED, {"decisions": decisions}),
            intents=intents,
            follow=follow,
            patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True, status_message=""),
        )
        self.deliver_open()
        self.read_events()  # what the session did at once with the decision

    # ------------------------------------------------------------------ budget

    def limit(self, info: SessionInfo) -> tuple[str, dict[str, JSON]] | None:
        """The run's limit reached (``cost`` or ``time``) and its spend report, if any."""
        b = self.run.budget
        cost = self.run.cost_usd
        active = info.active_s if info.active_s is not None else self.run.active_seconds
        limit = None
        if b.max_cost_usd is not None and cost >= b.max_cost_usd:
            limit = "cost"
        elif b.max_time_s is not None and active >= b.max_time_s:
            limit = "time"
        if limit is None:
            return None
        hours = max(active, 1.0) / 3600.0
        report: dict[str, JSON] = {
            "monthly_cap": None,
            "limit": limit,
            "budget": b.to_json(),
            "spent": {
                "cost_usd": cost,
                "steps": self.run.last_seq,
                "time_s": active,
                "tokens": self.run.usage.total,
            },
            "next_call_worst_case_usd": 0.0,
            "by_model": {self.run.spec.model: cost},
            "by_step": [],
            "burn_rate_usd_per_hour": cost / hours,
            "projected_cost_usd": None,
            "session": {
                "id": info.id,
                "list_cost_usd": info.cost_usd,
                "budget_usd": info.budget_usd,
            },
        }
        return limit, report

    def check_budget(self, info: SessionInfo) -> None:
        reached = self.limit(info)
        if reached is None or self.f.status == "terminated":
            return
        limit, report = reached
        follow = self.f.copy()
        active = follow.status in ACTIVE
        sends = self.send_intents(
            follow,
            [({"type": "user.interrupt"}, {"why": f"the run's {limit} budget"})] if active else [],
        )
        seq = self.last_seq + 1 + len(sends)
        follow.budget_seq, follow.interrupted = seq, active
        step = StepIntent(seq=seq, kind=StepKind.BUDGET, name=limit, input=report)
        self.commit(
            intents=[*sends, step],
            follow=follow,
            patch=RunPatch(
                status=RunStatus.WAITING,
                wait_reason=WaitReason.BUDGET,
                status_message=describe(report),
            ),
        )
        self.deliver_open()
        raise _Stop

    def budget_wait(self, info: SessionInfo) -> None:
        """The run waits on its budget: go on if it was extended, else keep waiting."""
        reached = self.limit(info)
        if reached is not None:
            self.wait(WaitReason.BUDGET, None, describe(reached[1]))
            raise _Stop
        follow = self.f.copy()
        seq, follow.budget_seq = follow.budget_seq, 0
        interrupted, follow.interrupted = follow.interrupted, False
        output = {"action": "extend", "budget": self.run.budget.to_json()}
        go_on = interrupted and info.status != "terminated"
        sends = self.send_intents(follow, [(_text_event(CONTINUE), None)] if go_on else [])
        self.commit(
            outcome=StepOutcome(seq, StepStatus.COMPLETED, output),
            intents=sends,
            follow=follow,
            patch=RunPatch(status=RunStatus.RUNNING, clear_wait=True, status_message=""),
        )
        self.deliver_open()

    # ------------------------------------------------------------------ the run's status

    def settle(self, info: SessionInfo) -> None:
        status = self.f.status or info.status
        active = max(0.0, (info.active_s or 0.0) - self.run.active_seconds)
        said = f": {self.f.last_text}" if self.f.last_text else ""
        now = self.now()
        if status == "terminated":
            error = f" (last error: {self.f.error})" if self.f.error else ""
            self.end(RunStatus.COMPLETED, f"The session ended{error}{said}"[:300])
            return
        reason, wake = WaitReason.TIMER, now + self.d.poll_s
        message = f"Running on Managed Agents{said}"
        if status == "idle":
            reason, wake = WaitReason.HUMAN_INPUT, now + self.d.idle_poll_s
            stop = str(self.f.stop.get("type", ""))
            tools = ", ".join(self.custom_uses())
            template = _IDLE.get(stop, "The session stopped ({stop}){said}")
            end = "" if said.endswith((".", "!", "?")) else "."
            message = template.format(stop=stop, said=said, tools=tools, end=end)
            if stop == "requires_action" and not tools:
                # Every confirmation is sent: the session goes on by itself.
                reason, wake = WaitReason.TIMER, now + self.d.poll_s
                message = "Confirmation sent; the session goes on"
            if info.budget_usd is not None and stop == "budget_reached":
                message += f" (its budget: ${info.budget_usd:.2f})"
        patch = RunPatch(
            status=RunStatus.WAITING,
            wait_reason=reason,
            wake_at=wake,
            status_message=message[:300],
            add_active_seconds=active,
        )
        self.commit(patch=patch)

    def close_failed(self, seq: int, why: str, follow: Follow) -> None:
        self.commit(outcome=StepOutcome(seq, StepStatus.FAILED, None, why), follow=follow)

    def custom_uses(self) -> list[str]:
        ids = [str(i) for i in self.f.stop.get("event_ids") or []]
        return [
            str(self.f.tools[i]["name"])
            for i in ids
            if self.f.tools.get(i, {}).get("kind") == "custom"
        ]

    def end(self, status: RunStatus, message: str, cmd: Command | None = None) -> None:
        """End the run: open steps closed, pending approvals expired, commands applied."""
        now = self.now()
        why = "the session ended first" if status == RunStatus.COMPLETED else "no longer followed"
        stale = [
            dataclasses.replace(
                a,
                state=ApprovalState.EXPIRED,
                decision_note=f"the run ended ({why})",
                decided_at=now,
            )
            for a in self.store.list_run_approvals(self.run.id)
            if a.state == ApprovalState.PENDING
        ]
        for use, tool in sorted(self.f.tools.items(), key=lambda t: int(str(t[1]["seq"]))):
            follow = self.f.copy()
            follow.tools.pop(use)
            follow.asked.pop(use, None)
            self.close_failed(int(str(tool["seq"])), why, follow)
        for name in ("model_seq", "approval_seq", "budget_seq"):
            seq = getattr(self.f, name)
            if seq:
                follow = self.f.copy()
                setattr(follow, name, 0)
                self.close_failed(seq, why, follow)
        follow = self.f.copy()
        follow.model_start = ""
        applied = [(cmd.id, str(status))] if cmd is not None else []
        applied += [
            (c.id, "ignored: the run ended")
            for c in self.store.pending_commands(self.run.id)
            if cmd is None or c.id != cmd.id
        ]
        self.commit(
            approvals=stale,
            applied=applied,
            follow=follow,
            patch=RunPatch(
                status=status,
                finished_at=now,
                status_message=message,
                clear_wait=True,
            ),
        )
        raise _Stop


_IDLE = {
    "": "The session waits for a message{said}{end} Answer to send it one",
    "end_turn": "The session finished its turn{said}{end} Answer to send it a message",
    "requires_action": (
        "The session waits for a result of its own tools ({tools}) from the application that "
        "defines them"
    ),
    "budget_reached": "The session reached its own budget: raise it where the session was created",
    "retries_exhausted": (
        "The session stopped after repeated errors{said}{end} Answer to send it a message"
    ),
    "refusal": "The session's turn was refused{said}{end} Answer to send it a message",
}
"""What an idle session waits for, by ``stop_reason``."""


def _text_event(text: str) -> dict[str, JSON]:
    return {"type": "user.message", "content": [{"type": "text", "text": text}]}


_COMMANDS: dict[CommandKind, Callable[[_Activation, Command], None]] = {
    CommandKind.CANCEL: _Activation.on_cancel,
    CommandKind.STOP: _Activation.on_stop,
    CommandKind.PAUSE: _Activation.on_pause,
    CommandKind.RESUME: _Activation.on_resume,
    CommandKind.STEER: _Activation.on_note,
    CommandKind.ANSWER: _Activation.on_answer,
    CommandKind.EXTEND_BUDGET: _Activation.on_extend,
    CommandKind.APPROVE: _Activation.on_decision,
    CommandKind.REJECT: _Activation.on_decision,
}
"""How each command is applied to a followed session (resolve has nothing to decide)."""


def managed_driver(store: JournalStore, settings: Settings) -> ManagedDriver:
    """The driver a worker gets: the analyst's key read when a session is, the crash hook."""
    from desktop_agent.worker.crash import crash_hook_from_env

    return ManagedDriver(store, ManagedAgents(_key), settings, crash_hook=crash_hook_from_env())


def _key() -> str | None:
    """The analyst's API key now (the keyring is loaded when a session is first read)."""
    from desktop_agent.secrets import KeyStore

    return KeyStore().get()
