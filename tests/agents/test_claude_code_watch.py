"""The ``claude_code_watch`` setting: a worker imports new and grown sessions by itself."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.worker.claude_code import ClaudeCodeWatch
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, research_session
from tests.helpers.polling import wait_until


def _pass(watch: ClaudeCodeWatch, now: float) -> None:
    done = watch.passes
    watch.tick(now)
    wait_until(lambda: watch.passes > done, 60, "a pass of the watch")


def test_the_watch_imports_while_the_setting_is_on_and_only_what_changed(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    first = research_session(claude_home, tmp_path / "one")
    watch = ClaudeCodeWatch(client.store.db, client.settings, client.db_path, every_s=30)
    watch.tick(1000.0)  # the setting is off: nothing is read
    assert watch.passes == 0 and client.runs() == []
    Settings(claude_code_watch=True).save(client.db_path)  # switched on in Settings
    _pass(watch, 1030.0)
    (run,) = client.runs()
    assert run.spec.session_id == first.session_id and run.last_seq == 10
    watch.tick(1031.0)  # not due yet
    assert watch.passes == 1
    # A later pass reads only what changed: the grown session and a new one.
    first.user("and the retries?")
    second = research_session(claude_home, tmp_path / "two", start=1_790_300_000.0)
    token = client.store.change_token()
    _pass(watch, 1060.0)
    assert client.store.change_token() != token
    assert client.run(run.id).last_seq == 11
    assert {r.spec.session_id for r in client.runs()} == {first.session_id, second.session_id}
    token = client.store.change_token()
    _pass(watch, 1090.0)  # nothing changed: nothing written
    assert client.store.change_token() == token
    Settings(claude_code_watch=False).save(client.db_path)
    watch.tick(1120.0)
    assert watch.passes == 3
    watch.join()
