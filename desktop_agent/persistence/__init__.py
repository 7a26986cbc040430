"""The schema (Core tables), the SQL store implementing the engine's ports, and migrations."""
