"""``POST /v1/runs/estimate`` answers the forecast; a run's JSON carries the one it kept."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from desktop_agent.client.api import Client
from desktop_agent.httpapi.app import create_app
from desktop_agent.llm.pricing import BATCH_DISCOUNT
from tests.forecast.history import past_run
from tests.helpers.timed_journal import Clock

TOKEN = "the-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HISTORY = [(0.40, 300.0), (0.55, 420.0), (0.32, 240.0), (0.61, 480.0)]


@pytest.fixture
def http(client: Client) -> Iterator[TestClient]:
    clock = Clock(1_790_000_000.0)
    for cost, duration in HISTORY:
        past_run(client, clock, model="claude-opus-5-5", effort="low", cost=cost, duration=duration)
    app = create_app(client.db_path, TOKEN, start_workers=False)
    with TestClient(app, base_url="http://127.0.0.1", headers=AUTH) as test_client:
        yield test_client


def test_the_estimate_takes_the_new_run_body_and_starts_nothing(
    http: TestClient, client: Client
) -> None:
    body = {"goal": "Summarise", "model": "claude-opus-5-5", "effort": "low", "economy": True}
    answer = http.post("/v1/runs/estimate", json={**body, "items": 4, "concurrency": 2})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    costs = [c for c, _ in HISTORY]
    assert (data["basis"], data["based_on"], data["economy"], data["items"]) == (
        "history",
        4,
        True,
        4,
    )
    # Economy asked for, only streamed runs known: derived at the batch discount.
    assert data["cost_usd"]["median"] == pytest.approx(
        4 * statistics.median(costs) * BATCH_DISCOUNT
    )
    assert data["modes"]["streamed"]["cost_usd"]["median"] == pytest.approx(
        4 * statistics.median(costs)
    )
    assert "on Claude Opus 5.5 at low effort" in data["explain"]
    assert len(client.runs()) == len(HISTORY)  # nothing was started

    refused = http.post("/v1/runs/estimate", json={"model": "claude-opus-5-5", "items": 0})
    assert refused.status_code == 400 and "'items'" in refused.json()["error"]
    refused = http.post("/v1/runs/estimate", json={"model": "claude-opus-5-5", "economy": "yes"})
    assert refused.status_code == 400


def test_a_started_run_shows_the_forecast_it_was_started_with(
    http: TestClient, client: Client
) -> None:
    started = http.post(
        "/v1/runs", json={"goal": "Summarise", "model": "claude-opus-5-5", "effort": "low"}
    )
    assert started.status_code == 202, started.text
    run = http.get(started.json()["status_url"]).json()
    kept = run["forecast"]
    assert (kept["basis"], kept["based_on"]) == ("history", 4)
    assert kept["cost_usd"]["median"] == pytest.approx(statistics.median(c for c, _ in HISTORY))
    older = http.get(f"/v1/runs/{client.runs()[-1].id}").json()
    assert older["forecast"] is None  # written straight into the store: none was made
