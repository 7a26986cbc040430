"""Dialogs: new run, approval, settings, recovery summary, small prompts."""
