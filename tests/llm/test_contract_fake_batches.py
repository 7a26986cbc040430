"""The fake's Message Batches API, driven through the real SDK (``anthropic`` 2.14).

A batch is created ``in_progress``, stays so while the test holds it, and once released
ends with each request's result, parsed by the SDK into its own types. A request the
contract refuses ends ``errored`` with exactly the error a direct call gets; an accepted one
``succeeded`` with the message a non-streamed call gets (usage, prompt cache, signatures).
Batch-level refusals, cancel, list paging, results read too early, unknown ids, keys, chosen
outcomes, time (delay, expiry) and a restart of the server are covered one by one.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anthropic
import pytest
from anthropic.types.messages import (
    MessageBatchCanceledResult,
    MessageBatchErroredResult,
    MessageBatchExpiredResult,
    MessageBatchIndividualResponse,
    MessageBatchSucceededResult,
)

from tests.helpers.claude_contract import BETA_TASK_BUDGETS, ApiError
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Status, Stream, Text, Thinking

KEY = "sk-ant-api03-test-batches"
MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a research assistant. Answer from the notes."
LONG_SYSTEM = "Rules of the research desk. " * 60


def ask(text: str = "Where is the Q3 report?", model: str = MODEL, **params: Any) -> dict[str, Any]:
    """A request body (a copy: tests edit it)."""
    return copy.deepcopy(
        {
            "model": model,
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": text}],
            **params,
        }
    )


def answer(body: dict[str, Any], index: int) -> Reply:
    """Think, then answer naming the question (so answers tell requests apart)."""
    last = body["messages"][-1]["content"]
    return Stream([Thinking("The notes say so."), Text(f"Answer to: {last}")])


def client_of(fake: FakeAnthropic, key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=fake.url, max_retries=0)


def entry(custom_id: str, params: dict[str, Any]) -> Any:
    """One request of a batch (``Any``: the SDK's request types are closed TypedDicts)."""
    return {"custom_id": custom_id, "params": params}


def results_of(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    """The batch's results by custom_id, as the SDK parses them."""
    out: dict[str, Any] = {}
    for item in client.messages.batches.results(batch_id):
        assert isinstance(item, MessageBatchIndividualResponse)
        out[item.custom_id] = item.result
    return out


def raw_get(fake: FakeAnthropic, path: str, key: str = KEY) -> tuple[int, str, bytes]:
    """A GET past the SDK: (status, content type, body)."""
    request = urllib.request.Request(
        fake.url + path, headers={"x-api-key": key, "anthropic-version": "2023-06-01"}
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["content-type"], error.read()


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what differs between two calls (its id, signature nonces)."""
    content = [{k: v for k, v in block.items() if k != "signature"} for block in message["content"]]
    return {k: v for k, v in message.items() if k != "id"} | {"content": content}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(answer, hold_batches=True) as server:
        yield server


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return client_of(fake)


# --------------------------------------------------------------------------- round trip


def test_a_batch_round_trip(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    made = client.messages.batches.create(
        requests=[entry("run1-1-1", ask("First?")), entry("run2-4-1", ask("Second?"))]
    )
    assert made.id.startswith("msgbatch_") and made.type == "message_batch"
    assert made.processing_status == "in_progress"
    assert made.request_counts.model_dump() == {
        "processing": 2,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert made.expires_at - made.created_at == timedelta(hours=24)
    assert made.ended_at is None and made.results_url is None
    assert made.cancel_initiated_at is None and made.archived_at is None

    held = client.messages.batches.retrieve(made.id)
    assert held.processing_status == "in_progress" and held.request_counts.processing == 2
    assert fake.requests == []  # nothing processed while the batch is held

    assert fake.release_batches() == [made.id]
    ended = client.messages.batches.retrieve(made.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.processing, ended.request_counts.succeeded) == (0, 2)
    assert ended.ended_at is not None and ended.ended_at >= ended.created_at
    assert ended.results_url == f"{fake.url}/v1/messages/batches/{made.id}/results"

    results = results_of(client, made.id)
    assert set(results) == {"run1-1-1", "run2-4-1"}
    for custom_id, question in (("run1-1-1", "First?"), ("run2-4-1", "Second?")):
        result = results[custom_id]
        assert isinstance(result, MessageBatchSucceededResult)
        assert [b.type for b in result.message.content] == ["thinking", "text"]
        assert result.message.content[1].text == f"Answer to: {question}"  # type: ignore[union-attr]
        assert result.message.usage.input_tokens == 100
    # each request was a model call of the fake, recorded with its batch's headers
    calls = [(r.path, r.custom_id, r.batch_id, r.status, r.key) for r in fake.requests]
    assert calls == [
        ("/v1/messages/batches", "run1-1-1", made.id, 200, KEY),
        ("/v1/messages/batches", "run2-4-1", made.id, 200, KEY),
    ]
    assert fake.batches_created == 1 and fake.batch_ids == [made.id]
    assert fake.batch_submissions == Counter({"run1-1-1": 1, "run2-4-1": 1})
    assert fake.results_fetches == Counter({made.id: 1})
    kept = fake.batch_results(made.id)  # the test's own look: request order, not a fetch
    assert [k["custom_id"] for k in kept] == ["run1-1-1", "run2-4-1"]
    first = results["run1-1-1"]
    assert isinstance(first, MessageBatchSucceededResult)
    assert kept[0]["result"]["type"] == "succeeded"
    assert kept[0]["result"]["message"]["id"] == first.message.id
    assert fake.results_fetches == Counter({made.id: 1})
    status, _, raw = raw_get(fake, f"/v1/messages/batches/{made.id}")
    shown = json.loads(raw)
    assert status == 200 and shown == fake.batch(made.id)
    assert shown["processing_status"] == "ended" and shown["results_url"] == ended.results_url
    for name in ("created_at", "ended_at", "expires_at"):  # RFC 3339, UTC
        assert shown[name].endswith("Z") and "T" in shown[name]


def test_results_file_is_json_lines(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    made = client.messages.batches.create(requests=[entry("a", ask()), entry("b", ask("x"))])
    fake.release_batches(made.id)
    status, content_type, body = raw_get(fake, f"/v1/messages/batches/{made.id}/results")
    assert (status, content_type) == (200, "application/x-jsonl")
    lines = body.decode().splitlines()
    assert len(lines) == 2 and body.endswith(b"\n")
    parsed = [json.loads(line) for line in lines]
    assert {p["custom_id"] for p in parsed} == {"a", "b"}
    assert all(p["result"]["type"] == "succeeded" for p in parsed)
    assert all(p["result"]["message"]["type"] == "message" for p in parsed)
    assert fake.results_fetches[made.id] == 1


def test_a_batched_answer_is_the_non_streamed_answer() -> None:
    """Same usage under the prompt cache, and signatures a later call accepts."""
    system = [
        {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    body = ask(system=system)
    with FakeAnthropic(answer, cache=True) as direct, FakeAnthropic(answer, cache=True) as batched:
        streamed = client_of(direct).messages.create(**body, timeout=20.0).model_dump()
        client = client_of(batched)
        made = client.messages.batches.create(requests=[entry("turn-1", body)])
        result = results_of(client, made.id)["turn-1"]  # not held: ends at the first look
        assert isinstance(result, MessageBatchSucceededResult)
        message = result.message.model_dump()
        assert comparable(message) == comparable(streamed)
        assert message["usage"]["cache_creation"]["ephemeral_1h_input_tokens"] > 0
        recorded = batched.requests[-1].response
        assert recorded is not None and recorded["id"] == message["id"]

        # the batched answer goes back unchanged in the next (streamed) call: its thinking
        # signature is valid for that prefix, and the cache it wrote is read
        sent_back = [{k: v for k, v in b.items() if v is not None} for b in message["content"]]
        follow = copy.deepcopy(body)
        follow["messages"] += [
            {"role": "assistant", "content": sent_back},
            {"role": "user", "content": "And the Q4 one?"},
        ]
        with client.messages.stream(**follow) as stream:
            later = stream.get_final_message()
        assert (
            later.usage.cache_read_input_tokens == message["usage"]["cache_creation_input_tokens"]
        )


# --------------------------------------------------------------------------- refusals


@dataclass
class BatchRefusal:
    requests: list[Any]
    words: tuple[str, ...]
    status: int = 400
    type: str = "invalid_request_error"


def batch_refusal(name: str, requests: list[Any], *words: str, **kw: Any) -> Any:
    return pytest.param(BatchRefusal(requests, words, **kw), id=name)


BATCH_REFUSALS = [
    batch_refusal("no requests", [], "requests", "at least 1"),
    batch_refusal(
        "more requests than the limit",
        [entry(f"r{i}", ask()) for i in range(4)],
        "requests",
        "at most 3",
    ),
    batch_refusal(
        "body over the byte limit",
        [entry("big", ask("x" * 5000))],
        "maximum size",
        status=413,
        type="request_too_large",
    ),
    batch_refusal("empty custom_id", [entry("", ask())], "requests.0.custom_id"),
    batch_refusal("custom_id of 65 characters", [entry("a" * 65, ask())], "requests.0.custom_id"),
    batch_refusal("custom_id with a dot", [entry("run.1", ask())], "requests.0.custom_id"),
    batch_refusal("custom_id with a space", [entry("run 1", ask())], "requests.0.custom_id"),
    batch_refusal(
        "custom_id with a trailing newline", [entry("run1\n", ask())], "requests.0.custom_id"
    ),
    batch_refusal(
        "duplicate custom_id",
        [entry("same", ask()), entry("other", ask()), entry("same", ask("x"))],
        "requests.2.custom_id",
        "requests.0",
        "unique",
    ),
    batch_refusal(
        "a streamed request",
        [entry("ok", ask()), entry("streamed", ask(stream=True))],
        "requests.1.params.stream",
    ),
    batch_refusal("no params", [{"custom_id": "lonely"}], "requests.0.params"),
]


@pytest.mark.parametrize("case", BATCH_REFUSALS)
def test_batch_level_refusals(case: BatchRefusal) -> None:
    with FakeAnthropic(answer, batch_max_requests=3, batch_max_bytes=4000) as fake:
        with pytest.raises(anthropic.APIStatusError) as caught:
            client_of(fake).messages.batches.create(requests=case.requests)
        error = caught.value
        assert error.status_code == case.status
        assert isinstance(error.body, dict) and error.body["type"] == "error"
        assert error.body["error"]["type"] == case.type
        for word in case.words:
            assert word in error.body["error"]["message"]
        assert fake.batches_created == 0 and fake.batch_submissions == Counter()
        assert fake.requests == []


def test_what_the_limits_allow_is_accepted() -> None:
    """The edges of the refusals above: 64 characters, the limits themselves, stream false."""
    with FakeAnthropic(answer, batch_max_requests=3, batch_max_bytes=4000) as fake:
        requests = [
            entry("A" * 64, ask()),
            entry("run_1-2-3", ask(stream=False)),
            entry("z", ask()),
        ]
        assert len(json.dumps({"requests": requests})) < 4000
        made = client_of(fake).messages.batches.create(requests=requests)
        assert made.request_counts.processing == 3
        assert fake.batch_submissions == Counter({"A" * 64: 1, "run_1-2-3": 1, "z": 1})


# A row of each kind from the refusal table of test_contract_fake.py: the API's refusal of
# a direct call becomes the request's errored result, the batch goes on.
# (params, params the SDK does not declare: sent as extra body in a direct call)
CONTRACT_REFUSALS = [
    pytest.param(ask(thinking={"type": "disabled"}), {}, id="sonnet-5-5 thinking disabled"),
    pytest.param(ask(), {"temperature": 0.2}, id="sonnet-5-5 temperature"),
    pytest.param(ask(model="claude-unknown-9"), {}, id="unknown model (404)"),
    pytest.param(
        ask(output_config={"task_budget": {"type": "tokens", "total": 64000}}),
        {},
        id="task_budget without its beta header",
    ),
]


@pytest.mark.parametrize(("params", "extra"), CONTRACT_REFUSALS)
def test_a_refused_request_ends_errored_with_the_direct_error(
    fake: FakeAnthropic,
    client: anthropic.Anthropic,
    params: dict[str, Any],
    extra: dict[str, Any],
) -> None:
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**params, extra_body=extra, timeout=20.0)
    direct = caught.value
    assert isinstance(direct.body, dict)
    made = client.messages.batches.create(
        requests=[entry("refused", params | extra), entry("fine", ask())]
    )
    fake.release_batches()
    ended = client.messages.batches.retrieve(made.id)
    assert (ended.request_counts.errored, ended.request_counts.succeeded) == (1, 1)
    results = results_of(client, made.id)
    refused = results["refused"]
    assert isinstance(refused, MessageBatchErroredResult)
    assert refused.error.model_dump(exclude_none=True) == {
        "type": "error",
        "error": direct.body["error"],
    }
    assert isinstance(results["fine"], MessageBatchSucceededResult)
    batched = fake.requests[-2]
    assert (batched.custom_id, batched.status) == ("refused", direct.status_code)
    assert batched.error is not None and batched.error.message == direct.body["error"]["message"]


def test_each_request_is_checked_with_its_batch_s_beta_header(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    params = ask(
        model="claude-opus-5-5", output_config={"task_budget": {"type": "tokens", "total": 64000}}
    )
    plain = client.messages.batches.create(requests=[entry("plain", params)])
    beta = client.beta.messages.batches.create(
        requests=[entry("beta", params)],
        betas=[BETA_TASK_BUDGETS],
    )
    fake.release_batches()
    assert isinstance(results_of(client, plain.id)["plain"], MessageBatchErroredResult)
    beta_results = list(client.beta.messages.batches.results(beta.id, betas=[BETA_TASK_BUDGETS]))
    assert [(r.custom_id, r.result.type) for r in beta_results] == [("beta", "succeeded")]


# --------------------------------------------------------------------------- outcomes


def test_chosen_requests_end_expired_or_errored(fake: FakeAnthropic) -> None:
    def script(body: dict[str, Any], index: int) -> Reply:
        if body["messages"][-1]["content"] == "Busy?":
            return Status(500, "api_error", "Internal server error")
        return answer(body, index)

    fake.script = script
    client = client_of(fake)
    fake.batch_outcome("late", "expired")
    fake.batch_outcome("crowded", ApiError(529, "overloaded_error", "Overloaded"))
    made = client.messages.batches.create(
        requests=[
            entry("late", ask()),
            entry("crowded", ask()),
            entry("busy", ask("Busy?")),
            entry("fine", ask()),
        ]
    )
    fake.release_batches(made.id)
    counts = client.messages.batches.retrieve(made.id).request_counts
    assert (counts.expired, counts.errored, counts.succeeded) == (1, 2, 1)
    results = results_of(client, made.id)
    assert isinstance(results["late"], MessageBatchExpiredResult)
    crowded, busy = results["crowded"], results["busy"]
    assert isinstance(crowded, MessageBatchErroredResult)
    assert isinstance(busy, MessageBatchErroredResult)
    assert (crowded.error.error.type, crowded.error.error.message) == (
        "overloaded_error",
        "Overloaded",
    )
    assert (busy.error.error.type, busy.error.error.message) == (
        "api_error",
        "Internal server error",
    )
    assert isinstance(results["fine"], MessageBatchSucceededResult)
    # the chosen outcomes were never model calls; the scripted error was one
    assert [r.custom_id for r in fake.requests] == ["busy", "fine"]

    fake.batch_outcome("late", None)  # processed again in a later batch
    again = client.messages.batches.create(requests=[entry("late", ask())])
    fake.release_batches(again.id)
    assert isinstance(results_of(client, again.id)["late"], MessageBatchSucceededResult)
    assert fake.batch_submissions["late"] == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_batch_ends_after_its_delay_on_the_fake_s_clock() -> None:
    clock = Clock()
    with FakeAnthropic(answer, clock=clock, batch_delay=90.0) as fake:
        client = client_of(fake)
        made = client.messages.batches.create(requests=[entry("a", ask())])
        clock.now += 89
        assert client.messages.batches.retrieve(made.id).processing_status == "in_progress"
        clock.now += 2
        ended = client.messages.batches.retrieve(made.id)
        assert ended.processing_status == "ended" and ended.request_counts.succeeded == 1
        assert ended.ended_at is not None
        assert ended.ended_at - made.created_at == timedelta(seconds=90)


def test_a_held_batch_expires_after_24_hours() -> None:
    clock = Clock()
    with FakeAnthropic(answer, clock=clock, hold_batches=True) as fake:
        client = client_of(fake)
        made = client.messages.batches.create(requests=[entry("a", ask()), entry("b", ask())])
        clock.now += 24 * 3600 - 1
        assert client.messages.batches.retrieve(made.id).processing_status == "in_progress"
        clock.now += 1
        ended = client.messages.batches.retrieve(made.id)
        assert ended.processing_status == "ended" and ended.request_counts.expired == 2
        assert ended.ended_at == ended.expires_at
        results = results_of(client, made.id)
        assert all(isinstance(r, MessageBatchExpiredResult) for r in results.values())
        assert fake.requests == []


def test_hold_batches_can_be_switched(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    held = client.messages.batches.create(requests=[entry("held", ask())])
    fake.hold_batches(False)
    free = client.messages.batches.create(requests=[entry("free", ask())])
    assert client.messages.batches.retrieve(free.id).processing_status == "ended"
    assert client.messages.batches.retrieve(held.id).processing_status == "in_progress"
    fake.hold_batches()
    again = client.messages.batches.create(requests=[entry("again", ask())])
    assert client.messages.batches.retrieve(again.id).processing_status == "in_progress"
    assert fake.release_batches(held.id) == [held.id]
    assert client.messages.batches.retrieve(again.id).processing_status == "in_progress"


# --------------------------------------------------------------------------- cancel


def test_cancel_a_held_batch(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    made = client.messages.batches.create(requests=[entry("a", ask()), entry("b", ask())])
    canceling = client.messages.batches.cancel(made.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    assert canceling.cancel_initiated_at >= canceling.created_at
    assert client.messages.batches.retrieve(made.id).processing_status == "canceling"
    assert client.messages.batches.cancel(made.id).processing_status == "canceling"

    fake.release_batches()
    ended = client.messages.batches.retrieve(made.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.canceled, ended.request_counts.processing) == (2, 0)
    results = results_of(client, made.id)
    assert all(isinstance(r, MessageBatchCanceledResult) for r in results.values())
    assert fake.requests == []  # no request was processed

    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.batches.cancel(made.id)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert "ended" in caught.value.body["error"]["message"]


def test_a_cancelled_batch_not_held_ends_at_the_next_look() -> None:
    with FakeAnthropic(answer, batch_delay=3600.0) as fake:
        client = client_of(fake)
        made = client.messages.batches.create(requests=[entry("a", ask())])
        assert client.messages.batches.cancel(made.id).processing_status == "canceling"
        ended = client.messages.batches.retrieve(made.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == 1


# --------------------------------------------------------------------------- reading


def test_list_pages_newest_first(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    made = [client.messages.batches.create(requests=[entry(f"r{i}", ask())]).id for i in range(5)]
    newest_first = list(reversed(made))

    first = client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2]
    assert (first.has_more, first.first_id, first.last_id) == (True, made[4], made[3])
    assert [b.id for b in client.messages.batches.list(limit=2)] == newest_first  # all pages
    after = client.messages.batches.list(limit=2, after_id=made[1])
    assert ([b.id for b in after.data], after.has_more) == ([made[0]], False)
    before = client.messages.batches.list(limit=2, before_id=made[1])
    assert ([b.id for b in before.data], before.has_more) == ([made[3], made[2]], True)
    assert [b.id for b in client.messages.batches.list().data] == newest_first  # limit 20

    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.list(limit=0)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.list(limit=1001)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.list(after_id="msgbatch_unknown")


def test_results_before_the_end_are_refused(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    made = client.messages.batches.create(requests=[entry("a", ask())])
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client.messages.batches.results(made.id)  # the SDK reads results_url first
    status, _, body = raw_get(fake, f"/v1/messages/batches/{made.id}/results")
    error = json.loads(body)
    assert (status, error["type"], error["error"]["type"]) == (
        400,
        "error",
        "invalid_request_error",
    )
    assert "not ended" in error["error"]["message"]
    with pytest.raises(AssertionError, match="has not ended"):
        fake.batch_results(made.id)
    assert fake.results_fetches == Counter()
    fake.release_batches()
    assert raw_get(fake, f"/v1/messages/batches/{made.id}/results")[0] == 200
    assert fake.results_fetches == Counter({made.id: 1})


def test_unknown_batch_is_not_found(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.batches.retrieve("msgbatch_nothing")
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.cancel("msgbatch_nothing")
    status, _, body = raw_get(fake, "/v1/messages/batches/msgbatch_nothing/results")
    assert (status, json.loads(body)["error"]["type"]) == (404, "not_found_error")


def test_batch_routes_check_the_key() -> None:
    with FakeAnthropic(answer, accept_keys={KEY}, hold_batches=True) as fake:
        made = client_of(fake).messages.batches.create(requests=[entry("a", ask())])
        stranger = client_of(fake, key="sk-ant-api03-someone-else")
        with pytest.raises(anthropic.AuthenticationError):
            stranger.messages.batches.create(requests=[entry("b", ask())])
        with pytest.raises(anthropic.AuthenticationError):
            stranger.messages.batches.retrieve(made.id)
        with pytest.raises(anthropic.AuthenticationError):
            stranger.messages.batches.cancel(made.id)
        with pytest.raises(anthropic.AuthenticationError):
            stranger.messages.batches.list()
        fake.release_batches()
        assert raw_get(fake, f"/v1/messages/batches/{made.id}/results", "bad")[0] == 401
        assert fake.batches_created == 1 and fake.results_fetches == Counter()
        assert fake.batch(made.id)["cancel_initiated_at"] is None


# --------------------------------------------------------------------------- restart


def test_batches_outlive_a_restart_of_the_server(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    url = fake.url
    made = client.messages.batches.create(requests=[entry("run9-1-1", ask())])
    fake.stop()
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.batches.retrieve(made.id)
    fake.start()
    assert fake.url == url
    kept = client.messages.batches.retrieve(made.id)
    assert (kept.id, kept.processing_status) == (made.id, "in_progress")
    fake.restart()
    fake.release_batches()
    result = results_of(client_of(fake), made.id)["run9-1-1"]
    assert isinstance(result, MessageBatchSucceededResult)
    assert fake.batches_created == 1 and fake.batch_submissions == Counter({"run9-1-1": 1})
    fake.wait_batches(1)
