"""Request bodies of the LangGraph Server API subset, as ``langgraph-sdk`` sends them.

Every model forbids fields it does not declare, so a field this server does not support (a
webhook, a cron, ``after_seconds`` ...) is refused with 422 naming it, never silently ignored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from phasegraph.server.http.responses import ID_PATTERN

#: Stream modes served. ``messages`` / ``messages-tuple`` and ``events`` are built from the run's
#: stored events and checkpoints (see ``parts``); ``debug`` is not served.
StreamMode = Literal["values", "updates", "custom", "messages", "messages-tuple", "events"]
#: Breakpoints: every node, or at most 100 names (as the native routes take them).
Nodes = Literal["*"] | Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=100)]


def _query_modes(value: Any) -> Any:
    """Join's ``stream_mode`` query values as a list of modes.

    Repeated (``?stream_mode=values&stream_mode=custom``, as ``langgraph-sdk`` sends them) or one JSON
    array (``?stream_mode=["values","custom"]``, as the JS SDK does); an empty value means "the run's".
    """
    if value is None:
        return None
    modes: list[Any] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and item.lstrip().startswith("["):
            try:
                parsed = json.loads(item)
            except ValueError:
                raise ValueError("a stream mode, or a JSON array of them") from None
            modes.extend(parsed if isinstance(parsed, list) else [parsed])
        else:
            modes.append(item)
    return modes


#: Join's ``stream_mode`` query parameter.
QueryModes = Annotated[list[StreamMode | Literal[""]] | None, BeforeValidator(_query_modes)]


def _whole(value: Any) -> Any:
    """A JSON number (``3`` or ``3.0``), not ``true`` or ``"3"``: what the schema's ``integer`` means."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a whole number")
    return value


Limit = Annotated[int, Field(ge=1, le=1000, strict=False), BeforeValidator(_whole)]
Offset = Annotated[int, Field(ge=0, strict=False), BeforeValidator(_whole)]


class _Body(BaseModel):
    # strict: false is not 0 and "3" is not 3, as the schema says.
    model_config = ConfigDict(extra="forbid", strict=True)


class CommandBody(_Body):
    """``command``: only ``resume`` (the answer to an ``interrupt``, or a go-on after a stop)."""

    resume: Any = None


class CheckpointBody(_Body):
    """``checkpoint``: where a run starts (a fork of the thread at that checkpoint)."""

    checkpoint_id: str
    checkpoint_ns: Literal[""] = ""
    thread_id: str | None = None  # as a state's ``checkpoint`` names it: must be the run's thread


class ConfigBody(_Body):
    """``config``: its ``configurable`` keys are read as ``context`` (the protocol's settings)."""

    configurable: dict[str, Any] = Field(default_factory=dict)


class RunFields(_Body):
    """What every run takes: the assistant, its input or command, context, stream modes and stops."""

    assistant_id: str
    input: dict[str, Any] | None = None
    command: CommandBody | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    config: ConfigBody | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    stream_mode: StreamMode | list[StreamMode] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    interrupt_before: Nodes | None = None
    interrupt_after: Nodes | None = None
    on_disconnect: Literal["cancel", "continue"] = "continue"

    def modes(self) -> list[str]:
        """The stream modes, as a list."""
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)


class RunBody(RunFields):
    """A run without a thread (``POST /runs/stream``, ``/runs/wait``): a thread of its own."""

    on_completion: Literal["delete", "keep"] = "delete"


class ThreadRunBody(RunFields):
    """A run on a thread (``POST /threads/{id}/runs[/stream|/wait]``)."""

    checkpoint: CheckpointBody | None = None
    checkpoint_id: str | None = None
    #: While another run of the thread runs: refuse, wait, cancel it, or cancel and remove it.
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue"
    if_not_exists: Literal["reject", "create"] = "reject"


class ThreadCreateBody(_Body):
    """``POST /threads``."""

    thread_id: str | None = Field(default=None, pattern=ID_PATTERN)
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearchBody(_Body):
    """``POST /threads/search``."""

    ids: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: Limit = 10
    offset: Offset = 0


class AssistantSearchBody(_Body):
    """``POST /assistants/search``: one assistant per protocol, found by graph id, name or metadata."""

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    limit: Limit = 10
    offset: Offset = 0


class HistoryBody(_Body):
    """``POST /threads/{id}/history``: newest first, at most ``limit``, older than ``before``."""

    limit: Limit = 10
    before: CheckpointBody | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointBody | None = None
