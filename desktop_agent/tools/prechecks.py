"""Pre-run checks of the unsafe built-in tools that also cover what their requests are made of.

``send_email`` and ``http_post`` enforce their header rules (a one-line subject, plain
addresses, header values without CR/LF: nothing that injects a header or an SMTP command)
when they build the message or the request, that is, at the moment of the effect. Their
``check`` (the pre-run check, run before an approved call and on an analyst's edit before
the decision is recorded) looked only at the account and the endpoint. The tools offered
here run the same builders in ``check`` too, without sending anything, so that an edit that
would be refused at send time is refused before it is recorded as approved.
"""

from __future__ import annotations

from desktop_agent.engine.ports import ToolContext, ToolInputError
from desktop_agent.tools.http_post import HttpPost, PostArgs, _body, _headers
from desktop_agent.tools.mail import EmailArgs, SendEmail, build_message


class CheckedSendEmail(SendEmail):
    """``send_email`` whose pre-run check also builds the message (nothing is sent)."""

    def check(self, args: EmailArgs, ctx: ToolContext) -> str | None:
        """The message's header rules first, then the account settings."""
        try:
            build_message(args, ctx, ctx.settings)
        except ToolInputError as exc:
            return f"invalid arguments: {exc}"
        return super().check(args, ctx)


class CheckedHttpPost(HttpPost):
    """``http_post`` whose pre-run check also builds the body and headers (nothing is sent)."""

    def check(self, args: PostArgs, ctx: ToolContext) -> str | None:
        """The request's body and header rules first, then the endpoint."""
        try:
            _body(args)
            _headers(args.headers)
        except ToolInputError as exc:
            return f"invalid arguments: {exc}"
        return super().check(args, ctx)
