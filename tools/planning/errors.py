"""Errors of the project domain: a tool call fails with them, and the model reads the message."""

from __future__ import annotations

from phasegraph.tools.errors import ToolError


class PlanningError(ToolError):
    """A domain operation cannot be done (unknown id, duplicate, bad value); the message says why."""


class PlanNotFound(PlanningError):
    """No plan of that id in the scope."""
