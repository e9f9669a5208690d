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

ARGS_CUT_OFF = (
    "The arguments of this {name} call were cut off before their JSON ended, so it was not run. Make the "
    "call again with its complete arguments (shorter ones, if they were long)."
)

ARGS_NOT_JSON = (
    "The arguments of this {name} call are not one valid JSON object, so it was not run. Make the call "
    "again with a JSON object as its arguments."
)
