"""Tool phase: run the proposed blocks on the services and answer with their ``<result>`` tags.

A single call runs alone; a ``<parallel>`` block's calls run as concurrent tasks (each with its own
timeout; one failing does not stop the others; results in block order); a ``<sequential>`` block
runs in order, ``$result_of_step_N`` replaced by step N's output, and stops at a failed step.

A call whose tool's policy says ``confirm`` waits for a person: every such call of the iteration is
asked at the node's start, before anything is emitted or run; a rejected call never runs and its
``<result>`` says why (a sequence stops there, as at a failed step); an edited one runs with the
edited arguments. A tool's ``max_calls_per_turn`` refuses the calls past it; its ``timeout_seconds``
bounds each call.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.approval import Verdict, ask, needs_approval
from phasegraph.nodes.conversation import tool_counts, user_turn
from phasegraph.nodes.dataset import append_line, message_dicts
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import PhaseEnd, PhaseStart, XmlBlock
from phasegraph.nodes.tool_calls import OVER_LIMIT, execute_tool_call
from phasegraph.nodes.xml_contract.arguments import PLACEHOLDER
from phasegraph.nodes.xml_contract.chat import Answered, block_calls, call_id, iteration_messages
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.contract import Block, Step
from phasegraph.nodes.xml_contract.results import refusal, step_result
from phasegraph.nodes.xml_contract.services import Services
from phasegraph.nodes.xml_contract.state import XmlContractState, progress
from phasegraph.tools import ToolResult
from phasegraph.tools.sources import policy_of


@reports_errors
async def execute_blocks(state: XmlContractState, runtime: Runtime[XmlContractContext]) -> dict[str, Any]:
    """Run every valid block, answer every invalid one with its problems; log the iteration.

    The calls that wait for a person's approval are asked first, all of them, before anything is
    emitted or run (a resumed node runs again from its start). The model reads the ``<result>``
    tags in its transcript; the conversation gets the calls and how each ended.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    services = await context.services()
    proposal = state["proposal"] or {}
    step = state["steps"] + 1
    update: dict[str, Any] = {"phase": "tool_phase", "phase_index": state["phase_index"] + 1, "steps": step}
    meta = progress({**state, **update})
    turn = user_turn(state["messages"])
    blocks = [
        Block(data["kind"], data["source"], [Step(**s) for s in data["steps"]], data["problems"])
        for data in proposal.get("blocks", [])
    ]
    run = BlockRun(context, emitter, services, meta, turn, tool_counts(state["messages"]))
    await run.ask_approvals(blocks, step)
    emitter.emit(PhaseStart, **meta)
    started = time.perf_counter()
    parts = [refusal(proposal["problems"])] if proposal.get("problems") else []
    calls = dict(state["calls"])
    ran = 0
    chat_calls: list[dict[str, Any]] = []
    answered: list[Answered] = []
    for number, block in enumerate(blocks, start=1):
        if block.problems:
            parts.append(refusal(block.problems, block.source))
            continue
        group = f"{step}.{number}"
        steps = [{"service": s.service, "tool": s.tool, "args": s.args} for s in block.steps]
        emitter.emit(XmlBlock, kind=block.kind, group=group, steps=steps, **meta)
        block_answered = await run.block(block, group)
        for done in block_answered:
            calls[done.result.status] += done.ran  # a refused call (rejected, past a limit) is none
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


