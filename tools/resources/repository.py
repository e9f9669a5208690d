"""A repository of resources addressed as ``res://<type>/<id>``, read from a folder of files.

The repository keeps every resource in memory with an SQLite FTS5 index beside it, and keeps both in
step when a tool changes a resource. A writable repository also writes each change back to the
resource's file; the bundled story world is always loaded read-only, so demos never modify it.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from phasegraph.tools.resources.errors import ResourceError, ResourceNotFound
from phasegraph.tools.resources.files import ADDRESS_KEYS, Record, read_folder, write_record
from phasegraph.tools.resources.index import SearchHit, SearchIndex

#: Longest summary made from a resource's text when it has no ``summary`` property.
SUMMARY_CHARS = 120
#: Properties a change may not touch: they make up the URI.
FIXED_PROPERTIES = frozenset({*ADDRESS_KEYS, "uri"})
#: How many close URIs a "not found" message suggests.
SUGGESTIONS = 3


@dataclass(frozen=True)
class Resource:
    """One resource. Treat ``properties`` as read-only: changes go through the repository."""

    uri: str
    type: str
    id: str
    properties: dict[str, Any] = field(hash=False)
    source: str  # the file it came from, relative to the repository folder

    @classmethod
    def of(cls, record: Record) -> Resource:
        """The public view of a record read from a file."""
        return cls(record.uri, record.type, record.id, record.properties, record.source)

    @property
    def summary(self) -> str:
        """The ``summary`` property, else the first line of the text (at most 120 characters)."""
        if "summary" in self.properties:
            return _flat(self.properties["summary"])
        for key in ("text", "body"):
            lines = [line.strip() for line in str(self.properties.get(key, "")).splitlines() if line.strip()]
            if lines:
                return _clip(lines[0], SUMMARY_CHARS)
        return _flat(self.properties.get("name", ""))

    def render(self, include: set[str] | None = None, exclude: Collection[str] = frozenset()) -> str:
        """A compact text block for a prompt: the URI and type, then one line per property.

        Args:
            include: Only these properties (``None``: all of them), in the resource's own order.
            exclude: Properties left out even when included.

        Returns:
            The same text for the same resource and filters, so prompts are reproducible.
        """
        lines = [f"{self.uri} ({self.type})"]
        for key, value in self.properties.items():
            if (include is None or key in include) and key not in exclude:
                lines.append(f"  {key}: {_flat(value)}")
        return "\n".join(lines)


def _flat(value: Any) -> str:
    """A property value on one line: lists comma-separated, mappings as ``key=value`` pairs."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list | tuple):
        return ", ".join(_flat(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}={_flat(item)}" for key, item in value.items())
    return "" if value is None else str(value)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class ResourceRepository:
    """Resources from a folder, searchable with FTS5 and safe to share between tool threads."""

    def __init__(self, folder: Path, records: Collection[Record], *, writable: bool = False) -> None:
        """Build the repository from records already read (``load`` reads them)."""
        self._folder = folder
        self._writable = writable
        self._lock = threading.Lock()
        self._records: dict[str, Record] = {}
        self._resources: dict[str, Resource] = {}
        for record in records:
            first = self._records.get(record.uri)
            if first is not None:
                raise ResourceError(f"{record.source}: duplicate uri {record.uri} (also in {first.source})")
            self._keep(record)
        self._index = SearchIndex()
        self._index.add_all((r.uri, r.type, r.properties) for r in self._records.values())
        self._version = 0
        self._changes: list[dict[str, Any]] = []

    @classmethod
    def load(cls, folder: str | Path, *, writable: bool = False) -> ResourceRepository:
        """Read every resource file under ``folder`` and index it.

        Args:
            folder: The repository folder (``*.json``, ``*.yaml``/``*.yml`` and ``*.md`` files).
            writable: Write each change back to the resource's file; otherwise changes stay in memory.

        Raises:
            ResourceError: The folder is missing, or a file is invalid (the message names it).
        """
        root = Path(folder).absolute()  # changes are written back even if the process changes directory
        return cls(root, read_folder(root), writable=writable)

    @property
    def writable(self) -> bool:
        """Whether changes are written back to the files."""
        return self._writable

    @property
    def version(self) -> int:
        """How many changes the repository has seen; callers compare it to notice a change."""
        return self._version

    def search(self, query: str, limit: int = 10, *, types: Collection[str] | None = None) -> list[SearchHit]:
        """Resources matching any word of ``query``, best first (names and aliases count most).

        Any text is a valid query: quotes, operators and FTS keywords are taken as plain words.

        Args:
            query: What to look for.
            limit: At most this many hits.
            types: Only resources of these types (``None``: every type).

        Raises:
            ResourceError: The query is blank or the limit is below one.
        """
        if not query.strip():
            raise ResourceError("the search query is empty")
        if limit < 1:
            raise ResourceError(f"the search limit must be at least 1, not {limit}")
        with self._lock:
            return self._index.search(query, limit, types)

    def get(self, uri: str) -> Resource:
        """The resource at ``uri``.

        Raises:
            ResourceNotFound: No resource has that URI; the message suggests close ones.
        """
        found = self._resources.get(uri)
        if found is None:
            raise ResourceNotFound(self._not_found(uri))
        return found

    def uris(self) -> list[str]:
        """Every URI, sorted."""
        return sorted(self._resources)

    def types(self) -> list[str]:
        """Every resource type, sorted."""
        return sorted({resource.type for resource in self._resources.values()})

    def set_property(self, uri: str, name: str, value: Any) -> Resource:
        """Set one property (``type`` and ``id`` are fixed) and return the changed resource.

        Raises:
            ResourceError: The property is fixed, its name empty, or its value not JSON-like data.
            ResourceNotFound: No resource has that URI.
        """
        name = name.strip()
        if not name:
            raise ResourceError("the property name is empty")
        if name in FIXED_PROPERTIES:
            raise ResourceError(f"{name!r} cannot be changed: it is part of the resource's URI")
        plain = _plain(value, name)
        change = {"op": "set_property", "uri": uri, "name": name, "value": plain}
        return self._change(uri, lambda properties: {**properties, name: plain}, change)

    def add_note(self, uri: str, note: str) -> Resource:
        """Append ``note`` to the resource's ``notes`` list and return the changed resource.

        Raises:
            ResourceError: The note is blank, or ``notes`` holds something other than a list or text.
            ResourceNotFound: No resource has that URI.
        """
        note = note.strip()
        if not note:
            raise ResourceError("the note is empty")

        def append(properties: dict[str, Any]) -> dict[str, Any]:
            notes = properties.get("notes", [])
            if isinstance(notes, str):
                notes = [notes]  # a hand-written single note becomes the first of the list
            if not isinstance(notes, list):
                raise ResourceError(f"{uri}: 'notes' is {type(notes).__name__}, not a list of notes")
            return {**properties, "notes": [*notes, note]}

        return self._change(uri, append, {"op": "add_note", "uri": uri, "note": note})

    @property
    def changes(self) -> list[dict[str, Any]]:
        """Every change made since loading, oldest first (plain data: a run keeps it in its state)."""
        with self._lock:
            return [dict(change) for change in self._changes]

    def replay(self, changes: Collection[dict[str, Any]]) -> None:
        """Make ``changes`` (as ``changes`` lists them) again, in order.

        An in-memory repository reloaded for a resumed run so gets back what the run had changed.

        Raises:
            ResourceError: A change names an unknown operation, or cannot be made.
        """
        for change in changes:
            if change.get("op") == "set_property":
                self.set_property(change["uri"], change["name"], change["value"])
            elif change.get("op") == "add_note":
                self.add_note(change["uri"], change["note"])
            else:
                raise ResourceError(f"cannot replay change {change!r}: unknown operation")

    def close(self) -> None:
        """Free the search index; the repository cannot search afterwards."""
        with self._lock:
            self._index.close()

    def _change(
        self, uri: str, edit: Callable[[dict[str, Any]], dict[str, Any]], change: dict[str, Any]
    ) -> Resource:
        """Apply ``edit`` to a copy of the properties; file, memory and index change together."""
        with self._lock:
            record = self._records.get(uri)
            if record is None:
                raise ResourceNotFound(self._not_found(uri))
            changed = replace(record, properties=edit(dict(record.properties)))
            if self._writable:
                write_record(self._folder, changed)  # first: a failed write leaves nothing changed
            resource = self._keep(changed)
            self._index.put(changed.uri, changed.type, changed.properties)
            self._version += 1
            self._changes.append(change)
            return resource

    def _keep(self, record: Record) -> Resource:
        resource = Resource.of(record)
        self._records[record.uri] = record
        self._resources[record.uri] = resource
        return resource

    def _not_found(self, uri: str) -> str:
        close = difflib.get_close_matches(uri, list(self._resources), n=SUGGESTIONS, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else " (URIs look like res://<type>/<id>)"
        return f"no resource {uri!r}{hint}"

    def __contains__(self, uri: object) -> bool:
        return uri in self._resources

    def __len__(self) -> int:
        return len(self._resources)


def _plain(value: Any, name: str) -> Any:
    """``value`` as JSON-like data (tuples become lists), since a change may be written back to a file."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item, name) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item, name) for key, item in value.items()}
    raise ResourceError(f"{name!r} must be text, a number, a list or a mapping, not {type(value).__name__}")


#: The story world shipped with the package (resolved once, at import: never a blocking call in a run).
BUNDLED_WORLD = Path(__file__).resolve().parent / "story_world"


def bundled_world() -> Path:
    """The folder of the story world shipped with the package."""
    return BUNDLED_WORLD


def load_bundled() -> ResourceRepository:
    """A fresh, read-only repository of the bundled story world (changes stay in memory)."""
    return ResourceRepository.load(bundled_world(), writable=False)
