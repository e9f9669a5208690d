"""An agent's step: build its prompt, ask for an AgentDecision, refuse what the agent may not do."""

from __future__ import annotations

from typing import Any, Literal
from uuid import NAMESPACE_URL, uuid5

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from opentelemetry.trace import Span, Status, StatusCode

from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.execution_log import agent_entry, preview
from phasegraph.nodes.agent_network.network import trace_network
from phasegraph.nodes.agent_network.prompts import build_prompt
from phasegraph.nodes.agent_network.schemas import AgentDecision, incomplete
from phasegraph.nodes.agent_network.state import AgentNetworkState, progress
from phasegraph.nodes.conversation import call_message, refused_message, user_turn
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentStep
from phasegraph.nodes.structured import ask_structured
from phasegraph.nodes.telemetry import content, continue_span_in, current_span, prompt_attributes
from phasegraph.tools.networks import CompiledAgent, NetworkSnapshot

DECIDE = "Decide your next action for the user's request, as one JSON decision."


@reports_errors
async def run_agent_step(state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]) -> dict[str, Any]:
    """Ask the agent in control for its decision; a decision outside its limits is logged, not run.

    The node's span is the agent's step, ``invoke_agent <agent>``; a tool call it decides runs in it
    (``use_tool`` goes on in the same span), so the call's ``execute_tool`` span nests in its step.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    agent = NetworkSnapshot.model_validate(state["network"]).agent(state["current_agent"])
    step = state["steps"] + 1
    update: dict[str, Any] = {"phase": "agent_step", "phase_index": state["phase_index"] + 1, "steps": step}
    meta = progress({**state, **update})
    prompt = build_prompt(agent, state, context.summary_chars)
    trace_network(state)
    span = step_span(agent.key, step, state["control_epoch"])
    span.set_attributes(prompt_attributes(prompt))
    turn = user_turn(state["messages"])
    answer = await ask_structured(
        lambda n: context.resolve_model(state["model_calls"] + n, turn),
        [SystemMessage(prompt), HumanMessage(DECIDE)],
        AgentDecision,
        method=context.structured_output,
        check=incomplete,
        max_chars=context.max_tool_args_chars,
        on_reject=lambda problem, text: emitter.trace(
            "model_output_rejected", problem=problem, text=text, **meta
        ),
    )
    decision = answer.value.model_dump(mode="json")
    refusal = refuse(agent, answer.value)
    for name, tokens in (("input", answer.prompt_tokens), ("output", answer.output_tokens)):
        if tokens is not None:
            span.set_attribute(f"gen_ai.usage.{name}_tokens", tokens)
    said = {  # what the model wrote: on spans only when content may be captured
        "reasoning": content.text(preview(decision["action_reasoning"], 120)),
        "details": content.text(preview(decision["action_details"], 120)),
    } if content.allowed() else {}  # fmt: skip
    span.add_event("gen_ai.agent.decision", {
        "action": decision["action"], **said, **({"refused": refusal} if refusal else {}),
    })  # fmt: skip
    if refusal is not None:
        span.set_status(Status(StatusCode.ERROR, f"refused: {refusal}"))
    elif answer.value.action == "USE_TOOL":  # route_after_step runs the call next, within this step
        continue_span_in("use_tool")
    emitter.trace("agent_prompt", prompt=prompt, raw=answer.raw, **meta)
    emitter.emit(
        AgentStep, decision=decision, refused=refusal, prompt_chars=answer.prompt_chars,
        prompt_tokens=answer.prompt_tokens, retries=len(answer.rejected) or None, **meta,
    )  # fmt: skip
    entry = agent_entry(
        step, state["control_epoch"], agent.key, input_preview(state), decision,
        prompt_chars=answer.prompt_chars, **({"refused": refusal} if refusal else {}),
    )  # fmt: skip
    update |= refused_call(context, {**state, **update}, agent.key, answer.value, refusal)  # type: ignore[typeddict-item]
    return update | {
        "decision": decision,
        "refusal": refusal,
        "execution_log": [*state["execution_log"], entry],
        "tool_errors": state["tool_errors"] + (refusal is not None),
        "model_calls": state["model_calls"] + answer.calls,
    }


def step_span(agent: str, step: int, epoch: int) -> Span:
    """The running node's span as ``agent``'s step: ``invoke_agent <agent>``, with the step and epoch.

    ``use_tool`` names its span so too: the same span, which the deciding step left open for it, or its
    own when the run that decided the call stopped before it ran (an approval, a breakpoint, a pause or a
    crash). The resumed run is a new trace, whose root links to the first: its ``invoke_agent`` span for
    the step holds what the step still does there, the call.
    """
    span = current_span()
    span.update_name(f"invoke_agent {agent}")
    span.set_attributes({
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "phasegraph.step": step, "phasegraph.epoch": epoch,
    })  # fmt: skip
    return span


def refuse(agent: CompiledAgent, decision: AgentDecision) -> str | None:
    """Why ``agent`` may not do what it decided (a tool, parameter or route it lacks), or None."""
    details = decision.action_details
    if decision.action == "USE_TOOL":
        tool = agent.tools.get(details.tool or "")
        if tool is None:
            mine = ", ".join(agent.tools) or "none"
            return f"{agent.key} has no tool {details.tool!r} (its tools: {mine})"
        extra = sorted(set(details.params) - set(tool.agent_params))
        if extra:
            return (
                f"{agent.key} may not provide {', '.join(extra)} to {details.tool} "
                f"(it provides: {', '.join(tool.agent_params) or 'nothing'})"
            )
    if decision.action == "ROUTE_TO_AGENT" and details.target_agent not in agent.routes:
        return (
            f"{agent.key} cannot route to {details.target_agent!r} "
            f"(it may route to: {', '.join(agent.routes) or 'no agent'})"
        )
    if decision.action == "RESPOND" and not agent.allow_respond:
        return f"{agent.key} may not respond; route to an agent that can"
    return None


def refused_call(
    context: AgentNetworkContext,
    state: AgentNetworkState,
    agent: str,
    decision: AgentDecision,
    refusal: str | None,
) -> dict[str, Any]:
    """A refused tool call as the thread shows it: the agent's call, answered with why it did not run."""
    if refusal is None or decision.action != "USE_TOOL":
        return {}
    tool = decision.action_details.tool or "unknown"
    call = {
        "id": execution_id(context, state, tool, refused=True),
        "name": tool,
        "args": decision.action_details.params,
    }
    message = call_message([call])
    message.name = agent
    return {"messages": [message, refused_message(call, f"Not run: {refusal}.")]}


