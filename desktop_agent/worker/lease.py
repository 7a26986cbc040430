"""The worker's side of fencing: one claimed run's lease, its expiry and its renewals.

A :class:`RunLease` is made when the worker claims a run and handed to the activation
(the engine's :class:`~desktop_agent.engine.ports.LeaseGuard`). The worker's heartbeat
extends it (or finds it lost); the activation makes sure it lasts through each effect
before the effect starts, and confirms it with the database at the effect's point of no
return. Every renewal is conditional on the run still being held at the claim's epoch, so
a worker that was frozen past its lease (and whose run another worker claimed since)
can never extend it again: it gets :class:`~desktop_agent.domain.errors.LeaseLost`.
"""

from __future__ import annotations

import threading

from desktop_agent.domain import Lease
from desktop_agent.engine.ports import Clock
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.workers import lease_lost


class RunLease:
    """A claimed run's lease: fencing token, known expiry, renewals.

    Thread-safe: the activation's thread checks and renews it, the worker's poll loop
    extends it with each heartbeat.

    Args:
        store: the database.
        run_id: the run claimed.
        lease: owner and epoch of the claim.
        expires_at: the expiry the claim wrote.
        lease_s: the worker's lease length, which is also the margin an effect must have
            on top of its own timeout ("comfortably more time left").
        clock: the worker's clock (the one leases are written with).
    """

    def __init__(
        self,
        store: SqlStore,
        run_id: str,
        lease: Lease,
        expires_at: float,
        lease_s: float,
        clock: Clock,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self._lease = lease
        self.lease_s = lease_s
        self.clock = clock
        self._lock = threading.Lock()
        self._expires_at = expires_at
        self._lost = False

    @property
    def lease(self) -> Lease:
        """Owner and epoch of the claim (the fencing token)."""
        return self._lease

    @property
    def lost(self) -> bool:
        """Whether the worker learnt that another worker claimed the run since."""
        with self._lock:
            return self._lost

    @property
    def expires_at(self) -> float:
        """The expiry last written by this worker (claim, heartbeat or renewal)."""
        with self._lock:
            return self._expires_at

    def ensure(self, seconds: float) -> None:
        """Before an effect of up to ``seconds``: make the lease outlast it comfortably.

        Nothing is read or written while the known expiry leaves more than ``seconds``
        plus half a lease (the heartbeat keeps it there for short effects); otherwise the
        lease is renewed to ``seconds`` plus a whole lease from now.

        Raises:
            LeaseLost: the run is no longer ours.
        """
        now = self.clock.now()
        with self._lock:
            lost, left = self._lost, self._expires_at - now
        if lost:
            raise lease_lost(self.run_id, self._lease)
        if left >= seconds + self.lease_s / 2:
            return
        self._renew(now + seconds + self.lease_s)

    def confirm(self, seconds: float) -> None:
        """At an effect's point of no return: renew in the database, or raise LeaseLost.

        Always asks the database (the in-memory expiry cannot know that another worker,
        finding this one frozen, claimed the run); the renewal covers ``seconds`` plus a
        lease, for the rest of the effect.
        """
        if self.lost:
            raise lease_lost(self.run_id, self._lease)
        self._renew(self.clock.now() + seconds + self.lease_s)

    def extended(self, until: float) -> None:
        """The heartbeat extended the lease to at least ``until``."""
        with self._lock:
            self._expires_at = max(self._expires_at, until)

    def mark_lost(self) -> None:
        """The heartbeat found the run claimed by another worker."""
        with self._lock:
            self._lost = True

    def _renew(self, until: float) -> None:
        if not self.store.renew_lease(self.run_id, self._lease, until):
            self.mark_lost()
            raise lease_lost(self.run_id, self._lease)
        self.extended(until)
