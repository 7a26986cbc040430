"""Model adapters: the Claude adapter, the price table and the offline demo model."""
