"""A thread's state as AG-UI clients hold it, and the copy a client sends back.

The state a client receives is the thread's checkpointed values of the graph's output fields (what a
LangGraph API ``values`` stream sends; a protocol's working fields, such as the raw tool outputs its
model reads, stay on the server) as plain JSON: ``messages`` in AG-UI's own message format
(:mod:`.messages`), every other field as JSON (secrets masked). A stream
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
from phasegraph.server.http.ag_ui.messages import agui_message, message_id
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
    """A thread's checkpointed values as the JSON state AG-UI clients receive.

    A view remembers the messages it converted (by id, with what they said), so reading a long
    thread again converts only its new or changed messages, and the unchanged ones are the very
    objects it gave before (which a diff passes over at once).
    """

    def __init__(self, thread_id: str, graph: Graph) -> None:
        self.thread_id = thread_id
        channels = graph.output_channels
        self.fields = frozenset([channels] if isinstance(channels, str) else channels)
        self.redactor = redactor()
        self._converted: dict[str, tuple[tuple[Any, ...], dict[str, Any] | None]] = {}

    def of(self, values: Mapping[str, Any] | None) -> dict[str, Any]:
        """The output fields of ``values`` as plain JSON: messages in AG-UI's format; secrets masked."""
        return {
            str(key): self._messages(value) if key == "messages" and isinstance(value, list)
            else self.redactor.data(plain(value))
            for key, value in (values or {}).items() if key in self.fields
        }  # fmt: skip

    def _messages(self, messages: list[Any]) -> list[dict[str, Any]]:
        converted: dict[str, tuple[tuple[Any, ...], dict[str, Any] | None]] = {}
        out = []
        for index, message in enumerate(messages):
            key, said = message_id(message, self.thread_id, index), _said(message)
            known = self._converted.get(key)
            if known is None or known[0] != said:
                made = agui_message(message, key)
                dumped = made.model_dump(mode="json", by_alias=True, exclude_none=True) if made else None
                known = (said, self.redactor.data(dumped))
            converted[key] = known
            if known[1] is not None:
                out.append(known[1])
        self._converted = converted
        return out


def _said(message: Any) -> tuple[Any, ...]:
    """What a message says, as far as its AG-UI form goes (a message replaced under its id differs)."""
    fields = ("content", "name", "tool_calls", "tool_call_id", "status")
    return (type(message), *(getattr(message, name, None) for name in fields))


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
        self.view = StateView(record.thread_id, graph)
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
        patch = state_patch(self.sent, state)
        if not patch:
            return []
        self.sent = state
        return [StateDeltaEvent.model_validate({"delta": patch, "timestamp": ts})]


def state_patch(sent: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch from ``sent`` to ``state``: ``jsonpatch``'s, for what changed only.

    Unchanged fields, and the unchanged start of a list (a conversation grows at its end), are
    passed over with one comparison each; ``jsonpatch`` diffs the rest, its paths moved to where
    that rest is.
    """
    ops: list[dict[str, Any]] = [{"op": "remove", "path": _pointer(key)} for key in sent if key not in state]
    for key, value in state.items():
        if key not in sent:
            ops.append({"op": "add", "path": _pointer(key), "value": value})
        elif not _same(sent[key], value):
            ops += _changes(sent[key], value, _pointer(key))
    return ops


def _changes(old: Any, new: Any, at: str) -> list[dict[str, Any]]:
    """``jsonpatch``'s operations from ``old`` to ``new``, at ``at`` (a list past its common start)."""
    skip = 0
    if isinstance(old, list) and isinstance(new, list):
        pairs = enumerate(zip(old, new, strict=False))
        skip = next((n for n, (a, b) in pairs if not _same(a, b)), min(len(old), len(new)))
    ops = jsonpatch.make_patch(old[skip:] if skip else old, new[skip:] if skip else new).patch
    if skip and any(op["path"] == "" for op in ops):
        return [{"op": "replace", "path": at, "value": new}]  # the whole list: nothing to move
    return [{**op, **{f: at + _shifted(op[f], skip) for f in ("path", "from") if f in op}} for op in ops]


def _same(a: Any, b: Any) -> bool:
    """JSON equality: Python's ``==`` holds ``1 == True`` and ``0 == False``, JSON does not.

    The very same object is equal at once (a stream's unchanged messages are the objects it sent).
    """
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _shifted(path: str, skip: int) -> str:
    """A pointer into a list's rest as a pointer into the whole list (``skip`` items before the rest)."""
    if not skip:
        return path
    _, first, *rest = path.split("/", 2)
    return "/".join(["", first if first == "-" else str(int(first) + skip), *rest])


def _pointer(key: str) -> str:
    """A top-level key as a JSON Pointer."""
    return "/" + _escaped(key)


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
    view = StateView(thread_id, graph)
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
