"""A journal of known spend: streamed and economy-mode calls, a compaction, demo, archived.

Steps are written through the store (intent, then outcome) with chosen tokens and costs,
the way the engine writes them: an economy-mode model call's intent holds
``"mode": "economy"``, and an answer whose API split its cache writes keeps
``api.cache_write_1h`` in its output. The figures a test expects are computed here from
the published rates written out below, never from ``llm/pricing.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import JSON, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.persistence.store import SqlStore

SONNET_45, HAIKU_45, DEMO = "claude-sonnet-4-5", "claude-haiku-4-5", "demo"

RATES: dict[str, tuple[float, float, float, float]] = {
    # $ per million tokens: input, 5-minute cache write, 1-hour cache write, cache read
    SONNET_45: (3.0, 3.75, 6.0, 0.30),
    HAIKU_45: (1.0, 1.25, 2.0, 0.10),
    "claude-sonnet-5-5@2026-10-06": (2.0, 2.5, 4.0, 0.20),  # before the read price fell
    "claude-sonnet-5-5@2026-10-07": (2.0, 2.5, 4.0, 0.10),
    "claude-haiku-5-5": (0.10, 0.125, 0.20, 0.01),  # x5 past 100,000 prompt tokens
}


def saving(
    rates: str, read: int, write_5m: int = 0, write_1h: int = 0, *, economy: bool = False
) -> float:
    """The net saving of one step at ``RATES[rates]``: reads' discount less writes' premium."""
    inp, w5, w1, r = RATES[rates]
    net = read * (inp - r) - write_5m * (w5 - inp) - write_1h * (w1 - inp)
    return net / 1_000_000 * (0.5 if economy else 1.0)


def spend(
    store: SqlStore,
    run_id: str,
    seq: int,
    model: str,
    usage: Usage,
    cost: float,
    *,
    economy: bool = False,
    one_hour: int | None = None,
    kind: StepKind = StepKind.MODEL_CALL,
    tools: list[dict[str, JSON]] | None = None,
) -> None:
    """One finished spending step (``one_hour``: the API's split of its cache writes)."""
    input_: dict[str, JSON] = {"model": model, "messages": seq}
    if kind is StepKind.COMPACTION:
        input_ = {"summarized_messages": 6, "kept_messages": 2}
    if economy:
        input_["mode"] = "economy"
    if tools is not None:
        input_["tools"] = list(tools)
    store.commit(run_id, intents=[StepIntent(seq, kind, model, input_)])
    text = 'The notes say "cache_write_1h": 999 and "mode":"economy"; both are quotes.'
    output: dict[str, JSON] = {
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "model": model,
        "thinking": "",
    }
    if one_hour is not None:
        output["api"] = {
            "message_id": f"msg_{seq}",
            "cache_write_5m": usage.cache_write_tokens - one_hour,
            "cache_write_1h": one_hour,
        }
    outcome = StepOutcome(seq, StepStatus.COMPLETED, output, usage=usage, cost_usd=cost)
    store.commit(run_id, outcome=outcome)


@dataclass(frozen=True)
class Journal:
    """The runs :func:`write_journal` wrote and what each mode must add up to."""

    streamed_run: str
    economy_run: str
    demo_run: str
    archived_run: str
    streamed_cost: float
    economy_cost: float
    archived_cost: float
    demo_cost: float
    streamed_saving: float
    economy_saving: float


def write_journal(client: Client) -> Journal:
    """Write the journal of the module's docstring (all of it today, local time).

    * an archived Haiku run: two streamed calls of $0.25 (its steps leave the database);
    * a Sonnet 4.5 run, streamed: a call writing 2,000 tokens to the cache for 5 minutes
      (the API's split says so) and reading 10,000, whose intent lists a tool that quotes
      the economy marker inside a string; a call reading 20,000 with no split;
    * a Haiku 4.5 run in economy mode: a call writing 4,000 tokens for an hour and reading
      30,000; a call writing 400 for 5 minutes and 600 for an hour and reading 5,000; a
      streamed compaction reading 1,000; a tool call whose input holds the marker and
      spends nothing;
    * a demo run's economy call "spending" $1.50 and reading 50,000 tokens.
    """
    store = client.store
    gone = client.start_run("Spent and archived", model=HAIKU_45)
    spend(store, gone.id, 1, HAIKU_45, Usage(1000, 50, 0, 0), 0.25)
    spend(store, gone.id, 2, HAIKU_45, Usage(1000, 50, 0, 0), 0.25)
    store.commit(
        gone.id,
        patch=RunPatch(status=RunStatus.COMPLETED, finished_at=time.time() - 5),
    )
    archived = Scheduling(client, lambda: time.time() + 60).archive(0)
    assert archived.path is not None

    streamed = client.start_run("Streamed calls", model=SONNET_45)
    quoting = [{"name": "set_mode", "description": 'Takes {"mode":"economy"} as its input.'}]
    spend(store, streamed.id, 1, SONNET_45, Usage(1000, 200, 2000, 10000), 0.10, one_hour=0,
          tools=quoting)  # fmt: skip
    spend(store, streamed.id, 2, SONNET_45, Usage(500, 100, 0, 20000), 0.05)

    economy = client.start_run("Economy calls", model=HAIKU_45)
    spend(store, economy.id, 1, HAIKU_45, Usage(800, 300, 4000, 30000), 0.02,
          economy=True, one_hour=4000)  # fmt: skip
    spend(store, economy.id, 2, HAIKU_45, Usage(200, 100, 1000, 5000), 0.01,
          economy=True, one_hour=600)  # fmt: skip
    spend(store, economy.id, 3, HAIKU_45, Usage(300, 50, 0, 1000), 0.003,
          kind=StepKind.COMPACTION)  # fmt: skip
    store.commit(
        economy.id,
        intents=[StepIntent(4, StepKind.TOOL_CALL, "read_file", {"mode": "economy"})],
    )
    store.commit(economy.id, outcome=StepOutcome(4, StepStatus.COMPLETED, {"content": "x"}))

    demo = client.start_run("Demo calls", model=DEMO)
    spend(store, demo.id, 1, DEMO, Usage(5000, 500, 3000, 50000), 1.5, economy=True,
          one_hour=3000)  # fmt: skip

    return Journal(
        streamed_run=streamed.id,
        economy_run=economy.id,
        demo_run=demo.id,
        archived_run=gone.id,
        streamed_cost=0.10 + 0.05 + 0.003,
        economy_cost=0.02 + 0.01,
        archived_cost=0.5,
        demo_cost=1.5,
        streamed_saving=(
            saving(SONNET_45, 10000, write_5m=2000)
            + saving(SONNET_45, 20000)
            + saving(HAIKU_45, 1000)
        ),
        economy_saving=(
            saving(HAIKU_45, 30000, write_1h=4000, economy=True)
            + saving(HAIKU_45, 5000, write_5m=400, write_1h=600, economy=True)
        ),
    )
