"""The line of a key in a TOML text, so a problem with ``phasegraph.toml`` can say where it is.

``tomllib`` gives values, not positions; this reads the text's table headers and ``key =`` lines,
which is all a hand-written project file needs (a key inside an inline table is found at its table).
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"]*)"|'([^']*)'""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(m.group(1) or m.group(2) or m.group(0) for m in _PART.finditer(dotted))


class KeyLines:
    """Where each key of a TOML text is written, found in one pass over the text on the first question.

    A file with thousands of problems asks once per problem: each answer is a few dictionary lookups,
    not another reading of the file.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._first: dict[tuple[str, ...], int] | None = None  # each written key -> its first line

    def line(self, path: tuple[str, ...]) -> int | None:
        """The 1-based line where ``path`` (or its longest prefix that appears) is written, or None."""
        if self._first is None:
            self._first = _index(self._text)
        for end in range(len(path), 0, -1):
            found = self._first.get(path[:end])
            if found is not None:
                return found
        return None


def _index(text: str) -> dict[tuple[str, ...], int]:
    """Every key the text writes (with its table's path) and the first line writing it."""
    first: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(1))
            first.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            first.setdefault(table + _parts(key.group(1)), number)
    return first
