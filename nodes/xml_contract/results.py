"""Results as the model reads them: one ``<result>`` per call, escaped and size-capped."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from phasegraph.nodes.xml_contract.contract import Block, Step
from phasegraph.tools import ToolResult


def step_result(block: Block, step: Step, result: ToolResult, limit: int) -> str:
    """One call's ``<result>``: its step, service, tool and status as attributes, its text escaped."""
    text = result.as_text()
    if len(text) > limit:
        text = text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"
    attributes = (
        f"step={quoteattr(str(step.index))} service={quoteattr(step.service)} tool={quoteattr(step.tool)} "
        f"status={quoteattr(result.status)}"
    )
    return f"<result {attributes}>{escape(text)}</result>"


def refusal(problems: list[str], source: str | None = None) -> str:
    """The error ``<result>`` of a block (or answer) that broke the contract: nothing of it ran."""
    head = "This block was not run" if source else "Nothing was run"
    listed = "\n".join(f"- {p}" for p in problems)
    text = escape(f"{head}: fix it and write it again.\n{listed}")
    return f'<result status="error">{text}</result>'
