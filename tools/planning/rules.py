"""The project domain's rules that need no database: allowed values, limits, ids and text checks.

Every part of ``ProjectDomain`` checks what a caller gives with these before it touches a row,
so a tool's model reads the same message for the same mistake whichever tool it called.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from phasegraph.tools.planning.errors import PlanningError

PROJECT_STATUSES = ("active", "archived")
TASK_STATUSES = ("todo", "in_progress", "blocked", "done")
PRIORITIES = ("low", "normal", "high")
#: How many known ids an "unknown id" message lists.
SHOWN_IDS = 5
#: Longest id a name makes (a project's ``-2``, ``-3``... suffix included).
MAX_SLUG = 60
#: How often a write that lost a race for a fresh id or version tries the next one.
ATTEMPTS = 5


def slug(name: str) -> str:
    """A lowercase ASCII id made of the name's words (at most 60 characters)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    made = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:MAX_SLUG].strip("-")
    if not made:
        raise PlanningError(f"{name!r} has no letters or digits to make an id from")
    return made


def free_id(base: str, taken: set[str]) -> str:
    """``base``, or the first of ``base-2``, ``base-3``... not taken (shortened to ``MAX_SLUG``)."""
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base[: MAX_SLUG - len(str(n)) - 1].rstrip('-')}-{n}"
    return candidate


def task_number(task_id: str, project_id: str) -> int:
    """A task's number (``3`` of ``spring-launch-t3``)."""
    digits = task_id.removeprefix(f"{project_id}-t")
    return int(digits) if digits.isdigit() else 0


def check_allowed(value: str, allowed: tuple[str, ...], what: str) -> str:
    """``value`` when it is one of ``allowed``, else a PlanningError listing them."""
    if value not in allowed:
        raise PlanningError(f"{what} {value!r} is not allowed; use {', '.join(allowed)}")
    return value


def show_ids(ids: Any) -> str:
    """The first ``SHOWN_IDS`` ids, comma-separated, for an "unknown id" message."""
    shown = list(ids)[:SHOWN_IDS]
    return ", ".join(shown) if shown else "none yet"


def require_text(value: str, what: str) -> str:
    """``value`` stripped, or a PlanningError when nothing is left."""
    text = value.strip()
    if not text:
        raise PlanningError(f"the {what} must not be empty")
    return text


def require_texts(values: Any, what: str) -> list[str]:
    """Every entry of ``values`` stripped, or a PlanningError at the first empty one."""
    return [require_text(v, f"{what}' entries") for v in values]
