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


def key_line(text: str, path: tuple[str, ...]) -> int | None:
    """The 1-based line where ``path`` (or its longest prefix that appears) is written, or None."""
    best: tuple[int, int] | None = None  # (matched length, line)
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(1))
            full = table
        else:
            key = _KEY.match(line)
            if not key:
                continue
            full = table + _parts(key.group(1))
        matched = _common(full, path)
        if matched and (best is None or matched > best[0]):
            best = (matched, number)
    return best[1] if best is not None else None


def _common(written: tuple[str, ...], wanted: tuple[str, ...]) -> int:
    """How much of ``wanted`` the written key covers (0 unless it is a prefix of, or equal to, it)."""
    if len(written) > len(wanted) or wanted[: len(written)] != written:
        return 0
    return len(written)
