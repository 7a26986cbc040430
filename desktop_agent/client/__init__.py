"""What the GUI and CLI call: everything goes through the database."""

from desktop_agent.client.api import Client, WorkerStatus

__all__ = ["Client", "WorkerStatus"]
