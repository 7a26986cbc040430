"""send_email against a real SMTP server (and a small IMAP one) on 127.0.0.1."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from typing import Any

import keyring
import pytest

from desktop_agent.config import Settings
from desktop_agent.domain import EffectClass
from desktop_agent.engine.control import run_tool
from desktop_agent.tools.mail import SendEmail, message_id
from tests.helpers.fakes import MemoryKeyring
from tests.tools.conftest import MakeCtx
from tests.tools.servers import ImapServer, SmtpServer


def smtp_settings(server: SmtpServer, **more: Any) -> dict[str, Any]:
    return {
        "smtp_host": "127.0.0.1",
        "smtp_port": server.port,
        "smtp_security": "none",
        "smtp_username": "analyst",
        "smtp_from": "analyst@example.test",
        **more,
    }


ARGS = {
    "to": ["cfo@example.test"],
    "cc": ["team@example.test"],
    "subject": "Q3 summary",
    "body": "Revenue rose 12 % — details attached.\n",
}


@pytest.fixture
def imap() -> Iterator[ImapServer]:
    server = ImapServer(set())
    yield server
    server.close()


def test_sends_with_a_message_id_derived_from_the_key(
    smtp_server: SmtpServer, make_ctx: MakeCtx, memory_keyring: MemoryKeyring
) -> None:
    keyring.set_password("desktop-agent", "smtp-password", "s3cret")
    ctx = make_ctx(run_id="r1", seq=5, **smtp_settings(smtp_server))
    tool = SendEmail()
    assert tool.effect == EffectClass.UNSAFE
    res = run_tool(tool, ARGS, ctx)
    assert not res.is_error, res.content
    (mail,) = smtp_server.mails
    assert mail.sender == "analyst@example.test"
    assert mail.recipients == ["cfo@example.test", "team@example.test"]
    msg = email.message_from_bytes(mail.data, policy=email.policy.default)
    expected = message_id("r1:5", "analyst@example.test")
    assert msg["Message-ID"] == expected == res.data["message_id"]
    assert expected.endswith("@example.test>")
    assert msg["Subject"] == "Q3 summary"
    assert "Revenue rose 12 % — details attached." in msg.get_content()
    assert smtp_server.logins == [("analyst", "s3cret")]  # the password came from the keyring
    # The same step always gets the same Message-ID; another step another one.
    assert message_id("r1:5", "analyst@example.test") == expected
    assert message_id("r1:6", "analyst@example.test") != expected


def test_the_password_never_lives_in_settings(tmp_path: Any) -> None:
    db = tmp_path / "d" / "agent.db"
    settings = Settings(smtp_host="smtp.example.test", smtp_username="analyst")
    settings.save(db)
    text = (db.parent / "settings.json").read_text()
    assert "password" not in text
    assert not any("password" in name for name in settings.model_dump())
    # A password written into the file by hand is not used, and not kept: saving drops it.
    (db.parent / "settings.json").write_text(text.replace("{", '{"smtp_password": "x",', 1))
    loaded = Settings.load(db)
    assert "smtp_password" not in loaded.model_dump()
    assert loaded.smtp_host == "smtp.example.test"  # the rest of the file is read
    loaded.save(db)
    assert "smtp_password" not in (db.parent / "settings.json").read_text()


def test_bad_messages_and_missing_setup_are_errors(
    smtp_server: SmtpServer, make_ctx: MakeCtx
) -> None:
    tool = SendEmail()
    unset = make_ctx()
    assert "not set up" in run_tool(tool, ARGS, unset).content
    assert tool.validate(ARGS, unset) is not None  # checked again right before sending
    ctx = make_ctx(**smtp_settings(smtp_server, smtp_username=""))
    for bad in (
        {**ARGS, "subject": "hi\r\nBcc: everyone@example.test"},
        {**ARGS, "to": ["not-an-address"]},
        {**ARGS, "to": ["a@example.test>, evil@example.test"]},
        {**ARGS, "to": []},
        {**ARGS, "body": ""},
    ):
        res = run_tool(tool, bad, ctx)
        assert res.is_error and "invalid arguments" in res.content
    no_password = make_ctx(**smtp_settings(smtp_server))
    assert "no SMTP password" in run_tool(tool, ARGS, no_password).content
    remote = make_ctx(**smtp_settings(smtp_server, smtp_host="localhost.example.test"))
    keyring.set_password("desktop-agent", "smtp-password", "s3cret")
    res = run_tool(tool, ARGS, remote)
    assert res.is_error
    assert smtp_server.mails == []


def test_probe_looks_for_the_message_id_in_the_sent_folder(
    make_ctx: MakeCtx, imap: ImapServer, memory_keyring: MemoryKeyring
) -> None:
    keyring.set_password("desktop-agent", "smtp-password", "s3cret")
    tool = SendEmail()
    imap_settings = {
        "smtp_host": "127.0.0.1",
        "smtp_from": "analyst@example.test",
        "smtp_username": "analyst",
        "imap_host": "127.0.0.1",
        "imap_port": imap.port,
        "imap_security": "none",
    }
    ctx = make_ctx(run_id="r1", seq=5, **imap_settings)
    assert tool.probe(ARGS, ctx) is None  # not in Sent: that proves nothing
    imap.sent_ids.add(message_id("r1:5", "analyst@example.test"))
    assert tool.probe(ARGS, ctx) is True
    assert imap.logins[-1] == ("analyst", "s3cret")
    assert imap.searches[-1] == message_id("r1:5", "analyst@example.test")
    assert tool.probe(ARGS, make_ctx(run_id="r1", seq=6, **imap_settings)) is None
    assert tool.probe(ARGS, make_ctx()) is None  # no IMAP configured
