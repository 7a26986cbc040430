"""``--tools mcp:SERVER`` (and ``mcp:SERVER/TOOL``) gives a run an MCP server's tools.

The catalogue is the one a real hub writes after connecting to the tests' real MCP server
(over stdio, twice under two names) and to a server that cannot start (marked failed).
The run's definition holds the expanded names, as ``show`` prints them; unknown or failed
servers and unknown tools are refused before anything starts, on the command line, in
templates (schedule, batch, watch) and in the HTTP API.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from desktop_agent.cli import AUTOSTART_ENV
from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.tools.mcp import CATALOGUE_FILE, read_catalogue, start_hub
from tests.httpapi.test_api import Api, api  # noqa: F401 (the fixture)
from tests.mcp.conftest import server_log, stdio_server  # noqa: F401 (the fixture)
from tests.scheduler.test_cli import as_json, run_cli

GONE = {"name": "gone", "command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}


@pytest.fixture
def listed(
    client: Client,
    server_log: Path,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, list[str]]:
    """Write the catalogue of servers ``glossary``, ``notes`` and ``gone`` (failed).

    Returns each connected server's tool names as the catalogue spells them.
    """
    monkeypatch.setenv(AUTOSTART_ENV, "0")  # no worker: it would rewrite the catalogue
    path = client.db_path.parent / CATALOGUE_FILE
    hub = start_hub([stdio_server("glossary"), stdio_server("notes"), GONE], path)
    assert hub is not None
    hub.close()
    servers = {s["name"]: s for s in read_catalogue(path)["servers"]}
    assert servers["gone"]["state"] == "failed"
    return {
        name: [t["name"] for t in servers[name]["tools"]]
        for name in ("glossary", "notes")
        if servers[name]["state"] == "connected"
    }


def _started(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> str:
    started = as_json(capsys, db, "run", "Define lithium", "--model", "demo", "--detach", *args)
    return str(started["run"]["id"] if "run" in started else started["id"])


def test_a_server_gives_the_run_every_tool_it_lists_and_show_lists_them(
    client: Client, listed: dict[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db = client.db_path
    assert len(listed["glossary"]) > 3 and all(
        n.startswith("glossary__") for n in listed["glossary"]
    )
    run_id = _started(capsys, db, "--tools", "mcp:glossary")
    assert client.run(run_id).spec.tool_names == tuple(listed["glossary"])
    shown = as_json(capsys, db, "show", run_id)
    assert shown["tools"] == listed["glossary"]
    code, text, _ = run_cli(capsys, db, "show", run_id)
    assert code == 0 and f"tools:     {', '.join(listed['glossary'])}" in text

    mixed = _started(capsys, db, "--tools", "read_file,web_fetch,mcp:notes/lookup,mcp:glossary")
    assert client.run(mixed).spec.tool_names == (
        "read_file",
        "web_fetch",
        "notes__lookup",
        *listed["glossary"],
    )
    by_shown_name = _started(capsys, db, "--tools", "mcp:notes/notes__tag")
    assert client.run(by_shown_name).spec.tool_names == ("notes__tag",)
    versions = dict(client.run(run_id).spec.tools)
    assert all(v.startswith("mcp-") for v in versions.values())


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("mcp:glosary", "no MCP server 'glosary' (did you mean glossary?); MCP servers: "),
        ("read_file,mcp:note", "no MCP server 'note' (did you mean notes?)"),
        ("mcp:gone", "MCP server 'gone' is failed: "),
        ("mcp:notes/lookp", "MCP server 'notes' has no tool 'lookp' (did you mean lookup?)"),
        ("mcp:", "name the MCP server"),
    ],
)
def test_unknown_or_failed_servers_and_tools_are_refused_before_the_run_starts(
    client: Client,
    listed: dict[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    tools: str,
    message: str,
) -> None:
    code, _out, err = run_cli(
        capsys, client.db_path, "run", "Define", "--model", "demo", "--detach", "--tools", tools
    )
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1
    if "no MCP server" in message:
        assert "glossary, gone, notes" in err  # the servers that exist
    if "no tool" in message:
        assert "its tools: lookup" in err
    assert client.runs() == []


def test_schedules_batches_watches_and_the_http_api_take_the_same_syntax(
    client: Client,
    listed: dict[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    api: Api,  # noqa: F811
) -> None:
    db = client.db_path
    schedule = as_json(
        capsys, db, "schedule", "add", "Digest", "--every", "1h", "--model", "demo",
        "--tools", "read_file,mcp:notes", "--no-worker",
    )  # fmt: skip
    sched = Scheduling(client)
    template = sched.schedule(schedule["id"]).template
    assert template.spec.tool_names == ("read_file", *listed["notes"])
    folder = tmp_path / "inbox"
    folder.mkdir()
    watch = as_json(
        capsys, db, "watch", "add", str(folder), "Read {name}", "--model", "demo",
        "--tools", "mcp:glossary/lookup", "--no-worker",
    )  # fmt: skip
    (watched,) = [w for w in sched.watches() if w.id == watch["id"]]
    assert watched.template.spec.tool_names == ("glossary__lookup",)
    lines = tmp_path / "items.txt"
    lines.write_text("lithium\ncobalt\n")
    code, _out, err = run_cli(
        capsys, db, "batch", "start", "Define {item}", "--lines", str(lines), "--model", "demo",
        "--tools", "mcp:glosary", "--no-worker",
    )  # fmt: skip
    assert code == 2 and "did you mean glossary?" in err
    batch = as_json(
        capsys, db, "batch", "start", "Define {item}", "--lines", str(lines), "--model", "demo",
        "--tools", "mcp:glossary/tag", "--no-worker",
    )  # fmt: skip
    assert sched.batch(batch["id"]).template.spec.tool_names == ("glossary__tag",)

    made = api.http.post(
        "/v1/runs", json={"goal": "Define", "model": "demo", "tools": ["mcp:notes/lookup"]}
    )
    assert made.status_code == 202, made.text
    assert client.run(made.json()["id"]).spec.tool_names == ("notes__lookup",)
    refused = api.http.post(
        "/v1/runs", json={"goal": "Define", "model": "demo", "tools": ["mcp:gone"]}
    )
    assert refused.status_code == 400 and "is failed" in refused.json()["error"]
    assert json.loads(json.dumps(refused.json()))["error"].count("\n") == 0
