"""Custom widgets: the timeline, the inspector, the run header, charts."""
