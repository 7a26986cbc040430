"""``POST /v1/runs`` with attachments (base64 in the JSON body), through a real server."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.httpapi import attachments as uploads
from tests.httpapi.test_api import Api, api  # noqa: F401  (the fixture)


def item(name: str, content: bytes) -> dict[str, str]:
    return {"name": name, "content_base64": base64.b64encode(content).decode()}


def test_start_with_two_attachments_copies_them_into_the_workspace(
    api: Api,  # noqa: F811
    client: Client,
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    csv, pdf = b"a,b\n1,2\n", b"%PDF-1.4 " + bytes(range(256))
    body = {"goal": "Read", "model": "demo", "workspace": str(ws),
            "attachments": [item("data.csv", csv), item("report.pdf", pdf)]}  # fmt: skip
    started = api.http.post("/v1/runs", json=body)
    assert started.status_code == 202, started.text
    run = api.http.get(started.json()["status_url"]).json()
    assert run["attachments"] == [
        {"name": "data.csv", "path": "attachments/data.csv", "size": len(csv),
         "sha256": hashlib.sha256(csv).hexdigest()},
        {"name": "report.pdf", "path": "attachments/report.pdf", "size": len(pdf),
         "sha256": hashlib.sha256(pdf).hexdigest()},
    ]  # fmt: skip
    assert (ws / "attachments" / "report.pdf").read_bytes() == pdf
    assert client.run(run["id"]).spec.attachments[0].name == "data.csv"


@pytest.mark.parametrize(
    ("attachments", "status", "words"),
    [
        ([item("../../escape.txt", b"x")], 400, "plain file name"),
        ([{"name": "a.txt", "content_base64": "not base64!"}], 400, "not valid base64"),
        ([{"name": "a.txt"}], 400, "content_base64 is required"),
        ("a.txt", 400, "must be a list"),
    ],
)
def test_bad_attachments_are_refused_and_no_run_starts(
    api: Api,  # noqa: F811
    client: Client,
    tmp_path: Path,
    attachments: object,
    status: int,
    words: str,
) -> None:
    body = {"goal": "Read", "model": "demo", "workspace": str(tmp_path / "ws"),
            "attachments": attachments}  # fmt: skip
    refused = api.http.post("/v1/runs", json=body)
    assert refused.status_code == status and words in refused.json()["error"]
    assert client.runs() == []
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "ws" / "attachments").exists()


def test_files_over_the_apis_limit_are_413_and_a_body_needs_the_token(
    api: Api,  # noqa: F811
    client: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(uploads, "API_MAX_BYTES", 10)
    body = {"goal": "Read", "model": "demo",
            "attachments": [item("a.txt", b"12345"), item("b.txt", b"678901")]}  # fmt: skip
    refused = api.http.post("/v1/runs", json=body)
    assert refused.status_code == 413
    assert "attachment b.txt" in refused.json()["error"]
    assert "--attach" in refused.json()["error"]
    with api.anonymous() as anonymous:
        assert anonymous.post("/v1/runs", json=body).status_code == 401
    assert client.runs() == []


def test_attachments_are_held_to_the_bodys_limit(
    api: Api,  # noqa: F811
    client: Client,
) -> None:
    body = {"goal": "Read", "model": "demo", "attachments": [item("a.bin", b"x" * 800_000)]}
    refused = api.http.post("/v1/runs", json=body)
    assert refused.status_code == 413 and "1048576 bytes" in refused.json()["error"]
    assert client.runs() == []
