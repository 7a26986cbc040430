"""The run loop, replay, recovery and budgets; talks to the world only through ports."""
