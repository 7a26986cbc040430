"""Economy mode through the HTTP API: refusals, and where a waiting run's turn is.

A model without Message Batches is refused economy mode; a run waiting in a batch says
where its turn is (``batch`` in its JSON).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from desktop_agent.client.api import Client
from desktop_agent.httpapi.app import create_app
from tests.economy.waits import NO_BATCH, send_batch, wait_in_batch, without_batches

TOKEN = "the-test-token"


@pytest.fixture
def http(client: Client) -> Iterator[TestClient]:
    app = create_app(client.db_path, TOKEN, start_workers=False)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url="http://127.0.0.1", headers=auth) as test_client:
        yield test_client


def test_economy_for_a_model_without_batches_answers_400_with_why(
    http: TestClient, client: Client
) -> None:
    without_batches(client)
    refused = http.post("/v1/runs", json={"goal": "X", "model": NO_BATCH, "economy": True})
    assert refused.status_code == 400
    assert refused.json()["error"].startswith(f"{NO_BATCH} does not take Message Batches")
    streamed = http.post("/v1/runs", json={"goal": "X", "model": NO_BATCH, "economy": False})
    assert streamed.status_code == 202, streamed.text
    assert [r.spec.economy for r in client.runs()] == [False]


def test_a_run_waiting_in_a_batch_says_where_its_turn_is(http: TestClient, client: Client) -> None:
    started = http.post("/v1/runs", json={"goal": "X", "model": "claude-sonnet-5-5",
                                          "economy": True})  # fmt: skip
    assert started.status_code == 202, started.text
    url = started.json()["status_url"]
    assert http.get(url).json()["batch"] is None  # queued as a run, no turn yet
    run = client.run(started.json()["id"])
    now = time.time()
    wait_in_batch(client, run, now - 60)
    shown = http.get(url).json()
    assert shown["economy"] is True and shown["wait_reason"] == "batch"
    assert shown["batch"]["state"] == "queued" and shown["batch"]["batch_id"] is None
    assert shown["batch"]["queued_at"] == pytest.approx(now - 60)
    send_batch(client, "msgbatch_07", now)
    batch = http.get(url).json()["batch"]
    assert (batch["state"], batch["batch_id"]) == ("submitted", "msgbatch_07")
    assert batch["submitted_at"] == pytest.approx(now)
