"""Composition root for execution: leases, heartbeat, recovery at start."""
