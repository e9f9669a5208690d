"""Prompt defaults every protocol shares; each is also a Context field a run (or Studio) can replace."""

SYSTEM_PROMPT = (
    "You are a careful assistant working inside a project workspace. Use the tools to look at files "
    "when you need facts from them, one tool call at a time, and never repeat a call you already made. "
    "When you have what you need, answer the user directly and concisely."
)

ARGS_TOO_LARGE = (
    "The arguments of this {name} call are longer than {limit} characters, the limit for one tool call; "
    "it was not run. Send smaller arguments, or split the work into several calls."
)
