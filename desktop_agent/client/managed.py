"""Managed Agents sessions for the app and the CLI: list them, follow one as a run.

:meth:`ManagedSessions.sessions` lists the sessions the analyst's key can read (through
:mod:`desktop_agent.agents.managed`), each with the run that follows it, if one does.
:meth:`ManagedSessions.follow` creates the queued run that follows a session
(``AgentSpec.agent`` ``managed-agents``, ``session_id`` the session's): a worker then drives
it (``worker/managed.py``). A session is followed by one run at most: the run's id is
derived from the session's, so a second follow is refused, by the database too when two
are made at once. The run's budget is the analyst's (cost and time; the settings' defaults
when not given): at its limit the worker interrupts the session and the run waits for
more, as every run does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from desktop_agent.agents.managed import (
    ManagedAgents,
    SessionInfo,
    run_id_for,
    session_run,
    text_of,
)
from desktop_agent.client.api import Client, prepare_workspace
from desktop_agent.domain import Budget, Run, RunStatus
from desktop_agent.domain.errors import (
    InvalidInputError,
    InvalidStateError,
    NotFoundError,
    StorageError,
)
from desktop_agent.domain.tags import normalize_tags
from desktop_agent.domain.text import check_text

GOAL_CHARS = 2000
"""The most of the session's first message kept as the run's goal."""


@dataclass(frozen=True)
class SessionRow:
    """A session and the run that follows it.

    Attributes:
        session: the session as the API lists it.
        run_id: the run that follows it (None: not followed).
        run_status: that run's status.
    """

    session: SessionInfo
    run_id: str | None = None
    run_status: RunStatus | None = None

    @property
    def followed(self) -> bool:
        """Whether a run of this database follows the session."""
        return self.run_id is not None


def _key() -> str | None:
    from desktop_agent.secrets import KeyStore

    return KeyStore().get()


class ManagedSessions:
    """The organization's Managed Agents sessions, and the runs that follow them.

    Args:
        client: the database's client.
        api: the Managed Agents client (default: one with the analyst's key, at the SDK's
            address or ``ANTHROPIC_BASE_URL``).
    """

    def __init__(self, client: Client, api: ManagedAgents | None = None) -> None:
        self.client = client
        self.api = api or ManagedAgents(_key)

    def close(self) -> None:
        """Close the API's connections."""
        self.api.close()

    def has_key(self) -> bool:
        """Whether an API key is set."""
        return self.api.has_key()

    def sessions(self, limit: int = 100) -> list[SessionRow]:
        """The sessions, newest first, with the runs that follow them.

        Raises:
            AuthenticationError: no key, or a key the API refused.
            TransientError: the API could not be reached.
        """
        rows = []
        for info in self.api.sessions(limit=limit):
            run = self.following(info.id)
            rows.append(SessionRow(info, run.id if run else None, run.status if run else None))
        return rows

    def following(self, session_id: str) -> Run | None:
        """The run that follows ``session_id`` (None: none)."""
        try:
            return self.client.store.get_run(run_id_for(session_id))
        except NotFoundError:
            return None

    def follow(
        self,
        session_id: str,
        *,
        max_cost_usd: float | None = None,
        max_time_s: float | None = None,
        tags: Sequence[str] = (),
    ) -> Run:
        """Queue a run that follows ``session_id``; a worker then drives it.

        Raises:
            InvalidInputError: an empty id, or a budget that is not a positive number.
            InvalidStateError: a run follows the session already.
            NotFoundError: the API knows no such session.
            AuthenticationError, TransientError: as for :meth:`sessions`.
        """
        sid = check_text(session_id, "the session id").strip()
        if not sid:
            raise InvalidInputError("give the id of a Managed Agents session (sesn_...)")
        checked_tags = normalize_tags(tags)
        budget = self._budget(max_cost_usd, max_time_s)
        already = self.following(sid)
        if already is not None:
            raise InvalidStateError(_followed(sid, already))
        info = self.api.session(sid)
        first = self.api.events(sid, types=["user.message"], limit=1)
        task = text_of(first[0].data.get("content")).strip() if first else ""
        goal = task[:GOAL_CHARS] or f"Follow the Managed Agents session {info.name}"
        run_id = run_id_for(sid)
        workspace = prepare_workspace(self.client.db_path.parent / "workspaces" / run_id)
        run = session_run(info, goal=goal, workspace=str(workspace), budget=budget, now=time.time())
        try:
            self.client.store.create_run(replace(run, tags=checked_tags))
        except StorageError:
            again = self.following(sid)
            if again is None:
                raise
            raise InvalidStateError(_followed(sid, again)) from None
        return self.client.store.get_run(run_id)

    def _budget(self, max_cost_usd: float | None, max_time_s: float | None) -> Budget:
        s = self.client.settings
        budget = Budget(
            max_cost_usd=max_cost_usd if max_cost_usd is not None else s.default_max_cost_usd,
            max_time_s=max_time_s if max_time_s is not None else s.default_max_time_s,
        )
        for label, value in (("cost", budget.max_cost_usd), ("time", budget.max_time_s)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidInputError(f"the {label} budget must be a finite number above zero")
        return budget


def _followed(session_id: str, run: Run) -> str:
    return f"session {session_id} is already followed by run {run.id} ({run.status})"
