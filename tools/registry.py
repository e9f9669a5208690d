"""A registry of LangChain tools, addressed by name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from phasegraph.tools.signature import NORMALIZERS_KEY, ArgNormalizer, canonical_signature


class ToolRegistry:
    """Holds the tools a run may call and knows how to fingerprint their calls."""

    def __init__(self, tools: Iterable[BaseTool] = ()) -> None:
        self._tools: dict[str, BaseTool] = {}
        self._schemas: list[dict[str, Any]] | None = None
        for item in tools:
            self.register(item)

    def register(self, item: BaseTool) -> BaseTool:
        """Add a tool; a second tool with the same name is a programming error."""
        if item.name in self._tools:
            raise ValueError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self._schemas = None
        return item

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function format, for ``bind_tools`` (converted once per registry)."""
        if self._schemas is None:
            self._schemas = [convert_to_openai_tool(t) for t in self._tools.values()]
        return list(self._schemas)

    def get(self, name: str) -> BaseTool | None:
        """Return the tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Names of all registered tools, in registration order."""
        return list(self._tools)

    def select(self, names: Iterable[str] | None) -> ToolRegistry:
        """A registry with only the named tools (all when ``names`` is ``None``)."""
        if names is None:
            return self
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tool(s) {unknown}; registered: {self.names()}")
        return ToolRegistry(self._tools[n] for n in wanted)

    def normalizers(self, name: str) -> Mapping[str, ArgNormalizer]:
        """Per-argument normalisers the tool declared in its metadata."""
        found = self._tools.get(name)
        meta = (found.metadata or {}) if found is not None else {}
        return meta.get(NORMALIZERS_KEY, {})

    def signature(self, name: str, args: Mapping[str, Any], project_id: str) -> str:
        """Canonical signature of a call, using the tool's own normalisers.

        Omitted arguments count with their defaults, so ``list_files()`` equals
        ``list_files(path=".")``.
        """
        return canonical_signature(name, {**self._defaults(name), **args}, project_id, self.normalizers(name))

    def _defaults(self, name: str) -> dict[str, Any]:
        found = self._tools.get(name)
        schema = found.tool_call_schema if found is not None else None
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            return {}
        return {
            key: field.default
            for key, field in schema.model_fields.items()
            if not field.is_required() and field.default is not PydanticUndefined
        }

    def __iter__(self) -> Iterator[BaseTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
