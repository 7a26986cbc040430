"""The uvicorn server of ``desktop-agent serve``, with limits for slow or greedy clients.

- :data:`HEADERS_TIMEOUT_S`: a connection must send a request's headers within this time
  of opening (or of the previous response), else it is closed: a client sending its
  headers a byte at a time does not hold a connection.
- :data:`KEEP_ALIVE_S`: an idle keep-alive connection is closed after this time.
- :data:`MAX_HEADER_BYTES`: headers larger than this are refused (h11's incomplete event
  limit).
- The body: read by the routes as a stream, with its own size limit and deadline
  (:mod:`desktop_agent.httpapi.inputs`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADERS_TIMEOUT_S = 10.0
"""How long a request's headers may take to arrive."""

KEEP_ALIVE_S = 5
"""How long an idle keep-alive connection is kept."""

MAX_HEADER_BYTES = 16 * 1024
"""The largest request line and headers taken."""


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose headers are too slow to come."""

    headers_timeout_s = HEADERS_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._headers_timer = self.loop.call_later(self.headers_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _too_slow(self) -> None:
        self._headers_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the headers' clock."""
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clock."""
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Stop the clock once a request's headers are in."""
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        """The next request's headers have their own time."""
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()


def server_config(
    app: Any, port: int, headers_timeout_s: float = HEADERS_TIMEOUT_S
) -> uvicorn.Config:
    """The uvicorn configuration of the API on 127.0.0.1:``port``."""

    class Protocol(TimedH11Protocol):
        pass

    Protocol.headers_timeout_s = headers_timeout_s
    return uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=Protocol,
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        log_level="warning",
        access_log=False,
    )
