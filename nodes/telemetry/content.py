"""What of a run's content a span may carry: sizes always, text only when the operator allows it.

``PHASEGRAPH_OTEL_CAPTURE_CONTENT=true`` puts prompts, model answers, tool arguments and results on
spans, each masked of every configured secret and cut to ``LIMIT`` characters; off, spans carry only
sizes.
"""

from __future__ import annotations

import json
from typing import Any

from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import run_settings

#: The longest text one attribute carries (a span is not a log of whole documents).
LIMIT = 8_000


def allowed() -> bool:
    """Whether spans may carry content."""
    return run_settings().otel_capture_content


def text(value: Any) -> str:
    """``value`` as text for an attribute: JSON for structures, masked of secrets, cut to ``LIMIT``."""
    raw = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    masked = redactor().text(raw)
    return masked if len(masked) <= LIMIT else masked[:LIMIT] + "…"


def prompt_attributes(prompt: str) -> dict[str, Any]:
    """A prompt as span attributes: its size always, its (secret-masked) text only when allowed."""
    attributes: dict[str, Any] = {"phasegraph.prompt.chars": len(prompt)}
    if allowed():
        attributes["gen_ai.prompt"] = text(prompt)
    return attributes


def messages(items: list[Any]) -> list[dict[str, Any]]:
    """LangChain messages as the GenAI conventions' ``{role, content}`` records."""
    return [{"role": _role(m), "content": getattr(m, "content", m)} for m in items]


def _role(message: Any) -> str:
    """user, assistant, system or tool (a streamed answer's chunk is the assistant's too)."""
    kind = str(getattr(message, "type", "")).removesuffix("Chunk").removesuffix("Message").lower()
    return {"human": "user", "ai": "assistant"}.get(kind, kind)
