"""One module talks to the OS keyring, under one scheme of entries.

The import-linter contract ``keyring-only-in-secrets`` sees imports; this file reads the
source for what imports cannot show (a keyring reached through ``importlib`` or
``__import__``), checks that the names other modules print for the analyst are the
scheme's, and that every entry of the scheme is read through :mod:`desktop_agent.secrets`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import keyring
import keyring.errors
from keyring.backends import null

from desktop_agent import secrets
from desktop_agent.httpapi import auth
from desktop_agent.tools import mail, mcp
from tests.faults.test_keyring_and_network import BrokenKeyring
from tests.helpers.fakes import MemoryKeyring

PACKAGE = Path(secrets.__file__).resolve().parent


def keyring_uses(tree: ast.AST) -> list[int]:
    """Lines that import the keyring or name it in a dynamic import."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] == "keyring" for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "keyring":
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args:  # import_module("keyring"), __import__
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and str(first.value).split(".")[0] == "keyring"
            ):
                lines.append(node.lineno)
    return lines


def test_no_module_but_secrets_uses_the_keyring() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "secrets.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(PACKAGE)}:{n}" for n in keyring_uses(tree)]
    assert offenders == []


def test_the_check_sees_each_way_of_reaching_the_keyring() -> None:
    for source in (
        "import keyring\n",
        "import keyring.errors as e\n",
        "from keyring.backends import fail\n",
        "import importlib\nk = importlib.import_module('keyring')\n",
        "def f():\n    import keyring\n",
        "k = __import__('keyring.core')\n",
    ):
        assert keyring_uses(ast.parse(source)), source
    assert keyring_uses(ast.parse("x = 'keyring'\nimport json\nimport_module('json')\n")) == []
    assert keyring_uses(ast.parse(Path(secrets.__file__).read_text(encoding="utf-8")))


def test_the_names_shown_to_the_analyst_are_the_scheme_s() -> None:
    assert mail.KEYRING_SERVICE == secrets.SERVICE
    assert mcp.SECRET_SERVICE == secrets.MCP_SERVICE
    services = {secrets.SERVICE, secrets.DATABASE_SERVICE, secrets.MCP_SERVICE}
    assert all(s == "desktop-agent" or s.startswith("desktop-agent-") for s in services)
    assert len(services) == 3


def test_every_entry_of_the_scheme_is_read_through_secrets(
    memory_keyring: MemoryKeyring, tmp_path: Path
) -> None:
    keyring.set_password("desktop-agent", "smtp-password", "smtp-pw")
    keyring.set_password("desktop-agent", "imap-password", "imap-pw")
    keyring.set_password("desktop-agent-mcp", "crm/token", "mcp-secret")
    keyring.set_password("desktop-agent-database", "ana@db:5432/agents", "db-pw")
    assert mail._password(mail.SMTP_PASSWORD_USER) == "smtp-pw"
    assert mail._password(mail.IMAP_PASSWORD_USER) == "imap-pw"
    assert mcp.resolve_secrets("crm", {"TOKEN": "keyring:token", "X": "plain"}) == {
        "TOKEN": "mcp-secret",
        "X": "plain",
    }
    assert secrets.database_password("postgresql://ana@db/agents") == "db-pw"
    db = tmp_path / "data" / "desktop-agent.db"
    token = auth.make_token(db)
    assert secrets.read_secret(secrets.SERVICE, f"http-api-token:{db.parent.absolute()}") == (
        token,
        "",
    )
    assert auth.load_token(db) == token
    assert not (db.parent / auth.TOKEN_FILE).exists()


def test_a_broken_keyring_reads_as_nothing_and_says_why() -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring(keyring.errors.KeyringLocked("the vault is locked")))
    try:
        value, reason = secrets.read_secret(secrets.SERVICE, "smtp-password")
        assert value is None
        assert "the vault is locked" in reason
        assert "the vault is locked" in secrets.store_secret(secrets.SERVICE, "x", "v")
        assert secrets.forget_secret(secrets.SERVICE, "x") is False
        assert mail._password(mail.SMTP_PASSWORD_USER) is None
    finally:
        keyring.set_keyring(previous)


def test_a_store_that_would_drop_the_secret_is_never_written(tmp_path: Path) -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(null.Keyring())  # type: ignore[no-untyped-call]
    try:
        assert "no secure store" in secrets.store_secret(secrets.SERVICE, "x", "v")
        db = tmp_path / "data" / "desktop-agent.db"
        token = auth.make_token(db)  # the private file instead
        assert (db.parent / auth.TOKEN_FILE).read_text(encoding="utf-8").strip() == token
        assert (db.parent / auth.TOKEN_FILE).stat().st_mode & 0o777 == 0o600
        assert auth.load_token(db) == token
    finally:
        keyring.set_keyring(previous)
