"""Edits of a thread's state that agent_network's nodes could not follow, beyond each field's type.

A state edit (Studio's, ``POST /threads/{id}/state``) is first read as each field's type (``Holds`` in
the state); what ties the fields together is checked here, against the thread's state the edit goes on:
the agent in control is one of the network's, the network's routes lead to its agents, and a decision
written for the agent in control is one it may make (the nodes run a decision the state holds as it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasegraph.nodes.agent_network.agent_step import refuse
from phasegraph.nodes.agent_network.schemas import AgentDecision, incomplete
from phasegraph.nodes.errors import InvalidInputError
from phasegraph.tools.networks import NetworkSnapshot


def check_edit(edit: Mapping[str, Any], state: Mapping[str, Any]) -> None:
    """Refuse, naming the field, an edit after which a node would fail to read the state.

    Args:
        edit: The edited fields, read as their types already.
        state: The values of the checkpoint the edit goes on (empty for a thread that never ran).

    Raises:
        InvalidInputError: The edit names an agent the network lacks, a network whose routes or default
            lead nowhere, or a decision the agent in control may not make.
    """
    after = {**state, **edit}
    network = NetworkSnapshot.model_validate(after["network"]) if after.get("network") else None
    agent = after.get("current_agent") or ""
    if "network" in edit and network is not None:
        _check_network(network)
    if {"current_agent", "network"} & edit.keys():
        field = "current_agent" if "current_agent" in edit else "network"
        if network is None and agent:  # the run's first node picks the agent once it opens a network
            raise InvalidInputError(
                f"values.current_agent: the thread has no network yet, so no agent can be in control "
                f"(leave it empty: the run starts at the network's default agent), not {agent!r}"
            )
        if network is not None and agent not in network.agents:
            raise InvalidInputError(
                f"values.{field}: network {network.name!r} has no agent {agent!r} to be in control "
                f"(agents: {', '.join(network.agents)})"
            )
    decision, deciding = after.get("decision"), network.agents.get(agent) if network is not None else None
    if "decision" in edit and decision is not None and deciding is not None and after.get("refusal") is None:
        made = AgentDecision.model_validate(decision)
        problem = incomplete(made) or refuse(deciding, made)
        if problem is not None:
            raise InvalidInputError(f"values.decision: {problem}")


def _check_network(network: NetworkSnapshot) -> None:
    """The snapshot's agents are keyed by their keys, and its default and routes name its agents."""
    agents = network.agents
    for key, agent in agents.items():
        if agent.key != key:
            raise InvalidInputError(f"values.network.agents.{key}.key: {agent.key!r} is not its key {key!r}")
        for route in agent.routes:
            if route not in agents:
                raise InvalidInputError(
                    f"values.network.agents.{key}.routes: {route!r} is not an agent of the network "
                    f"(agents: {', '.join(agents)})"
                )
    if network.default_agent_key not in agents:
        raise InvalidInputError(
            f"values.network.default_agent_key: {network.default_agent_key!r} is not an agent of the "
            f"network (agents: {', '.join(agents)})"
        )
