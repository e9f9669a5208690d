"""Request bodies of the LangGraph API's thread edits and thread search, as the SDKs send them.

Like every body of this API they forbid fields they do not declare: ``ttl`` (thread time-to-live),
``values`` / ``extract`` of a search and the like are refused with 422 naming the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from phasegraph.server.http.langgraph_api.bodies import ThreadSearchBody

#: What ``POST /threads/search`` can sort by, and the fields ``select`` can keep of each thread.
ThreadSortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]
ThreadField = Literal[
    "thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "status", "values",
    "interrupts",
]  # fmt: skip


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CheckpointRef(_Body):
    """A checkpoint of the thread, as a state names it (or as a state update answered it)."""

    checkpoint_id: str
    checkpoint_ns: Literal[""] = ""
    thread_id: str | None = None  # when given, the thread of the route
    checkpoint_map: dict[str, Any] = Field(default_factory=dict)


class StateAtBody(_Body):
    """``POST /threads/{id}/state/checkpoint``: the state at a checkpoint (the latest without one)."""

    checkpoint: CheckpointRef | None = None
    subgraphs: bool = False


class ThreadQueryBody(ThreadSearchBody):
    """``POST /threads/search`` with the order of the answer and the fields kept of each thread."""

    sort_by: ThreadSortBy = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[ThreadField] | None = Field(default=None, min_length=1)


class ThreadPatchBody(_Body):
    """``PATCH /threads/{id}``: metadata merged into the thread's (a key set to ``null`` stays, as null)."""

    metadata: dict[str, Any] = Field(default_factory=dict)


class StateUpdateBody(_Body):
    """``POST /threads/{id}/state``: values written as a new checkpoint, as if ``as_node`` had run.

    ``checkpoint`` (or the older ``checkpoint_id``) writes on top of that checkpoint instead of the
    thread's latest: a fork, as a run from there would be.
    """

    values: dict[str, Any] | None  # LangGraph's state graphs take one dict per update
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None
