"""Publish-time checks of a network, as pure functions: each returns its problems as sentences.

``network_problems`` runs them all, so a person fixing a file sees every problem at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from phasegraph.tools.networks.definition import AgentDefinition, NetworkDefinition


def _names(keys: Sequence[str]) -> str:
    quoted = [f"'{k}'" for k in keys]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def duplicate_agents(network: NetworkDefinition) -> list[str]:
    """Agent keys must be unique: routes name agents by key."""
    counts = Counter(a.key for a in network.agents)
    return [
        f"The key '{key}' is used by {n} agents; each agent needs its own key."
        for key, n in counts.items()
        if n > 1
    ]


def default_agent(network: NetworkDefinition) -> list[str]:
    """Exactly one agent is where runs start."""
    defaults = [a.key for a in network.agents if a.is_default]
    if not defaults:
        return ["No agent is marked is_default: a run would not know which agent starts; mark exactly one."]
    if len(defaults) > 1:
        every = "both" if len(defaults) == 2 else "all"
        return [f"Agents {_names(defaults)} are {every} marked is_default; exactly one agent may start runs."]
    return []


def responding_agent(network: NetworkDefinition) -> list[str]:
    """At least one agent may answer the user, or no run could end with an answer."""
    if any(a.allow_respond for a in network.agents):
        return []
    return [
        "No agent has allow_respond: no run could ever end with an answer; "
        "allow at least one agent to respond."
    ]


def route_targets(network: NetworkDefinition) -> list[str]:
    """Every route names an agent of the network."""
    keys = {a.key for a in network.agents}
    return [
        f"Agent '{agent.key}' routes to '{target}', which is not an agent of this network "
        f"(agents: {_names(sorted(keys))})."
        for agent in network.agents
        for target in agent.routes
        if target not in keys
    ]


def equipped_tools(
    network: NetworkDefinition,
    tools: Mapping[str, Sequence[str]],
    unavailable: Mapping[str, str] | None = None,
) -> list[str]:
    """Every equipped tool exists, and names only parameters that tool has.

    Args:
        network: The definition.
        tools: Each available tool's parameter names.
        unavailable: MCP servers that did not start (server -> why): their tools cannot be checked.
    """
    equipped = {agent.key: [t.tool for t in agent.tools] for agent in network.agents}
    problems = unknown_tools(equipped, tools, unavailable)
    for agent in network.agents:
        for item in agent.tools:
            if item.tool not in tools:
                continue
            params = set(tools[item.tool])
            named = [*(item.agent_params or []), *item.system_params]
            unknown = sorted({p for p in named if p not in params})
            if unknown:
                problems.append(
                    f"Agent '{agent.key}' gives the tool '{item.tool}' the parameter(s) "
                    f"{_names(unknown)}, "
                    f"which it does not have (it has {_names(sorted(params)) if params else 'none'})."
                )
    return problems


def unknown_tools(
    equipped: Mapping[str, Sequence[str]],
    tools: Collection[str],
    unavailable: Mapping[str, str] | None = None,
) -> list[str]:
    """Each tool an agent is equipped with that is not among ``tools``, as a sentence naming both.

    Args:
        equipped: Each agent's equipped tool names.
        tools: The names of the tools that exist (MCP tools as ``<server>.<tool>``).
        unavailable: MCP servers that did not start (server -> why); a tool of one is named as such.
    """
    problems: list[str] = []
    for agent, names in equipped.items():
        for name in names:
            if name in tools:
                continue
            server = name.partition(".")[0] if "." in name else ""
            if server in (unavailable or {}):
                problems.append(
                    f"Agent '{agent}' is equipped with the tool '{name}', but the MCP server '{server}' is "
                    f"unavailable ({(unavailable or {})[server]}), so its tools cannot be checked."
                )
                continue
            problems.append(
                f"Agent '{agent}' is equipped with the tool '{name}', which does not exist "
                f"(tools: {_names(sorted(tools)) if tools else 'none'})."
            )
    return problems


def reachable_from(network: NetworkDefinition, start: str) -> list[str]:
    """Keys of the agents control can reach from ``start`` (itself included), in visiting order."""
    by_key: dict[str, AgentDefinition] = {a.key: a for a in network.agents}
    seen, queue = [start], [start]
    while queue:
        agent = by_key.get(queue.pop(0))
        for target in agent.routes if agent else []:
            if target in by_key and target not in seen:
                seen.append(target)
                queue.append(target)
    return seen


def responder_reachable(network: NetworkDefinition) -> list[str]:
    """From each default agent, some agent that may respond can be reached along routes."""
    responders = {a.key for a in network.agents if a.allow_respond}
    problems = []
    for start in (a.key for a in network.agents if a.is_default):
        reached = reachable_from(network, start)
        if not responders.intersection(reached):
            allowed = (
                f"the agents that may respond are {_names(sorted(responders))}"
                if responders
                else ("no agent may respond")
            )
            problems.append(
                f"No agent that may respond can be reached from the default agent '{start}': it reaches only "
                f"{_names(reached)}, and {allowed}."
            )
    return problems


def network_problems(
    network: NetworkDefinition,
    tools: Mapping[str, Sequence[str]],
    unavailable: Mapping[str, str] | None = None,
) -> list[str]:
    """Every publish-time problem of ``network``, in a stable order (empty when it can be published).

    ``unavailable`` names the MCP servers that did not start (server -> why).
    """
    return [
        *duplicate_agents(network),
        *default_agent(network),
        *responding_agent(network),
        *route_targets(network),
        *equipped_tools(network, tools, unavailable),
        *responder_reachable(network),
    ]
