"""Tool phase: run the proposed blocks on the services and answer with their ``<result>`` tags.

A single call runs alone; a ``<parallel>`` block's calls run as concurrent tasks (each with its own
timeout; one failing does not stop the others; results in block order); a ``<sequential>`` block
runs in order, ``$result_of_step_N`` replaced by step N's output, and stops at a failed step.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.conversation import user_turn
from phasegraph.nodes.dataset import append_line, message_dicts
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import PhaseEnd, PhaseStart, XmlBlock
from phasegraph.nodes.tool_calls import execute_tool_call
from phasegraph.nodes.xml_contract.arguments import PLACEHOLDER
from phasegraph.nodes.xml_contract.chat import Answered, block_calls, call_id, iteration_messages
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.contract import Block, Step
from phasegraph.nodes.xml_contract.results import refusal, step_result
from phasegraph.nodes.xml_contract.state import XmlContractState, progress
from phasegraph.tools import ToolResult, canonical_signature
from phasegraph.tools.mcp import McpServices


@reports_errors
async def execute_blocks(state: XmlContractState, runtime: Runtime[XmlContractContext]) -> dict[str, Any]:
    """Run every valid block, answer every invalid one with its problems; log the iteration.

    The model reads the ``<result>`` tags in its transcript; the conversation gets the calls and
    how each ended.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    services = await context.services()
    proposal = state["proposal"] or {}
    step = state["steps"] + 1
    update: dict[str, Any] = {"phase": "tool_phase", "phase_index": state["phase_index"] + 1, "steps": step}
    meta = progress({**state, **update})
    emitter.emit(PhaseStart, **meta)
    started = time.perf_counter()
    parts = [refusal(proposal["problems"])] if proposal.get("problems") else []
    calls = dict(state["calls"])
    ran, turn = 0, user_turn(state["messages"])
    chat_calls: list[dict[str, Any]] = []
    answered: list[Answered] = []
    for number, data in enumerate(proposal.get("blocks", []), start=1):
        block = Block(data["kind"], data["source"], [Step(**s) for s in data["steps"]], data["problems"])
        if block.problems:
            parts.append(refusal(block.problems, block.source))
            continue
        group = f"{step}.{number}"
        steps = [{"service": s.service, "tool": s.tool, "args": s.args} for s in block.steps]
        emitter.emit(XmlBlock, kind=block.kind, group=group, steps=steps, **meta)
        block_answered = await run_block(context, emitter, services, block, group, meta, turn)
        for done in block_answered:
            calls[done.result.status] += 1
            ran += 1
            parts.append(done.tag)
        answered += block_answered
        chat_calls += block_calls(block, group, turn, block_answered)
    observation = "\n".join(parts)
    emitter.emit(PhaseEnd, reason="executed", **meta)
    history = [
        {"role": "system", "content": proposal.get("system", "")},
        *message_dicts(state["transcript"][:-1]),
    ]
    tools_ms = round((time.perf_counter() - started) * 1000)
    record = {
        "protocol": context.PROTOCOL, "request_id": context.request_id, "iteration": step,
        "ts": datetime.now(UTC).isoformat(), "state": history, "action": proposal.get("text", ""),
        "observation": observation, "timings": {"model_ms": proposal.get("model_ms"), "tools_ms": tools_ms},
    }  # fmt: skip
    await append_line(context.dataset_dir, context.PROTOCOL, context.request_id, record)
    refused = 0 if ran else state["refused_in_a_row"] + 1
    return update | {
        "messages": iteration_messages(chat_calls, answered, show_output=context.show_tool_outputs),
        "transcript": [HumanMessage(observation)],
        "calls": calls,
        "refused_in_a_row": refused,
    }


async def run_block(
    context: XmlContractContext, emitter: Emitter, services: McpServices, block: Block, group: str,
    meta: dict[str, Any], turn: int = 0,
) -> list[Answered]:  # fmt: skip
    """Run one block's calls (of user message ``turn``); how each ended and its ``<result>``, in order."""

    async def call(step: Step, args: dict[str, Any]) -> ToolResult:
        name, call = f"{step.service}.{step.tool}", call_id(group, step.index, turn)
        return await execute_tool_call(
            context, emitter, context.registry(), {"id": call, "name": name, "args": args},
            canonical_signature(name, args, context.project_id),
            {**meta, "step_index": step.index, "group": group},
            invoke=lambda: services.call(step.service, step.tool, args, timeout=context.call_timeout_seconds),
        )  # fmt: skip

    used = [s.args for s in block.steps]
    if block.kind == "parallel":
        results = list(await asyncio.gather(*(call(s, s.args) for s in block.steps)))
    else:
        results = []
        for step in block.steps:
            if results and results[-1].status == "error":
                results.append(ToolResult(status="error", error=f"not run: step {step.index - 1} failed"))
                continue
            used[step.index - 1] = substitute(step.args, [r.as_text() for r in results])
            results.append(await call(step, used[step.index - 1]))
    ran = len(block.steps) if block.kind == "parallel" else _ran_in_sequence(results)
    return [
        Answered(result, step_result(block, step, result, context.max_result_chars), index < ran, args)
        for index, (step, result, args) in enumerate(zip(block.steps, results, used, strict=True))
    ]


def _ran_in_sequence(results: list[ToolResult]) -> int:
    """How many steps of a sequence ran: up to its first failure (the rest were never started)."""
    failed = next((i for i, r in enumerate(results) if r.status == "error"), None)
    return len(results) if failed is None else failed + 1


def substitute(value: Any, outputs: list[str]) -> Any:
    """``$result_of_step_N`` replaced by step N's output, in every text of the arguments."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: outputs[int(m.group(1)) - 1], value)
    if isinstance(value, dict):
        return {k: substitute(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, outputs) for v in value]
    return value


async def route_after_tools(
    state: XmlContractState, runtime: Runtime[XmlContractContext]
) -> Literal["next_step", "steps_spent", "refused_twice"]:
    """The model reads the results and proposes again, until the step budget is spent.

    An answer that could not run at all gets one correction: a second one in a row ends the turn.
    """
    if state["refused_in_a_row"] >= 2:
        return "refused_twice"
    return "steps_spent" if state["steps"] >= runtime.context.max_steps else "next_step"
