"""Runs to export: made through the real store and engine, with secrets where they can slip in."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from desktop_agent.client.api import Client
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

REPO = Path(__file__).resolve().parents[2]

API_KEY = "sk-ant-api03-" + "Zq9w" * 8
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu"
ASSIGNED = "api_key=Zk3l9Qm2Xw7Rt5Yp"
SECRET_PARTS = ("Zq9wZq9w", "eyJhbGciOiJIUzI1NiJ9", "Zk3l9Qm2Xw7Rt5Yp")
"""What of each secret must never appear in an export."""
HOSTILE = "</script><b>bold</b><script>alert(1)</script>"
LONG = "All vendors, in detail. " * 400


def cli(db: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``desktop-agent --db DB ARGS`` as a child process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


def no_secret(text: str) -> bool:
    """Whether ``text`` holds none of the secrets."""
    return not any(part in text for part in SECRET_PARTS)


def secret_run(client: Client, make_executor: MakeExecutor, ws: Path) -> str:
    """A finished run whose goal, steps, approval and a written file hold key-like secrets.

    The model plans, writes ``findings.md`` (asked for approval: the decision's note holds
    a token), writes its report and says something hostile to HTML and something long.
    """
    run = client.start_run(
        f"Summarise the Q3 vendor notes (key {API_KEY})",
        model="claude-haiku-4-5",
        workspace=ws,
        approval_overrides={"write_file": "ask"},
    )
    findings = {"path": "findings.md", "content": f"# Findings\n{BEARER}\n{ASSIGNED}\n{API_KEY}\n"}
    report = {"path": "report.md", "content": "# Q3\nVendors hold 71% of the market.\n"}
    plan = {"items": [{"text": "Read the notes", "done": True}, {"text": "Report", "done": True}]}
    replies = [
        Reply(f"Planning with {BEARER}.", [("update_plan", {"items": plan["items"]})]),
        Reply(f"Writing findings. {HOSTILE}", [("write_file", findings)]),
        Reply(LONG, [("write_file", report)]),
        Reply(f"Done; {ASSIGNED}."),
    ]
    executor = make_executor(ScriptedModel(replies))
    for _ in range(3):
        drain(client.store, executor)
        for approval in client.approvals():
            client.approve(approval.id, note=f"fine, {BEARER}")
    assert client.run(run.id).status.value == "completed"
    return run.id


def bundle_members(path: Path) -> dict[str, bytes]:
    """Every file of a bundle by name."""
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is not None
            out[m.name] = f.read()
        return out


def write_bundle(path: Path, members: dict[str, bytes]) -> None:
    """Write a bundle with exactly these members (for the refusals)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def manifest_of(members: dict[str, bytes]) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(members["manifest.json"])
    return manifest
