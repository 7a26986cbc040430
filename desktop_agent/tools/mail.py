"""send_email: send a message over SMTP, with a Message-ID derived from the step's key.

The server, port, security (``starttls``, ``ssl`` or ``none``), user name and sender come
from the settings (``smtp_*``); the password comes from the OS keyring (service
``desktop-agent``, user ``smtp-password``) and is never stored in the settings file.
The Message-ID is a pure function of the idempotency key, so the same step always sends
the same Message-ID: a mail server that keeps a copy in the Sent folder can later be asked
(over IMAP, settings ``imap_*``) whether the message went out.

The point of no return of a send is the SMTP ``DATA`` command: until then (connected,
logged in, sender and recipients accepted) nothing has gone out. Right before it, the tool
asks whether the worker still holds the run (``ctx.check_lease``): a worker that was
frozen meanwhile, and whose run another worker took over, abandons the send there.
"""

from __future__ import annotations

import contextlib
import hashlib
import imaplib
import re
import smtplib
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from pydantic import Field

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.domain.settings import Settings
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.http_client import ssl_context
from desktop_agent.tools.base import ToolArgs, TypedTool, result

KEYRING_SERVICE = "desktop-agent"
"""Where the passwords are: :data:`desktop_agent.secrets.SERVICE`."""
SMTP_PASSWORD_USER = "smtp-password"
IMAP_PASSWORD_USER = "imap-password"
_ADDRESS = re.compile(r"^[^@\s<>(),;:\"\[\]\\]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z0-9-]{2,63}$")
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def message_id(idempotency_key: str, sender: str) -> str:
    """The Message-ID of the e-mail sent by the step with ``idempotency_key``."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    domain = sender.rsplit("@", 1)[-1] if "@" in sender else "desktop-agent.invalid"
    return f"<{digest}.desktop-agent@{domain}>"


class EmailArgs(ToolArgs):
    """Arguments of send_email."""

    to: list[str] = Field(min_length=1, max_length=20, description="recipient addresses")
    cc: list[str] = Field(default_factory=list, max_length=20, description="copy to")
    subject: str = Field(min_length=1, max_length=300, description="one-line subject")
    body: str = Field(min_length=1, max_length=200_000, description="plain-text body")


class SendEmail(TypedTool[EmailArgs]):
    """Send an e-mail (cannot be undone)."""

    name = "send_email"
    description = (
        "Send a plain-text e-mail from the analyst's configured account. It cannot be "
        "undone: the analyst is usually asked to approve it first."
    )
    args_model = EmailArgs
    effect = EffectClass.UNSAFE
    approval = ApprovalPolicy.ALWAYS

    def check(self, args: EmailArgs, ctx: ToolContext) -> str | None:
        """Right before an approved send: the account must still be configured."""
        return _config_problem(ctx.settings)

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float | None:
        """The mail server's timeout (setting ``smtp_timeout_s``, 30 s by default)."""
        return _timeout(ctx.settings)

    def call(self, args: EmailArgs, ctx: ToolContext) -> ToolResult:
        """Build the message and hand it to the SMTP server."""
        settings = ctx.settings
        problem = _config_problem(settings)
        if problem:
            return result(problem, error=True)
        msg = build_message(args, ctx, settings)
        try:
            refused = _send(msg, settings, ctx.check_lease)
        except (smtplib.SMTPAuthenticationError, smtplib.SMTPSenderRefused) as exc:
            return result(f"the mail server refused the account: {exc}", error=True)
        except smtplib.SMTPRecipientsRefused as exc:
            return result(f"every recipient was refused: {list(exc.recipients)}", error=True)
        except (TimeoutError, smtplib.SMTPServerDisconnected) as exc:
            return result(
                f"the connection to the mail server broke ({exc}): the message may or may "
                "not have been sent. Do not send it again without checking.",
                error=True,
            )
        except (smtplib.SMTPException, OSError) as exc:
            return result(f"sending failed: {exc}", error=True)
        note = f"; refused: {', '.join(refused)}" if refused else ""
        return result(
            f"sent {msg['Subject']!r} to {', '.join([*args.to, *args.cc])} "
            f"(Message-ID {msg['Message-ID']}){note}",
            data={"message_id": msg["Message-ID"], "refused": sorted(refused)},
        )

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """Look for the step's Message-ID in the Sent folder over IMAP, if configured.

        Returns True when found. Not finding it proves nothing (not every server files
        sent mail), so that is None, like having no IMAP settings.
        """
        settings = ctx.settings
        if not settings.imap_host or not settings.smtp_from:
            return None
        wanted = message_id(ctx.idempotency_key, settings.smtp_from)
        return True if _imap_has(wanted, settings) else None


