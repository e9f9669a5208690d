"""ResourceContext: what the model sees of the resource repository, and how plans change it.

The context is kept in graph state as a plain dict (checkpointers store it as JSON-like data) and
read back into this model by the nodes. Resource text is always rendered from the repository, so a
tool's change to a resource shows in the next prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from phasegraph.nodes.goal_pursuit.schemas import PropertyRule
from phasegraph.tools import ToolRegistry
from phasegraph.tools.resources import ResourceRepository

ChangeAction = Literal["searched", "loaded", "excluded", "filtered", "expanded", "collapsed", "sorted"]


class SearchRecord(BaseModel):
    """One search and what it found."""

    query: str
    uris: list[str] = Field(default_factory=list)
    count: int = 0


class PropertyFilter(BaseModel):
    """Which properties of one resource type the context shows."""

    include: list[str] | None = None  # only these (None: all)
    exclude: list[str] = Field(default_factory=list)


class ResourceContext(BaseModel):
    """Resources in the context, in the order the prompt renders them."""

    queried_resources: list[str] = Field(default_factory=list)  # every URI loaded, in load order
    excluded_resources: list[str] = Field(default_factory=list)
    property_filters: dict[str, PropertyFilter] = Field(default_factory=dict)  # by resource type
    search_history: list[SearchRecord] = Field(default_factory=list)
    workspace_segments: list[str] = Field(
        default_factory=list
    )  # loaded and not excluded, most relevant first
    not_found: list[str] = Field(default_factory=list)  # URIs asked for that the repository lacks


@dataclass
class Change:
    """One change to the context, reported as a ``context_update`` event."""

    action: ChangeAction
    uris: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    query: str | None = None
    chars: int = 0
    context_chars: int = 0  # the context's size once the change is made


class ContextEditor:
    """Applies discovery and refinement plans to a ResourceContext, recording each change."""

    def __init__(self, data: dict[str, Any] | ResourceContext, repository: ResourceRepository) -> None:
        self.context = data if isinstance(data, ResourceContext) else ResourceContext.model_validate(data)
        self.repository = repository
        self.changes: list[Change] = []

    def search(self, query: str, limit: int) -> None:
        """Search the repository; the hits are listed in the prompt, not loaded."""
        hits = self.repository.search(query, limit=limit) if query.strip() else []
        uris = [hit.uri for hit in hits]
        self.context.search_history.append(SearchRecord(query=query, uris=uris, count=len(uris)))
        self.record(Change("searched", uris=uris, query=query))

    def load(self, uris: list[str]) -> None:
        """Load resources into the context (a re-requested excluded resource comes back)."""
        ctx, found, missing = self.context, [], []
        for uri in dict.fromkeys(u.strip() for u in uris):
            if uri not in self.repository:
                missing.append(uri)
            elif uri not in ctx.workspace_segments:
                found.append(uri)
        if not (found or missing):
            return
        ctx.excluded_resources = [u for u in ctx.excluded_resources if u not in found]
        ctx.queried_resources += [u for u in found if u not in ctx.queried_resources]
        ctx.workspace_segments += found
        ctx.not_found += [u for u in missing if u not in ctx.not_found]
        self.record(Change("loaded", uris=found, missing=missing, chars=self._chars(found)))

    def exclude(self, uris: list[str]) -> None:
        """Take resources out of the context; they stay listed as excluded."""
        ctx = self.context
        gone = [u for u in dict.fromkeys(u.strip() for u in uris) if u in ctx.workspace_segments]
        missing = [u.strip() for u in uris if u.strip() not in ctx.workspace_segments]
        if not (gone or missing):
            return
        chars = self._chars(gone)
        ctx.workspace_segments = [u for u in ctx.workspace_segments if u not in gone]
        ctx.excluded_resources += [u for u in gone if u not in ctx.excluded_resources]
        self.record(Change("excluded", uris=gone, missing=missing, chars=-chars))

    def filter_properties(self, exclude: list[PropertyRule], include: list[PropertyRule]) -> None:
        """Hide properties (or show only some) per resource type."""
        if not (exclude or include):
            return
        before = self.size()
        filters = self.context.property_filters
        for rule in include:
            filters.setdefault(rule.resource_type, PropertyFilter()).include = list(rule.properties)
        for rule in exclude:
            kept = filters.setdefault(rule.resource_type, PropertyFilter())
            kept.exclude = list(dict.fromkeys([*kept.exclude, *rule.properties]))
        types = sorted({r.resource_type for r in [*exclude, *include]})
        touched = [u for u in self.context.workspace_segments if self.repository.get(u).type in types]
        self.record(Change("filtered", uris=touched, chars=self.size() - before))

    def sort(self, order: list[str]) -> None:
        """Put the named segments first, in that order; the others keep theirs after them."""
        segments = self.context.workspace_segments
        first = [u for u in dict.fromkeys(u.strip() for u in order) if u in segments]
        missing = [u for u in order if u.strip() not in segments]
        if not first and not missing:
            return
        self.context.workspace_segments = first + [u for u in segments if u not in first]
        self.record(Change("sorted", uris=self.context.workspace_segments, missing=missing))

    def record(self, change: Change) -> None:
        """Keep a change (with the context's size after it) for the ``context_update`` events."""
        change.context_chars = self.size()
        self.changes.append(change)

    def segment(self, uri: str) -> str:
        """One resource as the prompt shows it, its type's property filter applied."""
        resource = self.repository.get(uri)
        rule = self.context.property_filters.get(resource.type, PropertyFilter())
        include = set(rule.include) if rule.include is not None else None
        return resource.render(include=include, exclude=frozenset(rule.exclude))

    def size(self) -> int:
        """Characters of the context's resource segments."""
        return self._chars(self.context.workspace_segments)

    def dump(self) -> dict[str, Any]:
        """The context as state keeps it."""
        return self.context.model_dump(mode="json")

    def _chars(self, uris: list[str]) -> int:
        return sum(len(self.segment(u)) for u in uris)


def change_tools(
    action: Literal["expanded", "collapsed"], asked: list[str], known: list[str], expanded: list[str]
) -> tuple[list[str], Change | None]:
    """The expanded tools after an expand or collapse request, and the change (None when there is none).

    ``known`` are the names the request may use: every tool to expand, the expanded ones to collapse.
    """
    names = list(dict.fromkeys(n.strip() for n in asked))
    hit, missing = [n for n in names if n in known], [n for n in names if n not in known]
    if action == "expanded":
        hit = [n for n in hit if n not in expanded]
        after = [*expanded, *hit]
    else:
        after = [n for n in expanded if n not in hit]
    return after, (Change(action, tools=hit, missing=missing) if hit or missing else None)


def tool_names(registry: ToolRegistry, asked: list[str]) -> list[str]:
    """The tools' own names for names a plan gives (a tool's wire name, ``git__git_log``, is its tool's)."""
    found = [registry.get(name.strip()) for name in asked]
    return [item.name if item is not None else name for name, item in zip(asked, found, strict=True)]
