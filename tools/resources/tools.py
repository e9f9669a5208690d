"""Domain tools that change resources of the run's repository (received through the ToolContext).

No ``from __future__ import annotations`` here: LangChain reads a tool function's type hints at
every call, and string annotations would be evaluated again each time.
"""

from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolArg, tool

from phasegraph.tools.context import ToolContext
from phasegraph.tools.errors import ToolError
from phasegraph.tools.registry import ToolRegistry
from phasegraph.tools.resources.errors import ResourceError
from phasegraph.tools.resources.repository import Resource, ResourceRepository
from phasegraph.tools.signature import NORMALIZERS_KEY

#: Longest value a confirmation quotes; a changed backstory need not be read back in full.
MAX_SHOWN_CHARS = 120
#: Which property ``move_item`` sets for each kind of target.
MOVE_TARGETS = {"place": "location", "character": "owner"}


def normalize_uri(value: Any) -> Any:
    """URIs are lower-case (ids and types must be), so ``RES://Item/X `` means ``res://item/x``."""
    return value.strip().lower() if isinstance(value, str) else value


def _uri_tool(*uri_args: str) -> Callable[[Callable[..., str]], BaseTool]:
    """Make a LangChain tool whose URI arguments are normalised for signatures."""

    def make(func: Callable[..., str]) -> BaseTool:
        made = tool(func)
        made.metadata = {NORMALIZERS_KEY: dict.fromkeys(uri_args, normalize_uri)}
        return made

    return make


def _repository(context: ToolContext) -> ResourceRepository:
    repository = context.resources
    if not isinstance(repository, ResourceRepository):
        raise ToolError("this run has no resource repository, so resources cannot be changed")
    return repository


def _shown(resource: Resource, name: str) -> str:
    if name not in resource.properties:
        return "(unset)"
    text = repr(resource.properties[name])
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


@_uri_tool("uri")
def set_resource_property(
    uri: str, property: str, value: str, *, context: Annotated[ToolContext, InjectedToolArg]
) -> str:
    """Set one property of a resource (res://<type>/<id>) to a text value; its type and id cannot change."""
    repository = _repository(context)
    before = repository.get(normalize_uri(uri))
    after = repository.set_property(before.uri, property, value)
    name = property.strip()
    return f"{after.uri}: {name} {_shown(before, name)} -> {_shown(after, name)}"


@_uri_tool("chapter_uri")
def add_chapter_note(chapter_uri: str, note: str, *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """Append a note to a chapter (res://chapter/<id>), e.g. a continuity remark for the author."""
    repository = _repository(context)
    chapter = repository.get(normalize_uri(chapter_uri))
    if chapter.type != "chapter":
        raise ResourceError(f"{chapter.uri} is a {chapter.type}, not a chapter: notes go on chapters")
    after = repository.add_note(chapter.uri, note)
    count = len(after.properties["notes"])
    return f"{after.uri}: notes {count - 1} -> {count}; added {after.properties['notes'][-1]!r}"


@_uri_tool("item_uri", "to_uri")
def move_item(item_uri: str, to_uri: str, *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """Move an item (res://item/<id>): to a place sets its location, to a character sets its owner."""
    repository = _repository(context)
    item = repository.get(normalize_uri(item_uri))
    if item.type != "item":
        raise ResourceError(f"{item.uri} is a {item.type}, not an item: only items can be moved")
    target = repository.get(normalize_uri(to_uri))
    name = MOVE_TARGETS.get(target.type)
    if name is None:
        raise ResourceError(f"{target.uri} is a {target.type}: an item moves to a place or a character")
    after = repository.set_property(item.uri, name, target.uri)
    return f"{after.uri}: {name} {_shown(item, name)} -> {_shown(after, name)}"


RESOURCE_TOOLS = [set_resource_property, add_chapter_note, move_item]


def resource_registry() -> ToolRegistry:
    """A fresh registry holding the resource tools."""
    return ToolRegistry(RESOURCE_TOOLS)
