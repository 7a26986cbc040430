"""Tags through the HTTP API: ``POST /v1/runs`` takes them, ``GET /v1/runs?tag=T`` filters."""

from __future__ import annotations

from desktop_agent.client.api import Client
from tests.httpapi.test_api import Api, api  # noqa: F401 (the fixture)


def test_runs_are_started_with_tags_and_listed_by_all_of_them(api: Api, client: Client) -> None:  # noqa: F811
    first = api.http.post("/v1/runs", json={"goal": "A", "model": "demo", "tags": ["Q3", "x"]})
    second = api.http.post("/v1/runs", json={"goal": "B", "model": "demo", "tags": ["q3"]})
    assert first.status_code == second.status_code == 202, first.text
    one, two = first.json()["id"], second.json()["id"]
    assert api.http.get(f"/v1/runs/{one}").json()["tags"] == ["q3", "x"]
    listed = api.http.get("/v1/runs", params=[("tag", "q3")]).json()
    assert {r["id"] for r in listed} == {one, two}
    both = api.http.get("/v1/runs", params=[("tag", "q3"), ("tag", "X")]).json()
    assert [r["id"] for r in both] == [one]

    bad = api.http.post("/v1/runs", json={"goal": "C", "model": "demo", "tags": ["no good"]})
    assert bad.status_code == 400 and "is not a tag" in bad.json()["error"]
    shape = api.http.post("/v1/runs", json={"goal": "C", "model": "demo", "tags": "q3"})
    assert shape.status_code == 400 and "'tags' must be a list" in shape.json()["error"]
    assert len(client.runs()) == 2
