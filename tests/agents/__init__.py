"""Tests of the adapters to the other Claude agents desktop-agent supervises."""
