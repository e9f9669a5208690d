"""Final answers every protocol shares: the deterministic fallback, and whether any tool succeeded."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NotRequired

from typing_extensions import TypedDict

FALLBACK_ANSWER_HEADER = "I could not produce a final answer; here is what the tools returned:"
NO_RESULTS_ANSWER = "I could not produce an answer and no tool returned anything to report."


class GatheredResult(TypedDict):
    """A tool result kept for later model calls and for the fallback answer."""

    name: str
    args: dict[str, Any]
    status: str
    text: str
    ran: NotRequired[bool]  # False: refused unrun (a person rejected it, a limit); absent: it ran


def format_args(args: dict[str, object]) -> str:
    """Render call arguments the way notes and answers show them: ``path='docs', depth=2``."""
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def fallback_answer(results: Sequence[GatheredResult], limit: int = 600) -> str:
    """An answer built only from gathered tool results, the same for the same results."""
    if not results:
        return NO_RESULTS_ANSWER
    lines = [FALLBACK_ANSWER_HEADER]
    for item in results:
        text = item["text"] if len(item["text"]) <= limit else item["text"][:limit] + " ..."
        lines.append(f"- {item['name']}({format_args(item['args'])}) [{item['status']}]:\n{text}")
    return "\n".join(lines)


def all_tools_failed(results: Collection[Mapping[str, Any]]) -> bool:
    """True when the turn ran tools and every one of them failed: its answer rests on no tool output.

    Calls refused unrun (``ran`` False: a person rejected them, a limit) are none of the tools that ran.
    """
    ran = [item for item in results if item.get("ran", True)]
    return bool(ran) and all(item["status"] != "ok" for item in ran)
