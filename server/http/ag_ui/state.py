"""A thread's state as AG-UI clients hold it, and the copy a client sends back.

The state a client receives is the thread's checkpointed values as plain JSON: ``messages`` in
AG-UI's own message format (:mod:`.messages`), every other field as JSON (secrets masked). A stream
sends it whole once (``STATE_SNAPSHOT``, as its run starts) and then only what changed, as RFC 6902
JSON Patch operations against what it sent last (``STATE_DELTA``).

A client (``HttpAgent``) sends the state it holds back with its next run. The run starts from the
thread's checkpoint whatever the client holds, so that state is only checked: it is taken when it is
consistent with the thread's state (equal, or a part of it: every key it has, the thread has, with
the same value; lists the same length, item by item) or with one of the thread's recent checkpoints
(a client that missed the end of a run holds an earlier state); anything else is a state this server
never sent, refused with 409 naming where it differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonpatch
from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent
from langchain_core.messages import BaseMessage
from langgraph.types import StateSnapshot
from pydantic_core import to_jsonable_python

from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.redact import redactor
from phasegraph.server.http.ag_ui.messages import agui_message, agui_messages
from phasegraph.server.runs.protocols import Graph
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.history import WALK_PAGE, walk
from phasegraph.server.storage.records import RequestRecord

#: How many of a thread's latest checkpoints a client's state may come from (one page of them, read
#: only when the state is not the thread's current one).
RECENT_CHECKPOINTS = WALK_PAGE
#: How many differing places a refusal names.
NAMED = 5


class StateView:
    """A thread's checkpointed values as the JSON state AG-UI clients receive."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.redactor = redactor()

    def of(self, values: Mapping[str, Any] | None) -> dict[str, Any]:
        """``values`` as plain JSON: messages in AG-UI's format, the rest as JSON; secrets masked."""
        state = {
            str(key): agui_messages(value, self.thread_id) if key == "messages" and isinstance(value, list)
            else plain(value)
            for key, value in (values or {}).items()
        }  # fmt: skip
        masked: dict[str, Any] = self.redactor.data(state)
        return masked


def plain(value: Any) -> Any:
    """Any checkpointed value as JSON (a message anywhere in AG-UI's format, not LangChain's)."""
    if isinstance(value, BaseMessage):
        converted = agui_message(value, str(value.id or ""))
        if converted is not None:
            return converted.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return to_jsonable_python(value, fallback=repr)


class StateStream:
    """The thread's state as one AG-UI stream has sent it: whole first, then JSON Patch deltas."""

    def __init__(self, graph: Graph, record: RequestRecord) -> None:
        self.graph, self.config = graph, thread_config(record.thread_key)
        self.view = StateView(record.thread_id)
        self.sent: dict[str, Any] = {}

    async def read(self) -> tuple[StateSnapshot, dict[str, Any]]:
        """The thread's checkpoint now, and its state as clients receive it."""
        snapshot = await self.graph.aget_state(self.config)
        return snapshot, self.view.of(snapshot.values)

    async def snapshot(self, ts: int) -> StateSnapshotEvent:
        """``STATE_SNAPSHOT``: the thread's whole state, which later deltas change."""
        _, self.sent = await self.read()
        return StateSnapshotEvent(snapshot=self.sent, timestamp=ts)

    def delta(self, state: dict[str, Any], ts: int) -> list[BaseEvent]:
        """``STATE_DELTA`` from what was sent last to ``state`` (none when nothing changed)."""
        patch = jsonpatch.make_patch(self.sent, state).patch
        if not patch:
            return []
        self.sent = state
        return [StateDeltaEvent.model_validate({"delta": patch, "timestamp": ts})]


async def check_client_state(
    state: dict[str, Any], graph: Graph, thread: RequestRecord | None, current: StateSnapshot | None
) -> None:
    """Refuse (409) a client ``state`` this server never sent for the thread (see the module's docstring).

    ``thread`` is the thread's first request (``None``: a new thread, whose state is empty) and
    ``current`` its checkpoint now.
    """
    if not state:
        return
    thread_id = thread.thread_id if thread else ""
    view = StateView(thread_id)
    differ = differences(state, view.of(current.values if current else None))
    if not differ:
        return
    if thread is not None:
        read = 0
        async for earlier in walk(graph, thread_config(thread.thread_key)):
            if not differences(state, view.of(earlier.values)):
                return
            read += 1
            if read >= RECENT_CHECKPOINTS:
                break
    named = ", ".join(differ[:NAMED]) + (f" and {len(differ) - NAMED} more" if len(differ) > NAMED else "")
    raise ConflictError(
        f"state differs from the thread's state at {named}: a run starts from its thread's checkpointed "
        "state, which a client cannot set here; send the state this server last sent for the thread "
        "(its STATE_SNAPSHOT with the STATE_DELTAs applied) or {}"
    )


def differences(client: Any, server: Any, path: str = "") -> list[str]:
    """Where ``client`` is not consistent with ``server`` (JSON Pointers, each with what differs)."""
    if isinstance(client, dict) and isinstance(server, dict):
        found: list[str] = []
        for key, value in client.items():
            at = f"{path}/{_escaped(str(key))}"
            found += differences(value, server[key], at) if key in server else [f"{at} (the thread has none)"]
        return found
    if isinstance(client, list) and isinstance(server, list):
        if len(client) != len(server):
            return [f"{path or '/'} ({len(client)} items; the thread's has {len(server)})"]
        pairs = enumerate(zip(client, server, strict=True))
        return [found for n, (c, s) in pairs for found in differences(c, s, f"{path}/{n}")]
    same = client == server and isinstance(client, bool) == isinstance(server, bool)
    return [] if same else [f"{path or '/'} (another value)"]


def _escaped(key: str) -> str:
    """A key as a JSON Pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
