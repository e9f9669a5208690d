"""The chat parts of a run's stream: ``messages-tuple``, ``messages`` and ``events``.

They are built from what every phasegraph run stores, so a join replays them as the live stream
sent them: the model's text (``text`` events, sent as the model streams), the tools that ran
(``tool_call`` / ``tool_result``), and the run's checkpoints (which node ran in each superstep and
what it wrote). Shapes are the reference server's:

- ``messages-tuple``: ``[message, metadata]`` per model chunk (``AIMessageChunk``), then each
  message a node wrote whole (the answer as stored, ``ToolMessage`` s ...);
- ``messages``: ``messages/metadata`` (``{id: {metadata}}``) the first time a message shows,
  then ``messages/partial`` (the model's message so far) or ``messages/complete`` (a whole one);
- ``events``: ``astream_events`` v2 dicts (``event``, ``name``, ``run_id``, ``tags``, ``metadata``
  with ``langgraph_node``, ``data``, ``parent_ids``): the graph's and each node's
  ``on_chain_start`` / ``on_chain_end``, ``on_chat_model_start`` / ``_stream`` / ``_end`` for a
  model's text, ``on_tool_start`` / ``on_tool_end`` for each tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage

from phasegraph.nodes.conversation import HIDDEN_OUTPUT
from phasegraph.nodes.events import Event, TextChunk, ToolCall, ToolResultEvent
from phasegraph.nodes.models import public_spec
from phasegraph.server.http.langgraph_api.steps import NodeRun, Saved
from phasegraph.server.http.langgraph_api.views import jsonable
from phasegraph.server.storage.records import RequestRecord

Part = tuple[str, Any]
CHAT_MODES = frozenset({"messages", "messages-tuple", "events"})


@dataclass
class _Call:
    """A model call whose text is streaming."""

    message_id: str
    run_id: str
    node: NodeRun
    phase_index: int | None
    text: str = ""


class ChatParts:
    """The chat parts of one run, for the modes its client asked for."""

    def __init__(self, record: RequestRecord, modes: set[str]) -> None:
        self.record, self.modes = record, modes
        #: ``messages`` parts, unless ``messages-tuple`` is asked for too (the reference sends tuples only).
        self.whole_messages = "messages" in modes and "messages-tuple" not in modes
        self.model = public_spec(str(record.settings.get("model") or "model"))
        self._call: _Call | None = None
        self._shown: set[str] = set()  # ids of messages a client has (messages mode) or had as input
        self._args: dict[str, dict[str, Any]] = {}  # a tool call's arguments, by call id
        self._started: set[str] = set()  # nodes (task ids) whose on_chain_start was sent
        self._node: NodeRun | None = None  # the node running now, as far as the checkpoints tell

    def begin(self) -> list[Part]:
        """The graph's ``on_chain_start``."""
        return self._event("on_chain_start", self.record.protocol, self.record.request_id, {})

    def on_event(self, event: Event, nodes: list[NodeRun]) -> list[Part]:
        """The parts of one phasegraph event (``nodes``: those of its superstep, when known).

        A subgraph's events carry no superstep: they belong to the node running the subgraph.
        """
        parts = self._start(nodes)
        if nodes:
            self._node = nodes[0]
        node = self._node if nodes or event.graph_step is None else None
        node = node or _guess(event, self.record.protocol)
        if isinstance(event, TextChunk):
            return parts + self._text(event, node)
        parts += self._close()
        if isinstance(event, ToolCall):
            self._args[event.call_id] = event.args
            data = {"input": jsonable(event.args)}
            parts += self._event("on_tool_start", event.name, self._id("tool", event.call_id), data, node)
        elif isinstance(event, ToolResultEvent):
            parts += self._tool_end(event, node)
        return parts

    def on_saved(self, saved: Saved) -> list[Part]:
        """A superstep's checkpoint: its nodes end (``on_chain_end``); the messages they wrote."""
        parts = self._close()
        self._shown |= _ids(saved.previous.values if saved.previous else {})  # a node's input is not news
        for node, update in saved.writes:  # as the reference: the node ends, then its messages show
            parts += self._start([node])
            parts += self._node_event("on_chain_end", node, {"output": jsonable(update)})
            for message in _messages(update):
                parts += self._whole(message, node)
        return parts

    def end(self, values: dict[str, Any] | None) -> list[Part]:
        """The run stopped: the model call still open ends, then the graph (``values``: its output)."""
        parts = self._close()
        if values is not None:
            parts += self._event(
                "on_chain_end", self.record.protocol, self.record.request_id, {"output": values}
            )
        return parts

    def _start(self, nodes: list[NodeRun]) -> list[Part]:
        parts: list[Part] = []
        for node in nodes:
            if node.task_id not in self._started:
                self._started.add(node.task_id)
                parts += self._node_event("on_chain_start", node, {})
        return parts

    def _text(self, event: TextChunk, node: NodeRun) -> list[Part]:
        parts: list[Part] = []
        call = self._call
        if call is not None and (call.node != node or call.phase_index != event.phase_index):
            parts += self._close()
            call = None
        if call is None:
            key = f"{self.record.request_id}:{event.seq}"
            call = self._call = _Call(f"lc_run--{_uuid('message', key)}", _uuid("model", key), node,
                                      event.phase_index)  # fmt: skip
            parts += self._model("on_chat_model_start", call, {}, event)
        call.text += event.text
        chunk = jsonable(AIMessageChunk(content=event.text, id=call.message_id))
        parts += self._model("on_chat_model_stream", call, {"chunk": chunk}, event)
        meta = self._model_meta(node, event)
        if "messages-tuple" in self.modes:
            parts.append(("messages", [chunk, meta]))
        if self.whole_messages:
            if call.message_id not in self._shown:
                self._shown.add(call.message_id)
                parts.append(("messages/metadata", {call.message_id: {"metadata": meta}}))
            parts.append(("messages/partial", [jsonable(AIMessage(content=call.text, id=call.message_id))]))
        return parts

    def _close(self) -> list[Part]:
        """End the model call whose text was streaming, if one was."""
        call, self._call = self._call, None
        if call is None:
            return []
        output = jsonable(AIMessageChunk(content=call.text, id=call.message_id))
        return self._model("on_chat_model_end", call, {"output": output}, None)

    def _tool_end(self, event: ToolResultEvent, node: NodeRun) -> list[Part]:
        ok = event.status == "ok"
        shown = HIDDEN_OUTPUT.format(name=event.name, status="ok" if ok else f"error ({event.error})")
        message = ToolMessage(
            content=event.output if event.output is not None else shown, tool_call_id=event.call_id,
            name=event.name, status="success" if ok else "error", id=self._id("tool-message", event.call_id),
        )  # fmt: skip
        data = {"output": jsonable(message), "input": jsonable(self._args.get(event.call_id, {}))}
        return self._event("on_tool_end", event.name, self._id("tool", event.call_id), data, node)

    def _whole(self, message: BaseMessage, node: NodeRun) -> list[Part]:
        """A message a node wrote, sent whole the first time it shows."""
        if not message.id or message.id in self._shown:
            return []
        self._shown.add(message.id)
        parts: list[Part] = []
        meta, dumped = self._meta(node), jsonable(message)
        if "messages-tuple" in self.modes:
            parts.append(("messages", [dumped, meta]))
        if self.whole_messages:
            parts.append(("messages/metadata", {message.id: {"metadata": meta}}))
            parts.append(("messages/complete", [dumped]))
        return parts

    def _node_event(self, kind: str, node: NodeRun, data: dict[str, Any]) -> list[Part]:
        return self._event(kind, node.name, node.task_id, data, node, tags=[f"graph:step:{node.step}"])

    def _model(self, kind: str, call: _Call, data: dict[str, Any], event: TextChunk | None) -> list[Part]:
        return self._event(
            kind, self.model, call.run_id, data, call.node, meta=self._model_meta(call.node, event)
        )

    def _event(
        self, kind: str, name: str, run_id: str, data: dict[str, Any], node: NodeRun | None = None, *,
        tags: list[str] | None = None, meta: dict[str, Any] | None = None,
    ) -> list[Part]:  # fmt: skip
        """One ``events`` part (none unless the client asked for ``events``).

        Its parents: the graph, and the node it ran in (none for the graph's own events).
        """
        if "events" not in self.modes:
            return []
        root = self.record.request_id
        parents = [] if run_id == root else [root]
        if node is not None and node.task_id not in ("", run_id):
            parents.append(node.task_id)
        meta = self._meta(node) if meta is None else meta
        event = {"event": kind, "name": name, "run_id": run_id, "tags": tags or [], "metadata": meta,
                 "data": data, "parent_ids": parents}  # fmt: skip
        return [("events", event)]

    def _meta(self, node: NodeRun | None) -> dict[str, Any]:
        """The metadata of a part: the run's, and the node's when it came from one."""
        record = self.record
        meta: dict[str, Any] = {
            **record.options.get("metadata", {}), "graph_id": record.protocol,
            "assistant_id": record.protocol, "run_id": record.request_id, "thread_id": record.thread_id,
            "run_attempt": 1,
        }  # fmt: skip
        if node is not None:
            namespace = f"{node.name}:{node.task_id}" if node.task_id else node.name
            meta.update(langgraph_step=node.step, langgraph_node=node.name, langgraph_path=list(node.path),
                        langgraph_checkpoint_ns=namespace, checkpoint_ns=namespace)  # fmt: skip
        return meta

    def _model_meta(self, node: NodeRun, event: TextChunk | None) -> dict[str, Any]:
        meta = {**self._meta(node), "ls_model_type": "chat", "ls_model_name": self.model}
        if event is not None and event.phase is not None:
            meta["phase"] = event.phase
        return meta

    def _id(self, kind: str, key: str) -> str:
        return _uuid(kind, f"{self.record.request_id}:{key}")


def _guess(event: Event, protocol: str) -> NodeRun:
    """The node of an event no checkpoint names (durability ``exit``): its phase, else the graph."""
    return NodeRun(event.phase or protocol, event.graph_step or 0, "")


def _uuid(kind: str, key: str) -> str:
    """A run id that a replay of the same stream gives again."""
    return str(uuid5(NAMESPACE_URL, f"phasegraph:{kind}:{key}"))


def _messages(update: Any) -> list[BaseMessage]:
    """The messages a node wrote (its update's ``messages``)."""
    written = update.get("messages") if isinstance(update, dict) else None
    if isinstance(written, BaseMessage):
        written = [written]
    return [m for m in written or () if isinstance(m, BaseMessage)]


def _ids(values: Any) -> set[str]:
    return {m.id for m in _messages(values) if m.id}
