"""USE_TOOL: run the tool for the agent in control, with system parameters merged in; control stays."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.agent_network.agent_step import budget_spent, step_span
from phasegraph.nodes.agent_network.agent_step import execution_id as call_id
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.execution_log import tool_entry, tool_payload
from phasegraph.nodes.agent_network.network import trace_network
from phasegraph.nodes.agent_network.schemas import Instruction
from phasegraph.nodes.agent_network.state import AgentNetworkState, progress
from phasegraph.nodes.approval import ask, needs_approval
from phasegraph.nodes.conversation import call_message, refused_message, result_message, tool_counts
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.tool_calls import execute_tool_call
from phasegraph.tools import ToolRegistry
from phasegraph.tools.networks import NetworkSnapshot, tool_catalogue
from phasegraph.tools.networks.snapshot import AgentTool


@reports_errors
async def use_tool(state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]) -> dict[str, Any]:
    """Execute the decided call; its full result goes to the tool execution log under a new id.

    A call whose tool needs approval asks first, before anything is emitted (LangGraph runs the node
    again from its start with the answer): rejected, it never runs and the agent reads the reason;
    edited, it runs with the edited arguments. The call runs in the span of the agent's step (see
    ``step_span``): its ``execute_tool`` span is a child of ``invoke_agent <agent>``.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    agent = NetworkSnapshot.model_validate(state["network"]).agent(state["current_agent"])
    details = (state["decision"] or {})["action_details"]
    tool, step, epoch = details["tool"], state["steps"], state["control_epoch"]
    step_span(agent.key, step, epoch)
    registry = await context.open_tools()
    update: dict[str, Any] = {"phase": "tool_execution", "phase_index": state["phase_index"] + 1}
    execution_id = call_id(context, state, tool)
    phase = progress({**state, **update})
    meta = phase | {"execution_id": execution_id}
    call = {
        "id": execution_id,
        "name": tool,
        "args": merged_params(context, registry, agent.tools[tool], details),
    }
    verdict = await ask(context, emitter, registry, call, phase) if needs_approval(registry, tool) else None
    trace_network(state)
    signature = registry.signature(tool, call["args"], context.project_id)
    result = await execute_tool_call(
        context, emitter, registry, call, signature, meta, verdict=verdict,
        turn_calls=tool_counts(state["messages"]),
    )  # fmt: skip
    params = call["args"]  # an edit replaced them
    instruction = Instruction(
        step=step, epoch=epoch, agent=agent.key, action="USE_TOOL", tool=tool, params=params,
        execution_id=execution_id,
    )  # fmt: skip
    asked = call_message([call])
    asked.name = agent.key
    rejected = verdict.refusal() if verdict is not None else None
    answer = (
        refused_message(call, rejected, rejected=True)
        if rejected is not None
        else result_message(call, result, show_output=context.show_tool_outputs)
    )
    return update | {
        "messages": [asked, answer],
        "execution_log": [
            *state["execution_log"],
            tool_entry(step, epoch, agent.key, tool, execution_id, params, result),
        ],
        "tool_execution_log": {
            **state["tool_execution_log"],
            execution_id: tool_payload(step, epoch, agent.key, tool, params, result),
        },
        "instructions": [*state["instructions"], instruction.model_dump(mode="json")],
        # a person's rejection is no tool error: the agent may still make the corrected call
        "tool_errors": state["tool_errors"] + (result.status == "error" and rejected is None),
    }


def merged_params(
    context: AgentNetworkContext, registry: ToolRegistry, equipped: AgentTool, details: dict[str, Any]
) -> dict[str, Any]:
    """The agent's parameters with the system parameters the tool accepts and the agent may not give.

    The run's registry converts its schemas once; a tool it does not offer (Context.tools left it
    out) has no parameters here and gets the runner's error result.
    """
    offered = tool_catalogue(registry).get(details["tool"])
    accepted = offered.params if offered else []
    system = {**equipped.system_params, **context.system_params}
    return {
        **{k: v for k, v in system.items() if k in accepted and k not in equipped.agent_params},
        **details["params"],
    }


async def route_after_action(
    state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]
) -> Literal["next_step", "steps_spent", "errors_spent"]:
    """The next decision, while the step and tool-error budgets last."""
    return budget_spent(state, runtime.context)
