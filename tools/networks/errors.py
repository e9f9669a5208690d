"""Errors of agent-network definitions and their store."""

from __future__ import annotations


class NetworkError(Exception):
    """A network file cannot be read, or a network or version is not published."""


class NetworkNotFound(NetworkError):
    """No published network has that name (or that version)."""


class NetworkValidationError(NetworkError):
    """A network breaks publish-time rules; ``problems`` lists every one, each a sentence."""

    def __init__(self, name: str, problems: list[str]) -> None:
        listed = "\n".join(f"- {p}" for p in problems)
        super().__init__(f"network {name!r} cannot be published ({len(problems)} problem(s)):\n{listed}")
        self.name, self.problems = name, problems
