"""Errors of the resource repository; both are tool errors, so a tool's refusal reaches the model."""

from phasegraph.tools.errors import ToolError


class ResourceError(ToolError):
    """A resource file is invalid, or a repository operation was refused.

    Messages name files relative to the repository folder, never by absolute path: they reach
    clients and models, who must not see server paths.
    """


class ResourceNotFound(ResourceError):
    """No resource has the requested URI."""