class BlockRun:
    """The calls of one iteration's blocks: every approval asked first, then each block run in turn."""

    def __init__(
        self, context: XmlContractContext, emitter: Emitter, services: Services, meta: dict[str, Any],
        turn: int, counts: Counter[str],
    ) -> None:  # fmt: skip
        self.context, self.emitter, self.services, self.meta = context, emitter, services, meta
        self.turn = turn  # index of this turn's user message
        self.counts = counts  # calls of each tool this turn, for the tools' max_calls_per_turn
        self.verdicts: dict[str, Verdict] = {}  # by call id

    async def ask_approvals(self, blocks: list[Block], step: int) -> None:
        """Ask about every call whose tool's policy says ``confirm``, one after another, before any runs."""
        registry = self.services.registry
        for number, block in enumerate(blocks, start=1):
            for s in [] if block.problems else block.steps:
                identifier, name = call_id(f"{step}.{number}", s.index, self.turn), _name(s)
                if needs_approval(registry, name):
                    call = {"id": identifier, "name": name, "args": s.args}
                    self.verdicts[identifier] = await ask(
                        self.context, self.emitter, registry, call, self.meta
                    )

    async def block(self, block: Block, group: str) -> list[Answered]:
        """Run one block's calls; how each ended and its ``<result>``, in block order."""
        if block.kind == "parallel":
            ended = list(await asyncio.gather(*(self.call(s, group, []) for s in block.steps)))
        else:
            ended = []
            for step in block.steps:
                if ended and ended[-1].result.status == "error":
                    failed = ToolResult(status="error", error=f"not run: step {step.index - 1} failed")
                    ended.append(Answered(failed, "", False, step.args))
                    continue
                ended.append(await self.call(step, group, [e.result.as_text() for e in ended]))
        limit = self.context.max_result_chars
        return [
            e._replace(tag=step_result(block, s, e.result, limit))
            for s, e in zip(block.steps, ended, strict=True)
        ]

    async def call(self, step: Step, group: str, outputs: list[str]) -> Answered:
        """One call, ``$result_of_step_N`` replaced from ``outputs``; a verdict or a limit may refuse it."""
        name, registry, services = _name(step), self.services.registry, self.services
        identifier = call_id(group, step.index, self.turn)
        verdict = self.verdicts.get(identifier)
        args = substitute(verdict.args if verdict is not None else step.args, outputs)
        if verdict is not None:
            verdict = Verdict(verdict.decision, args, verdict.reason)
        refused = verdict.refusal() if verdict is not None else None
        over = self._over_limit(name) if refused is None else None
        python = services.source(name).startswith("python:")
        result = await execute_tool_call(
            self.context, self.emitter, registry, {"id": identifier, "name": name, "args": args},
            registry.signature(name, args, self.context.project_id),
            {**self.meta, "step_index": step.index, "group": group},
            refusal=over, verdict=verdict,
            invoke=None if python else lambda: services.mcp.call(
                step.service, step.tool, args, timeout=services.timeout(name)
            ),
        )  # fmt: skip
        return Answered(result, "", refused is None and over is None, args)

    def _over_limit(self, name: str) -> str | None:
        """Why a call is past its tool's ``max_calls_per_turn`` (``None``: it may run, and is counted)."""
        found = self.services.registry.get(name)
        limit = policy_of(found).max_calls_per_turn if found is not None else None
        if limit is not None and self.counts[name] >= limit:
            return OVER_LIMIT.format(name=name, limit=limit)
        self.counts[name] += 1
        return None


def _name(step: Step) -> str:
    return f"{step.service}.{step.tool}"


def substitute(value: Any, outputs: list[str]) -> Any:
    """``$result_of_step_N`` replaced by step N's output, in every text of the arguments."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: _output(m, outputs), value)
    if isinstance(value, dict):
        return {k: substitute(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, outputs) for v in value]
    return value


def _output(match: re.Match[str], outputs: list[str]) -> str:
    """Step N's output for ``$result_of_step_N``; a step with no output yet (an edit's) stays as written."""
    number = int(match.group(1))
    return outputs[number - 1] if 1 <= number <= len(outputs) else match.group(0)


async def route_after_tools(
    state: XmlContractState, runtime: Runtime[XmlContractContext]
) -> Literal["next_step", "steps_spent", "refused_twice"]:
    """The model reads the results and proposes again, until the step budget is spent.

    An answer that could not run at all gets one correction: a second one in a row ends the turn.
    """
    if state["refused_in_a_row"] >= 2:
        return "refused_twice"
    return "steps_spent" if state["steps"] >= runtime.context.max_steps else "next_step"
