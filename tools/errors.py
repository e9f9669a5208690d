"""Errors raised inside tools; the runner turns them into error results the model can read."""


class ToolError(Exception):
    """A tool refused or failed to do its work (bad path, missing file, ...)."""


class WorkspaceEscapeError(ToolError):
    """A path argument points outside the workspace root."""
