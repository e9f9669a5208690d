"""Notices and notes of the triggered-phase protocol (the notices are also Context fields)."""

TOOL_RESULT_NOTE = "Result of tool call {name}({args}) [{status}]:\n{text}"

DUPLICATE_REFUSAL_NOTE = (
    "Refused: the tool call {name}({args}) was already executed in this turn; it was not run again. "
    "Use the results you already have, call a different tool, or answer."
)

BUDGET_NOTICE = "Tool budget reached; answer using existing results. Do not call any more tools."

DUPLICATE_BUDGET_NOTICE = (
    "Too many repeated tool calls; tools are now disabled. Answer using existing results."
)
