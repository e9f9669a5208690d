"""Full-text search over resources: an in-memory SQLite FTS5 table ranked with bm25.

Names and aliases weigh far more than the rest of the text, so a search for an alias finds its
resource before the ones that merely mention the words.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: bm25 weight per column (uri, type, name, aliases, body); the unindexed columns count for nothing.
WEIGHTS = (0.0, 0.0, 10.0, 8.0, 1.0)
#: More distinct terms than this add little but cost a scan each.
MAX_TERMS = 32
#: Runs of letters or digits: everything else (quotes, ``*``, ``-``, ``:``, ``_``) only separates.
TERM = re.compile(r"[^\W_]+")
SNIPPET_TOKENS = 12
#: A reference to another resource: its words belong to that resource, not to this one's text.
REFERENCE = re.compile(r"res://\S*\Z")

_CREATE = """
CREATE VIRTUAL TABLE resources USING fts5(
    uri UNINDEXED, type UNINDEXED, name, aliases, body,
    tokenize = 'unicode61 remove_diacritics 2'
)
"""
_SEARCH = """
SELECT uri, type, bm25(resources, {weights}) AS score,
       snippet(resources, -1, '[', ']', '…', {tokens})
FROM resources WHERE resources MATCH ?{types}
ORDER BY score, uri LIMIT ?
"""


@dataclass(frozen=True)
class SearchHit:
    """One search result; ``rank`` is SQLite's bm25 score, lower is better."""

    uri: str
    type: str
    rank: float
    snippet: str


def match_expression(query: str) -> str:
    """Turn arbitrary user text into an FTS5 query that cannot be a syntax error.

    Every term is quoted, so FTS keywords (``AND``, ``OR``, ``NEAR``) and operators (``*``, ``-``,
    ``:``, quotes) are plain words or separators; the terms are OR-joined, so a resource matching
    only some of them ranks lower instead of vanishing. Returns ``""`` when no term is left.
    """
    terms = dict.fromkeys(term.lower() for term in TERM.findall(unicodedata.normalize("NFC", query)))
    return " OR ".join(f'"{term}"' for term in list(terms)[:MAX_TERMS])


def columns(properties: Mapping[str, Any]) -> tuple[str, str, str]:
    """The name, aliases and body columns of a resource (a chapter's ``title`` is its name).

    References (``res://...`` values) are left out of the body: were they indexed, every chapter
    naming ``res://character/mira-voss`` would make "mira" a common word and weaken its rank.
    """
    name_key = "name" if "name" in properties else "title"
    rest = (value for key, value in properties.items() if key not in (name_key, "aliases"))
    return (
        " ".join(_strings(properties.get(name_key))),
        " ; ".join(_strings(properties.get("aliases"))),
        "\n".join(text for value in rest for text in _strings(value) if not REFERENCE.match(text)),
    )


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a property value, nested lists and mappings included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


class SearchIndex:
    """The FTS5 table. Not locked itself: the repository serialises every call."""

    def __init__(self) -> None:
        # LangChain runs sync tools on worker threads, so the connection is shared between them.
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(_CREATE)
        self._rowids: dict[str, int] = {}

    def add_all(self, rows: Iterable[tuple[str, str, Mapping[str, Any]]]) -> None:
        """Index ``(uri, type, properties)`` rows in one transaction."""
        with self._db:
            for uri, type_, properties in rows:
                self.put(uri, type_, properties)

    def put(self, uri: str, type_: str, properties: Mapping[str, Any]) -> None:
        """Index a resource, replacing what was indexed for its URI before."""
        name, aliases, body = columns(properties)
        if uri in self._rowids:
            self._db.execute(
                "UPDATE resources SET name = ?, aliases = ?, body = ? WHERE rowid = ?",
                (name, aliases, body, self._rowids[uri]),
            )
            return
        cursor = self._db.execute(
            "INSERT INTO resources (uri, type, name, aliases, body) VALUES (?, ?, ?, ?, ?)",
            (uri, type_, name, aliases, body),
        )
        self._rowids[uri] = int(cursor.lastrowid or 0)

    def search(self, query: str, limit: int, types: Collection[str] | None = None) -> list[SearchHit]:
        """Best matches first; no searchable term (``***``) or an empty ``types`` finds nothing."""
        expression = match_expression(query)
        if not expression or (types is not None and not types):
            return []
        wanted = sorted(set(types)) if types is not None else []
        sql = _SEARCH.format(
            weights=", ".join(str(w) for w in WEIGHTS),
            tokens=SNIPPET_TOKENS,
            types=f" AND type IN ({', '.join('?' * len(wanted))})" if wanted else "",
        )
        rows = self._db.execute(sql, (expression, *wanted, limit)).fetchall()
        return [
            SearchHit(uri, type_, float(score), " ".join(snip.split())) for uri, type_, score, snip in rows
        ]

    def close(self) -> None:
        """Free the in-memory database."""
        self._db.close()
