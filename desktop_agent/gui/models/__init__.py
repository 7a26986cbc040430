"""Item models: thin adapters over frozen rows from :mod:`desktop_agent.client.views`."""
