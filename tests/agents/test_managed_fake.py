"""The Managed Agents adapter against the fake sessions API, and the fake's own strictness.

The fake answers as the documentation and the SDK's types say the API does (see
:mod:`tests.helpers.fake_managed_agents`): these tests hold it to that, through the real
SDK, so that the driver's tests cannot pass against a fake that accepts what the API
refuses. Then the reading of events into steps: every event once, whatever the readings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anthropic
import pytest

from desktop_agent.agents.managed import (
    Event,
    Follow,
    ManagedAgents,
    Unit,
    event_of,
    import_events,
    session_info,
)
from desktop_agent.domain import StepKind, StepStatus, Usage
from desktop_agent.domain.errors import AuthenticationError, BadRequestError, NotFoundError
from tests.helpers.fake_managed_agents import BETA, KEY, FakeManagedAgents, FakeSession
from tests.helpers.polling import wait_until


@pytest.fixture
def fake() -> Iterator[FakeManagedAgents]:
    with FakeManagedAgents(ping_s=0.05) as server:
        yield server


@pytest.fixture
def api(fake: FakeManagedAgents) -> Iterator[ManagedAgents]:
    client = ManagedAgents(lambda: KEY, base_url=fake.url)
    yield client
    client.close()


def sdk(fake: FakeManagedAgents, key: str = KEY) -> anthropic.Anthropic:
    from desktop_agent.http_client import sdk_client

    return anthropic.Anthropic(api_key=key, base_url=fake.url, http_client=sdk_client(10.0))


def scripted(fake: FakeManagedAgents) -> tuple[FakeSession, list[str]]:
    session = fake.add_session("Q3")
    session.user_message("Summarise Q3")
    session.running()
    ids = session.model_request("Reading the file.", [("bash", {"command": "cat q3.csv"})])
    session.ask(ids)
    return session, ids


# --------------------------------------------------------------------------- the fake


def test_the_fake_wants_the_key_and_the_beta_header(fake: FakeManagedAgents) -> None:
    fake.add_session()
    with sdk(fake, key="sk-ant-wrong") as wrong, pytest.raises(anthropic.AuthenticationError):
        wrong.beta.sessions.list()
    with sdk(fake) as client:
        assert len(client.beta.sessions.list().data) == 1  # the SDK sends the beta itself
        # Without the beta header the endpoints do not exist for the API.
        with pytest.raises(anthropic.NotFoundError):
            client.get(
                "/v1/sessions", cast_to=object, options={"headers": {"anthropic-beta": "other"}}
            )
    refused = [r for r in fake.requests if r.status == 404]
    assert refused and refused[0].headers["anthropic-beta"] == "other"
    assert all(
        BETA in r.headers.get("anthropic-beta", "") for r in fake.requests if r.status == 200
    )


def test_an_unknown_session_is_a_not_found_error(api: ManagedAgents) -> None:
    with pytest.raises(NotFoundError, match="not found"):
        api.session("sesn_nope")
    with pytest.raises(NotFoundError):
        api.events("sesn_nope")


def test_a_confirmation_for_an_event_not_awaiting_one_is_refused(
    fake: FakeManagedAgents, api: ManagedAgents
) -> None:
    session, ids = scripted(fake)
    message = next(e["id"] for e in session.events if e["type"] == "agent.message")
    with pytest.raises(BadRequestError, match="not awaiting a tool confirmation"):
        api.send(
            session.id,
            {"type": "user.tool_confirmation", "tool_use_id": message, "result": "allow"},
        )
    with pytest.raises(BadRequestError, match="only allowed with deny"):
        api.send(
            session.id,
            {
                "type": "user.tool_confirmation",
                "tool_use_id": ids[0],
                "result": "allow",
                "deny_message": "no",
            },
        )
    sent = api.send(
        session.id, {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
    )
    assert [(e.type, e.data["tool_use_id"]) for e in sent] == [("user.tool_confirmation", ids[0])]
    # The session went on: the tool ran and the turn ended; a second answer is refused.
    assert session.events[-1]["stop_reason"] == {"type": "end_turn"}
    with pytest.raises(BadRequestError):
        api.send(
            session.id, {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
        )
    with pytest.raises(AuthenticationError):
        ManagedAgents(lambda: "", base_url=fake.url).sessions()


def test_lists_are_paginated_and_filtered_as_documented(
    fake: FakeManagedAgents, api: ManagedAgents
) -> None:
    for i in range(3):
        fake.add_session(f"s{i}")
    session, _ids = scripted(fake)
    with sdk(fake) as client:
        page = client.beta.sessions.list(limit=2)
        assert [s.title for s in page.data] == ["Q3", "s2"]  # newest first
        assert page.next_page and page.has_next_page()
        assert [s.title for s in client.beta.sessions.list(limit=2)] == ["Q3", "s2", "s1", "s0"]
        events = client.beta.sessions.events.list(session.id, limit=3)
        assert [e.type for e in events.data][:1] == ["user.message"]  # oldest first
        assert len(list(client.beta.sessions.events.list(session.id, limit=3))) == len(
            session.events
        )
    uses = api.events(session.id, types=["agent.tool_use"])
    assert [e.type for e in uses] == ["agent.tool_use"]
    later = api.events(session.id, since=session.events[-2]["processed_at"])
    assert [e.id for e in later] == [e["id"] for e in session.events[-2:]]
    assert [s.name for s in api.sessions(limit=2)] == ["Q3", "s2"]


def test_the_stream_sends_new_events_as_server_sent_events(fake: FakeManagedAgents) -> None:
    session = fake.add_session()
    got: list[str] = []

    def read() -> None:
        with sdk(fake) as client:
            stream = client.beta.sessions.events.stream(session.id)
            for event in stream:  # pings are skipped by the SDK
                got.append(event.type)
                if event.type == "session.status_idle":
                    stream.close()
                    return

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: any(r.path.endswith("/events/stream") for r in fake.requests), what="open")
    session.running()
    session.model_request("Hello.")
    session.idle()
    reader.join(timeout=30)
    assert got == [
        "session.status_running",
        "span.model_request_start",
        "agent.thinking",
        "agent.message",
        "span.model_request_end",
        "session.status_idle",
    ]


def test_a_session_reads_as_session_info(fake: FakeManagedAgents) -> None:
    session = fake.add_session("Board pack", model="claude-sonnet-4-6")
    session.budget_usd = 25.0
    session.model_request("x", usage=(100_000, 0, 0, 0))
    info = session_info(session.json())
    assert (info.name, info.model, info.agent, info.status) == (
        "Board pack",
        "claude-sonnet-4-6",
        "Research agent",
        "idle",
    )
    assert (info.cost_usd, info.budget_usd) == (0.5, 25.0)
    assert info.usage.input_tokens == 100_000


# --------------------------------------------------------------------------- events to steps


def price(model: str, usage: Usage) -> float:
    return usage.input_tokens / 1000


def read_all(events: list[Event], follow: Follow, first: int = 1) -> tuple[list[Unit], Follow]:
    return import_events(events, follow, next_seq=first, model="claude-opus-4-8", price=price)


def test_each_event_is_read_once_however_the_readings_fall(fake: FakeManagedAgents) -> None:
    session, ids = scripted(fake)
    events = [event_of(e) for e in session.events]
    whole, end = read_all(events, Follow())
    # Read in two halves, the second from the cursor on (as the driver reads): the same
    # steps, and a replay of a reading takes nothing again.
    for cut in range(1, len(events)):
        units, mid = read_all(events[:cut], Follow())
        seq = 1 + sum(len(u.intents) for u in units)
        since = [e for e in events if e.at >= mid.cursor_at] if mid.cursor else events
        more, last = read_all(since, mid, seq)
        assert _steps(units + more) == _steps(whole), cut
        again, _ = read_all(since, last, seq + sum(len(u.intents) for u in more))
        assert again == [], cut
    assert end.status == "idle" and end.stop["event_ids"] == ids
    assert _steps(whole) == [
        ("intent", 1, StepKind.STEER, StepStatus.COMPLETED),
        ("intent", 2, StepKind.MODEL_CALL, StepStatus.STARTED),
        ("outcome", 2, StepKind.MODEL_CALL, StepStatus.COMPLETED),
        ("intent", 3, StepKind.TOOL_CALL, StepStatus.STARTED),
    ]
    model = whole[2].outcome
    assert model is not None and model.cost_usd == 1.0  # 1,000 input tokens at the test price


def test_an_open_model_request_waits_for_its_end(fake: FakeManagedAgents) -> None:
    session = fake.add_session()
    start = session.emit("span.model_request_start")
    session.emit("agent.message", content=[{"type": "text", "text": "Half"}])
    units, mid = read_all([event_of(e) for e in session.events], Follow())
    assert [(u.outcome, [i.kind for i in u.intents]) for u in units] == [
        (None, [StepKind.MODEL_CALL])
    ]
    assert mid.model_seq == 1 and mid.cursor == start["id"]  # the message is read again
    session.emit("span.model_request_end", model_request_start_id=start["id"], model_usage={})
    more, end = read_all([event_of(e) for e in session.events[1:]], mid, 2)
    assert more[0].outcome is not None and more[0].outcome.output["content"] == [
        {"type": "text", "text": "Half"}
    ]
    assert end.model_seq == 0 and end.cursor == session.events[-1]["id"]


def _steps(units: list[Unit]) -> list[tuple[str, int, StepKind, StepStatus]]:
    out: list[tuple[str, int, StepKind, StepStatus]] = []
    for u in units:
        if u.outcome is not None:
            out.append(("outcome", u.outcome.seq, StepKind.MODEL_CALL, u.outcome.status))
        out += [("intent", i.seq, i.kind, i.status) for i in u.intents]
    return out


def test_mcp_and_custom_tool_uses_are_tool_steps_closed_by_their_results(
    fake: FakeManagedAgents,
) -> None:
    session = fake.add_session()
    [use] = session.model_request("Asking the CRM.", [("lookup", {"q": "acme"})], mcp_server="crm")
    session.emit(
        "agent.mcp_tool_result",
        mcp_tool_use_id=use,
        content=[{"type": "text", "text": "Acme: 12 seats"}],
        is_error=False,
    )
    custom = session.emit("agent.custom_tool_use", name="render_chart", input={"kind": "bar"})
    session.idle("requires_action", event_ids=[custom["id"]])
    units, end = read_all([event_of(e) for e in session.events], Follow())
    intents = [i for u in units for i in u.intents]
    assert [(i.name, i.input["kind"]) for i in intents if i.kind == StepKind.TOOL_CALL] == [
        ("lookup", "mcp"),
        ("render_chart", "custom"),
    ]
    assert intents[1].input["mcp_server"] == "crm"
    closed = [u.outcome for u in units if u.outcome is not None and u.outcome.seq == 2]
    assert closed and closed[0].output["content"] == "Acme: 12 seats"
    assert end.tools == {
        custom["id"]: {"seq": 3, "name": "render_chart", "kind": "custom", "permission": None}
    }
