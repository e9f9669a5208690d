"""Action phase: the model writes its intent under the XML contract, stopped at its execute signal."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.conversation import user_turn
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import PhaseEnd, PhaseStart, ValidationErrorEvent
from phasegraph.nodes.models import stream_model
from phasegraph.nodes.xml_contract.arguments import ToolSchemas
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.contract import read_proposal
from phasegraph.nodes.xml_contract.prompts import XML_CONTRACT_PROMPT, catalogue
from phasegraph.nodes.xml_contract.state import XmlContractState, progress

#: Where a model answer stops: the execute signal as models write it, and a result it would invent.
#: (Four: OpenAI takes no more. "Final Answer:" is not one, so the answer after it is still written.)
#: A provider may ignore them, or the model spell the signal otherwise: the reader cuts there too.
STOP_SEQUENCES = ["<execute_tools />", "<execute_tools/>", "<execute_tools>", "<result>"]


@reports_errors
async def propose_action(state: XmlContractState, runtime: Runtime[XmlContractContext]) -> dict[str, Any]:
    """Stream the model's answer, cut at a stop sequence, and read its blocks before anything runs."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    services = await context.services()
    listed = services.catalogue()
    schemas = ToolSchemas(
        services={s: {t: spec.input_schema for t, spec in tools.items()} for s, tools in listed.items()},
        unavailable=dict(services.unavailable),
    )
    update: dict[str, Any] = {"phase": "action_phase", "phase_index": state["phase_index"] + 1}
    meta = progress({**state, **update})
    emitter.emit(PhaseStart, **meta)
    contract = XML_CONTRACT_PROMPT.format(catalogue=catalogue(listed, schemas.unavailable))
    prompt: list[BaseMessage] = [SystemMessage(contract), *state["transcript"]]
    started = time.perf_counter()
    chat = context.resolve_model(state["model_calls"], user_turn(state["messages"]))
    model = chat.bind(stop=STOP_SEQUENCES)
    chunks = [chunk async for chunk in stream_model(model, prompt)]
    text = "".join(chunk.text for chunk in chunks)
    # Off the event loop: however long the answer, other requests go on while it is read.
    proposal = await asyncio.to_thread(read_proposal, text, schemas)
    emitter.emit(
        PhaseEnd,
        reason="proposed",
        chunks_read=len(chunks),
        prompt_chars=sum(len(m.text) for m in prompt),
        **meta,
    )
    group = state["steps"] + 1
    for number, block in enumerate(proposal.blocks, start=1):
        if block.problems:
            emitter.emit(ValidationErrorEvent, group=f"{group}.{number}", problems=block.problems, **meta)
    if proposal.problems:
        emitter.emit(ValidationErrorEvent, problems=proposal.problems, **meta)
    if proposal.dropped_result:
        emitter.trace(
            "model_output_rejected", problem="a <result> written by the model was cut off", text=text
        )
    kept = asdict(proposal) | {"model_ms": round((time.perf_counter() - started) * 1000), "system": contract}
    return update | {
        "proposal": kept,
        "transcript": [AIMessage(proposal.text)],
        "model_calls": state["model_calls"] + 1,
    }


async def route_after_proposal(
    state: XmlContractState, runtime: Runtime[XmlContractContext]
) -> Literal["execute", "answer"]:
    """Blocks (valid or not) go to the tool phase; a final answer, or prose without blocks, ends the turn."""
    proposal = state["proposal"] or {}
    return "execute" if proposal.get("blocks") or proposal.get("problems") else "answer"