def build_message(args: EmailArgs, ctx: ToolContext, settings: Settings) -> EmailMessage:
    """The message for ``args``; raises ToolInputError for unsafe or invalid fields."""
    for address in [*args.to, *args.cc]:
        if not _ADDRESS.match(address):
            raise ToolInputError(f"not a plain e-mail address: {address!r}")
    if any(c in args.subject for c in "\r\n"):
        raise ToolInputError("the subject must be one line")
    sender = settings.smtp_from
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(args.to)
    if args.cc:
        msg["Cc"] = ", ".join(args.cc)
    msg["Subject"] = args.subject
    msg["Date"] = formatdate(ctx.clock.now(), localtime=True)
    msg["Message-ID"] = message_id(ctx.idempotency_key, sender)
    msg.set_content(args.body)
    return msg


def _config_problem(settings: Settings) -> str | None:
    if not settings.smtp_host or not settings.smtp_from:
        return "e-mail is not set up: the analyst must set smtp_host and smtp_from in settings"
    return None


def _password(user: str) -> str | None:
    # Imported here, not with the tool: a worker may never send an e-mail.
    from desktop_agent.secrets import read_secret

    return read_secret(KEYRING_SERVICE, user)[0]


def _timeout(settings: Settings) -> float:
    return settings.smtp_timeout_s


class _Smtp(smtplib.SMTP):
    """An SMTP session that makes a last check right before ``DATA``.

    ``send_message`` sends the envelope (MAIL, RCPT) and then DATA in one call; this is
    the only place between the two. ``last_check`` raises to abandon the send, and the
    session then ends with QUIT, the message never handed over.
    """

    def __init__(self, *args: Any, last_check: Callable[[], None], **kwargs: Any) -> None:
        self._last_check = last_check
        super().__init__(*args, **kwargs)

    def data(self, msg: Any) -> tuple[int, bytes]:
        """Check, then hand the message over (the point of no return)."""
        self._last_check()
        return super().data(msg)


class _SmtpSsl(_Smtp, smtplib.SMTP_SSL):
    """:class:`_Smtp` over TLS from the start."""


def _send(
    msg: EmailMessage, settings: Settings, last_check: Callable[[], None]
) -> dict[str, tuple[int, bytes]]:
    host = settings.smtp_host
    security = settings.smtp_security
    port = settings.smtp_port or (465 if security == "ssl" else 587)
    timeout = _timeout(settings)
    username = settings.smtp_username
    context = ssl_context()  # the same certificates as every HTTPS connection
    smtp: smtplib.SMTP
    if security == "ssl":
        smtp = _SmtpSsl(host, port, timeout=timeout, context=context, last_check=last_check)
    else:
        smtp = _Smtp(host, port, timeout=timeout, last_check=last_check)
    with smtp:
        smtp.ehlo()
        if security == "starttls":
            smtp.starttls(context=context)
            smtp.ehlo()
        if username:
            if security == "none" and host not in _LOOPBACK:
                raise smtplib.SMTPException(
                    "refusing to send the password unencrypted: use starttls or ssl"
                )
            password = _password(SMTP_PASSWORD_USER)
            if password is None:
                raise smtplib.SMTPException(
                    f"no SMTP password in the keyring (service {KEYRING_SERVICE!r}, "
                    f"user {SMTP_PASSWORD_USER!r})"
                )
            smtp.login(username, password)
        return smtp.send_message(msg)


def _imap_has(wanted: str, settings: Settings) -> bool:
    host = settings.imap_host
    security = settings.imap_security
    port = settings.imap_port or (993 if security == "ssl" else 143)
    timeout = settings.imap_timeout_s
    folder = settings.imap_sent_folder
    username = settings.imap_username or settings.smtp_username
    password = _password(IMAP_PASSWORD_USER) or _password(SMTP_PASSWORD_USER)
    context = ssl_context()  # the same certificates as every HTTPS connection
    imap: imaplib.IMAP4
    if security == "ssl":
        imap = imaplib.IMAP4_SSL(host, port, ssl_context=context, timeout=timeout)
    else:
        imap = imaplib.IMAP4(host, port, timeout=timeout)
    try:
        if security == "starttls":
            imap.starttls(ssl_context=context)
        if username and password is not None:
            imap.login(username, password)
        typ, _ = imap.select(_quote(folder), readonly=True)
        if typ != "OK":
            return False
        typ, data = imap.search(None, "HEADER", "Message-ID", _quote(wanted))
        return typ == "OK" and bool(data and data[0] and data[0].split())
    finally:
        with contextlib.suppress(imaplib.IMAP4.error, OSError):
            imap.logout()


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
