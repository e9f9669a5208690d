"""A project file's data before it is validated: how deep it nests, what is left out, where a problem is.

``examine_project`` checks a file in one pass: a value with a problem is named (``file:line: key: what``)
and left out of the data, and the rest is checked on.
"""

from __future__ import annotations

import re
from typing import Any

from phasegraph.nodes.project_lines import KeyLines

#: The deepest nesting of tables and arrays a project file may have (deeper is refused, not recursed into).
MAX_NESTING = 32


def too_deep(data: Any) -> tuple[str, ...] | None:
    """The keys down to a value nested deeper than ``MAX_NESTING`` levels, or None.

    Walked without recursion, so the depth it refuses is never the depth that breaks it; only the keys
    of tables are kept (an array's index names no line).
    """
    stack: list[tuple[tuple[str, ...], Any, int]] = [((), data, 0)]
    while stack:
        keys, value, depth = stack.pop()
        if depth > MAX_NESTING:
            return keys
        if isinstance(value, dict):
            stack += [((*keys, str(key)), item, depth + 1) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(keys, item, depth + 1) for item in value]
    return None


def located(name: str, line: int | None, key: tuple[str, ...]) -> str:
    """``file:line: dotted.key`` (no line when the key is not written, no key for the whole file)."""
    return f"{name}{f':{line}' if line else ''}: {'.'.join(key) or '(top)'}"


def problem_of(name: str, lines: KeyLines, error: Any) -> str:
    """A pydantic error of the file named ``name`` as ``file:line: key: what is wrong``."""
    key = tuple(str(part) for part in error["loc"] if part != "[key]")  # a dict key's own problem
    if error["type"] == "extra_forbidden":
        what = "unknown key"
    elif error["type"] == "value_error":
        what = str(error["msg"]).removeprefix("Value error, ")
    else:
        what = f"{error['msg']} (found {error.get('input')!r})"
    return f"{located(name, lines.line(key), key)}: {what}"


def leave_out(data: dict[str, Any], loc: tuple[Any, ...], *, empty_too: bool = False) -> tuple[str, ...]:
    """Delete the value at ``loc`` (a pydantic error's) from ``data``; the keys of what was deleted.

    Parts of ``loc`` that name no key (a union's member, ``[key]``) are passed over, and the walk stops
    at an array, deleting the table key holding it. ``empty_too``: tables left empty go as well.
    """
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            parents.append((node, part))
            node = node[part]
    keys = tuple(key for _, key in parents)
    while parents:
        table, key = parents.pop()
        del table[key]
        if table or not empty_too:
            break
    return keys


def line_of(problem: str) -> int:
    """The line a problem names (``file:LINE: ...``; 0 when it names none), to list problems in file order."""
    found = re.match(r"[^:]*:(\d+):", problem)
    return int(found.group(1)) if found else 0
