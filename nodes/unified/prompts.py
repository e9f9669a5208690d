"""Notices of the unified loop (the budget notice is also a Context field)."""

BUDGET_NOTICE = (
    "The budget of this turn is spent: tools are now disabled. Answer the user with the results you have."
)

BUDGET_REFUSAL = (
    "Not run: this turn's budget of {limit} tool calls is spent. Answer with the results you already have."
)
