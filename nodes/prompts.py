"""Prompt defaults. Each is also a Context field, so a run (or Studio's form) can replace it."""

SYSTEM_PROMPT = (
    "You are a careful assistant working inside a project workspace. Use the tools to look at files "
    "when you need facts from them, one tool call at a time, and never repeat a call you already made. "
    "When you have what you need, answer the user directly and concisely."
)

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