def execution_id(
    context: AgentNetworkContext, state: AgentNetworkState, tool: str, *, refused: bool = False
) -> str:
    """The id of this step's tool call, unique in the thread.

    Named by what it is, not drawn at random: a step that runs again after a crash names its call
    as the first attempt did, so a call that attempt finished is replayed, never run twice.
    """
    turn = user_turn(state["messages"])
    name = f"phasegraph:{context.request_id}/{state['steps']}/{state['control_epoch']}/{tool}"
    name += (f"/m{turn + 1}" if turn else "") + ("/refused" if refused else "")
    return uuid5(NAMESPACE_URL, name).hex


def input_preview(state: AgentNetworkState) -> str:
    """What the agent was deciding on: the user's message, its handoff note, or what it has gathered."""
    if not state["execution_log"]:
        return state["user_message"]
    last = state["execution_log"][-1]
    if last["agent_key"] != state["current_agent"] or last["epoch"] != state["control_epoch"]:
        return state["handoff"] or f"control from {last['agent_key']}"
    return f"{last['type']} step {last['step']}: {last.get('response_preview') or last['decision']['action']}"


async def route_after_step(
    state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]
) -> Literal["use_tool", "handoff", "respond", "refused", "steps_spent", "errors_spent"]:
    """Run what the agent decided; a refused decision goes back to it, while the budgets last."""
    if state["refusal"] is not None:
        spent = budget_spent(state, runtime.context)
        return spent if spent != "next_step" else "refused"
    action = (state["decision"] or {}).get("action")
    if action == "USE_TOOL":
        return "use_tool"
    return "handoff" if action == "ROUTE_TO_AGENT" else "respond"


def budget_spent(
    state: AgentNetworkState, context: AgentNetworkContext
) -> Literal["next_step", "steps_spent", "errors_spent"]:
    """Which budget ends the run now, if any: tool errors first, then steps."""
    if state["tool_errors"] >= context.max_tool_errors:
        return "errors_spent"
    if state["steps"] >= context.max_steps:
        return "steps_spent"
    return "next_step"
