"""The tool protocol helpers, the registry and the built-in tools."""
