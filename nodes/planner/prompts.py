"""The planner's system prompt, its virtual tools, and the notes and texts it shows."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

SYSTEM_PROMPT = """You are the planning assistant of a project workspace. Work in one session: call tools to \
look things up and to act, read their results, and answer the user in plain text when you are done.

Besides the domain tools you have two meta-tools:
- agent_create_plan drafts a multi-step plan for an objective. execution_mode auto_execute (the default) \
runs it at once; draft_only stores it for the user's review; agent_review has a reviewer check it first.
- agent_execute_plan runs a drafted plan once the user approved it (pass its plan_id).
Use a plan for objectives that take several dependent steps; call tools directly for single actions.

{guidance}"""

NO_TOOLS_REMINDER = "You currently have no tools: focus on guidance and answer from what you know."
PENDING_PLAN_NOTE = (
    "Plan {plan_id} ({objective!r}) was drafted and waits for the user's review. If their message approves "
    "it, call agent_execute_plan with plan_id {plan_id!r}; if it asks for changes, call agent_create_plan "
    "again with the changed objective; otherwise answer them."
)
CLARIFYING_QUESTION = (
    "Your message was empty. What would you like me to do: create a project, look into one, update tasks, "
    "or audit a project's health?"
)
CAP_NOTE = "Not run: this turn reached its limit of {limit} tool calls."
WATCHDOG_NOTE = "Not run: this turn ran out of time ({limit:g} s)."
PLAN_PER_STEP = "Not run: only one plan call is handled per step; call it again if you still need it."

PLAN_PROMPT = """Draft a plan for this objective as a list of steps.

Objective: {objective}
Context type: {context_type}
{guidance}
Requested outputs: {outputs}
Priority entities: {entities}

Each step calls exactly one of these tools with complete arguments:
{tools}

Give each step an id (s1, s2, ...), the tool, its args, a one-line rationale and depends_on (ids of earlier \
steps it needs). An argument may use an earlier step's result: "${{s2.project.id}}" is the field project.id \
of step s2's JSON result. At most {max_steps} steps."""

PROJECT_CREATE_RULE = (
    "A project_create plan must, in this order: discover templates (list_templates), optionally create a "
    "template (create_template), create the project (create_project), and publish its context document "
    "(publish_context_document)."
)

REVIEW_PROMPT = """Review this plan before it runs. Approve it when its steps achieve the objective in a \
sound order with complete arguments; answer needs_changes (fixable) or rejected (wrong approach) \
otherwise, with concrete notes.

Objective: {objective}
Context type: {context_type}
Steps:
{steps}"""


class CreatePlanArgs(BaseModel):
    """Generate an execution plan for a multi-step objective, optionally running it or pausing for review."""

    objective: str = Field(description="What you want to accomplish end-to-end.")
    execution_mode: Literal["auto_execute", "draft_only", "agent_review"] | None = Field(
        default=None,
        description="Default auto_execute. draft_only returns the plan without running it; agent_review has "
        "another agent critique the plan before execution.",
    )
    auto_execute: bool | None = Field(
        default=None, description="Legacy alias: false means draft_only, true means auto_execute."
    )
    requested_outputs: list[str] = Field(default_factory=list, description="Deliverables the user expects.")
    priority_entities: list[str] = Field(
        default_factory=list, description="IDs or slugs the plan must focus on."
    )


class ExecutePlanArgs(BaseModel):
    """Run a drafted plan the user approved."""

    plan_id: str = Field(description="The plan's id, as agent_create_plan returned it.")


#: The meta-tools' names and argument models.
VIRTUAL_TOOLS: dict[str, type[BaseModel]] = {
    "agent_create_plan": CreatePlanArgs,
    "agent_execute_plan": ExecutePlanArgs,
}


def virtual_tool_schemas() -> list[dict[str, Any]]:
    """The meta-tools in OpenAI's function format, for ``bind_tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": model.__doc__ or name,
                "parameters": model.model_json_schema(),
            },
        }
        for name, model in VIRTUAL_TOOLS.items()
    ]
