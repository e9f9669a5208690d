"""The XML contract as the system prompt states it, with the services' own tool listings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from phasegraph.tools.mcp import ToolSpec

#: What the model is told; ``{catalogue}`` is the services and their tools.
XML_CONTRACT_PROMPT = """You solve the user's task by calling tools on services, writing your intent in XML.

Think inside <think>...</think>. Call a tool by naming its service, then the tool:
  <service><tool>argument</tool></service>
Give arguments as text (for a tool with one parameter), as a JSON object, or as child elements:
  <demo><read_file>docs/a.md</read_file></demo>
  <demo><slow_echo>{{"text": "hi", "ms": 100}}</slow_echo></demo>
  <demo><slow_echo><text>hi</text><ms>100</ms></slow_echo></demo>
Independent calls can run at the same time inside <parallel>...</parallel>. Calls that need an earlier
call's output go inside <sequential>...</sequential>, where $result_of_step_N (N from 1, an earlier step)
stands for step N's output. Blocks do not nest.
After your calls write <execute_tools /> and stop: the system runs them and answers with <result> tags.
Never write <result> yourself. When you can answer, write "Final Answer:" followed by the answer.

Services and tools:
{catalogue}"""

#: The one tool-less call that ends a turn whose last two answers could not run at all.
REFUSED_TWICE = (
    "Your last two answers could not be run (the errors are above), so no more tools will run. Answer the "
    "user's task now from what you have, starting with 'Final Answer:'."
)
#: The one tool-less call that ends a run whose step budget is spent.
ANSWER_NOW = (
    "No more tools will run: the step budget ({limit}) is spent. Answer the user's task now from the results "
    "above, starting with 'Final Answer:'."
)


def catalogue(services: Mapping[str, Mapping[str, ToolSpec]], unavailable: Mapping[str, str]) -> str:
    """Each service and its tools (name, description, parameters), from the services' own listings."""
    lines: list[str] = []
    for service, tools in sorted(services.items()):
        lines.append(f"<{service}>")
        for name, spec in sorted(tools.items()):
            lines.append(f"  {name}({_parameters(spec.input_schema)}): {spec.description}")
        lines.append(f"</{service}>")
    lines += [f"<{service}> is unavailable: {why}" for service, why in sorted(unavailable.items())]
    return "\n".join(lines) or "(no services)"


def _parameters(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    described = []
    for name, spec in schema.get("properties", {}).items():
        kind = spec.get("type", "any")
        default = f" = {json.dumps(spec['default'])}" if "default" in spec else ""
        described.append(f"{name}: {kind}{'' if name in required else default or '?'}")
    return ", ".join(described)
