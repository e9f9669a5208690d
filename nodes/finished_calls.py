"""The tool calls a graph step finished, kept durably so that a re-run of the step never runs them again.

LangGraph saves a step's results with the checkpoint after it, and every protocol pauses right after
its tool node, so a tool node that completed never runs again. A crash in the middle of a tool node
that makes several calls (an xml_contract ``<sequential>`` or ``<parallel>`` block, a planner turn's
calls) re-runs the whole node from the checkpoint before it, though. So each call that finishes is
also written, and the write awaited before the call returns (so before the next step of a block
starts), as a pending write of that checkpoint under a task id of its own: the node's task and the
call's id. The re-run of the node is the same task on the same checkpoint: it finds those results
and hands them back instead of calling the tools again. A fork starts from a checkpoint of its own,
whose tasks are new, so its calls run. LangGraph passes over pending writes of tasks it does not
schedule, and retention removes them with their checkpoint.

Without a checkpointer (a plain in-process run) nothing is recorded: such a run never resumes.
With ``durability="exit"`` the checkpoint a tool node starts from is not saved, so a crash re-runs
the model calls before it, and their calls are new ones.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER  # kept public for langgraph-api
from langgraph.runtime import get_runtime

from phasegraph.tools import ToolResult

#: The channel of the pending writes that hold finished calls (no graph has a channel of this name).
CHANNEL = "phasegraph:finished_call"
#: Steps whose records this process has read, at most (a step's are read once, at its first call).
_MAX_STEPS = 256
#: Records of the steps read lately: (thread, namespace, checkpoint id) -> {write's task id: record}.
_read: OrderedDict[tuple[str, str, str], dict[str, dict[str, Any]]] = OrderedDict()


@dataclass(frozen=True)
class FinishedCalls:
    """The finished calls of the graph step (node task) running now, on the checkpoint it started from."""

    saver: BaseCheckpointSaver[Any]
    config: RunnableConfig  # thread, namespace and id of the checkpoint the step started from
    task_id: str  # the step's task: the same when a crash makes it run again from that checkpoint

    @classmethod
    def of_this_step(cls) -> FinishedCalls | None:
        """The record of the step running now (``None`` outside a graph run or without a checkpointer)."""
        try:
            saver = get_config()[CONF].get(CONFIG_KEY_CHECKPOINTER)
            info = get_runtime().execution_info
        except (RuntimeError, KeyError, AttributeError):  # not inside a graph node
            return None
        if not isinstance(saver, BaseCheckpointSaver) or info is None or info.thread_id is None:
            return None
        # a task's namespace is its graph's (a subgraph's) plus "node:task": the checkpoint is its graph's
        namespace = info.checkpoint_ns.rpartition("|")[0]
        config: RunnableConfig = {
            CONF: {
                "thread_id": info.thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": info.checkpoint_id,
            }
        }
        return cls(saver, config, info.task_id)

    async def recorded(self, call_id: str, signature: str) -> ToolResult | None:
        """The result of ``call_id`` when this step finished it before (the same call), else ``None``."""
        record = (await self._records()).get(self._write_id(call_id))
        if record is None or record.get("signature") != signature:
            return None  # never finished here, or another call under that id: it runs
        return ToolResult.model_validate(record["result"])

    async def record(self, call_id: str, signature: str, result: ToolResult) -> None:
        """Save a finished call's result; it is durable when this returns."""
        record = {"signature": signature, "result": result.model_dump(mode="json")}
        await self.saver.aput_writes(self.config, [(CHANNEL, record)], self._write_id(call_id))
        (await self._records())[self._write_id(call_id)] = record

    def _write_id(self, call_id: str) -> str:
        return f"{self.task_id}:{call_id}"

    async def _records(self) -> dict[str, dict[str, Any]]:
        """The step's records, read from the saver once per process (later ones are added as saved)."""
        configurable = self.config[CONF]
        key = (configurable["thread_id"], configurable["checkpoint_ns"], configurable["checkpoint_id"])
        if key not in _read:
            saved = await self.saver.aget_tuple(self.config)
            writes = (saved.pending_writes or []) if saved is not None else []
            found = {task: value for task, channel, value in writes if channel == CHANNEL}
            _read.setdefault(key, found)  # a call of the step that read meanwhile keeps its own
            while len(_read) > _MAX_STEPS:
                _read.popitem(last=False)
        _read.move_to_end(key)
        return _read[key]
