"""Each step's prompt: the agent's compiled prompt, the runtime context, and the constraints.

The context holds the thread's earlier turns (the user's messages and the answers), the user's
message, the note of the handoff that gave the agent control, the full outputs of the tools the
agent called in its current continuous control segment (never those of other agents' epochs),
and a truncated summary of the execution log for reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from phasegraph.nodes.agent_network.execution_log import current_segment, newest_lines, preview, summary
from phasegraph.nodes.conversation import dialogue, turn_messages
from phasegraph.tools.networks import CompiledAgent

TOOL_HISTORY = "{tool_history}"
#: Characters of each earlier message the Context repeats.
MESSAGE_CHARS = 500
CONTEXT_HEADING = "## Context"
CONSTRAINTS = """## Constraints
Answer with one JSON object with the fields action, action_reasoning and action_details.
- USE_TOOL: action_details.tool and action_details.params. {tools}
- ROUTE_TO_AGENT: action_details.target_agent, and a note for that agent in action_details.message. {routes}
- RESPOND: the answer to the user in action_details.message. {respond}
A decision outside these limits is not executed: you will read why, and it counts as an error."""


def build_prompt(
    agent: CompiledAgent, state: Mapping[str, Any], summary_chars: int, *, full: bool = False
) -> str:
    """The prompt for ``agent``'s next decision.

    Args:
        agent: The compiled agent in control.
        state: The run's state (user message, logs, epoch, handoff note).
        summary_chars: Length limit of the execution-log summary.
        full: Inject every tool output of the run and the whole log instead (naive full-history
            injection; only measured, never sent).
    """
    context = runtime_context(agent, state, summary_chars, full=full)
    base = agent.prompt
    body = base.replace(TOOL_HISTORY, context) if TOOL_HISTORY in base else f"{base.rstrip()}\n\n{context}"
    return f"{body}\n\n{constraints(agent)}"


def runtime_context(
    agent: CompiledAgent, state: Mapping[str, Any], summary_chars: int, *, full: bool = False
) -> str:
    """The Context section: user message, handoff note, this segment's tool outputs, the log summary."""
    log, payloads = state["execution_log"], state["tool_execution_log"]
    parts = [CONTEXT_HEADING]
    if earlier := conversation(state.get("messages") or [], summary_chars):
        parts.append(f"Earlier in this conversation:\n{earlier}")
    parts.append(f"User message:\n{state['user_message']}")
    if state["handoff"]:
        parts.append(f"Note from the agent that handed you control:\n{state['handoff']}")
    entries = log if full else current_segment(log, agent.key, state["control_epoch"])
    outputs = [
        f"### {e['tool_key']} (execution {e['execution_id']}, {e['status']})\n"
        f"{payloads[e['execution_id']]['result']}"
        for e in entries
        if e["type"] == "tool" and e["execution_id"] in payloads
    ]
    refusals = [f"- step {e['step']}: {e['refused']}" for e in entries if e.get("refused")]
    if outputs:
        parts.append("Tool outputs while you have had control:\n" + "\n\n".join(outputs))
    if refusals:
        parts.append("Your decisions that were not executed:\n" + "\n".join(refusals))
    if log:
        parts.append("Execution log (for reference):\n" + summary(log, 10**9 if full else summary_chars))
    return "\n\n".join(parts)


def conversation(messages: Sequence[BaseMessage], limit: int) -> str:
    """The thread's earlier turns: the user's messages and the answers (who gave them), newest kept.

    Each message is cut at ``MESSAGE_CHARS``; the oldest lines go when the whole exceeds ``limit``.
    The tool calls of those turns are not repeated: their outputs belonged to those turns' agents.
    """
    earlier = dialogue(messages[: len(messages) - len(turn_messages(messages))])
    lines = [f"{_speaker(m)}: {preview(m.text, MESSAGE_CHARS)}" for m in earlier]
    return newest_lines(lines, limit, "messages")


def _speaker(message: BaseMessage) -> str:
    return "User" if isinstance(message, HumanMessage) else message.name or "Assistant"


def constraints(agent: CompiledAgent) -> str:
    """What the agent may do: its tools and the parameters it provides, its routes, whether it may respond."""
    tools = (
        "Your tools and the parameters you provide: "
        + "; ".join(f"{name}({', '.join(tool.agent_params)})" for name, tool in agent.tools.items())
        if agent.tools
        else "You have no tools."
    )
    routes = f"You may route to: {', '.join(agent.routes)}." if agent.routes else "You may not route."
    respond = (
        "You may respond." if agent.allow_respond else "You may not respond: route to an agent that can."
    )
    return CONSTRAINTS.format(tools=tools, routes=routes, respond=respond)
