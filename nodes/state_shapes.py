"""What the JSON fields of a protocol's state hold, so that an edit of a thread's state is read as it.

Protocols keep their models in state as JSON (``model_dump(mode="json")``, ``asdict``): checkpoints and
clients read plain data, and the nodes build the model back when they read it (``AgentDecision``,
``NetworkSnapshot``, ``ActionDecision``...). The field's type says ``dict[str, Any]``; ``Holds`` in its
``Annotated`` says what the nodes read there, so a state edit (``POST /threads/{id}/state``) is built as
that, in full, and refused naming the field when no node could read it. LangGraph ignores the mark (it is
no reducer: not callable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Holds:
    """Marks a state field that keeps ``shape`` as JSON: what its nodes read it as.

    ``shape`` is anything pydantic builds (a model, a dataclass, a TypedDict, a list or dict or union of
    them, ``... | None``); an edit is saved as pydantic dumps it back to JSON, defaults filled in.
    """

    shape: Any
