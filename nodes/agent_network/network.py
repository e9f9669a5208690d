"""Opening a run: pin the network snapshot it follows and reset the turn's logs and counters."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.state import AgentNetworkState
from phasegraph.nodes.emit import reports_errors
from phasegraph.nodes.errors import ConfigurationError, NotFoundError
from phasegraph.nodes.telemetry import root_span
from phasegraph.tools.networks import (
    EXAMPLE_NETWORK,
    NetworkError,
    NetworkNotFound,
    NetworkSnapshot,
    compile_network,
    load_definition,
    open_network_store,
)


@reports_errors
async def open_network(state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]) -> dict[str, Any]:
    """Load the network (published, from a file, or the bundled example) and start at its first agent."""
    context = runtime.context
    snapshot = await load_snapshot(context)
    start = context.agent_key or snapshot.default_agent_key
    if start not in snapshot.agents:
        raise ConfigurationError(
            f"network {snapshot.name!r} has no agent {start!r} to start at; "
            f"agents: {', '.join(snapshot.agents)}"
        )
    message = next((m for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None)
    if message is None or not message.text.strip():
        raise ConfigurationError("the conversation has no user message: say what the network should do")
    return {
        "user_message": message.text,
        "network": snapshot.model_dump(mode="json"),
        "current_agent": start,
        "control_epoch": 1,
        "handoff": "",
        "steps": 0,
        "tool_errors": 0,
        "decision": None,
        "refusal": None,
        "instructions": [],
        "execution_log": [],
        "tool_execution_log": {},
        "model_calls": 0,
        "phase": "agent_routing",
        "phase_index": state.get("phase_index", 0),
        "answer": "",
        "responder": None,
    }


async def load_snapshot(context: AgentNetworkContext) -> NetworkSnapshot:
    """The snapshot a run follows: a published version, a file compiled now, or the bundled example.

    A file is compiled against the run's tools (the workspace's, the project's MCP servers' as
    ``<server>.<tool>``, its Python tools'): an unknown equipped tool is named with its agent. A
    published version was checked when it was published; a tool this run lacks is an error result.
    """
    if not context.network:
        try:
            definition = load_definition(context.network_file or EXAMPLE_NETWORK)
            registry = await context.open_tools()
            return compile_network(definition, registry, context.unavailable_tools())
        except NetworkError as exc:
            raise ConfigurationError(str(exc)) from exc
    store = context.network_store or open_network_store(context.database)
    try:
        return await store.get(context.project_id, context.network, context.network_version or None)
    except NetworkNotFound as exc:
        raise NotFoundError(str(exc)) from exc
    finally:
        if context.network_store is None:
            await store.close()


def trace_network(state: AgentNetworkState) -> None:
    """Name the run's root span after its network (at every step: a resumed run starts at any step)."""
    name = state["network"]["name"]
    root = root_span()
    root.update_name(f"invoke_workflow {name}")
    root.set_attributes(
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": name, "gen_ai.agent.name": name}
    )
