"""Adapters to the other Claude agents desktop-agent supervises.

Claude Code sessions on disk, the Claude Agent SDK, Anthropic's hosted Managed Agents: each
module here talks to one of them and speaks the domain's language (runs, steps, approvals);
none imports another adapter package. See :mod:`desktop_agent.domain.agents`.
"""
