"""A registry of LangChain tools, addressed by name.

Model providers restrict function names (OpenAI: letters, digits, ``_`` and ``-``), while MCP tools
are named ``<server>.<tool>``. ``schemas()`` therefore shows each tool under a *wire name* (``.``
written as ``__``), and every lookup here accepts either spelling, so a call the model makes under
the wire name finds its tool and gets the same signature as the dotted one.
"""

from __future__ import annotations

import re
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
        self._wire: dict[str, str] = {}  # wire name -> the tool's own name
        self._schemas: list[dict[str, Any]] | None = None
        for item in tools:
            self.register(item)

    def register(self, item: BaseTool) -> BaseTool:
        """Add a tool; a second tool with the same name is a programming error."""
        if item.name in self._tools:
            raise ValueError(f"a tool named {item.name!r} is already registered")
        wire = wire_name(item.name)
        if self._wire.get(wire, item.name) != item.name:  # git.git_log beside a tool named git__git_log
            raise ValueError(
                f"tools {self._wire[wire]!r} and {item.name!r} would both reach models as {wire!r}"
            )
        self._tools[item.name] = item
        self._wire[wire] = item.name
        self._schemas = None
        return item

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function format for ``bind_tools``, under their wire names."""
        if self._schemas is None:
            self._schemas = []
            for item in self._tools.values():
                schema = convert_to_openai_tool(item)
                schema["function"]["name"] = wire_name(item.name)
                self._schemas.append(schema)
        return list(self._schemas)

    def canonical(self, name: str) -> str:
        """The tool's own name for ``name`` (which may be its wire name); unknown names stay as they are."""
        return name if name in self._tools else self._wire.get(name, name)

    def get(self, name: str) -> BaseTool | None:
        """Return the tool called ``name`` (or whose wire name it is), or ``None``."""
        return self._tools.get(self.canonical(name))

    def names(self) -> list[str]:
        """Names of all registered tools, in registration order."""
        return list(self._tools)

    def select(self, names: Iterable[str] | None) -> ToolRegistry:
        """A registry with only the named tools (all when ``names`` is ``None``)."""
        if names is None:
            return self
        wanted = [self.canonical(n) for n in names]
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tool(s) {unknown}; registered: {self.names()}")
        return ToolRegistry(self._tools[n] for n in wanted)

    def normalizers(self, name: str) -> Mapping[str, ArgNormalizer]:
        """Per-argument normalisers the tool declared in its metadata."""
        found = self.get(name)
        meta = (found.metadata or {}) if found is not None else {}
        return meta.get(NORMALIZERS_KEY, {})

    def signature(self, name: str, args: Mapping[str, Any], project_id: str) -> str:
        """Canonical signature of a call, using the tool's own normalisers.

        Omitted arguments count with their defaults, so ``list_files()`` equals
        ``list_files(path=".")``.
        """
        name = self.canonical(name)
        return canonical_signature(name, {**self._defaults(name), **args}, project_id, self.normalizers(name))

    def _defaults(self, name: str) -> dict[str, Any]:
        found = self.get(name)
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


#: What a provider accepts as a function name.
_WIRE_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def wire_name(name: str) -> str:
    """The name a model is shown for ``name``: ``.`` becomes ``__`` (``git.git_log``: ``git__git_log``)."""
    return name if _WIRE_SAFE.fullmatch(name) else name.replace(".", "__")
