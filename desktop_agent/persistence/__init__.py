"""SQLModel tables, the SQL store implementing the engine's ports, and migrations."""
