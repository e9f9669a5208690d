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

FALLBACK_ANSWER_HEADER = "I could not produce a final answer; here is what the tools returned:"


def format_args(args: dict[str, object]) -> str:
    """Render call arguments the way the notes show them: ``path='docs', depth=2``."""
    return ", ".join(f"{key}={value!r}" for key, value in args.items())
