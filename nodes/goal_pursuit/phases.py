"""What every LLM phase of goal pursuit shares: its events, its prompt and its structured answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel

from phasegraph.nodes.conversation import dialogue, turn_messages, user_turn
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.events import ContextUpdate, PhaseEnd, PhaseStart
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.prompts import PhaseName
from phasegraph.nodes.goal_pursuit.repository import open_repository
from phasegraph.nodes.goal_pursuit.resource_context import Change, ContextEditor
from phasegraph.nodes.goal_pursuit.schemas import read_action
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress, steps_used
from phasegraph.nodes.structured import ask_structured
from phasegraph.tools import ToolRegistry

M = TypeVar("M", bound=BaseModel)
#: Characters of each earlier tool result the prompts repeat.
RESULT_CHARS = 600


async def run_phase(
    runtime: Runtime[GoalPursuitContext],
    state: GoalPursuitState,
    phase: PhaseName,
    schema: type[M],
    *,
    check: Callable[[M], str | None] | None = None,
) -> tuple[M, dict[str, Any]]:
    """Open the phase, ask the model for a ``schema`` answer from the phase's template, close it.

    Returns the answer and the state update (phase, phase index, model calls).
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    await open_repository(context, state)  # the prompt renders resources
    update: dict[str, Any] = {"phase": phase, "phase_index": state["phase_index"] + 1}
    meta = progress({**state, **update})
    emitter.emit(PhaseStart, **meta)
    emitter.trace("orchestration_phase_start", **meta)
    registry = (
        await context.open_tools()
    )  # the project's MCP servers and Python tools beside the resource tools
    prompt = context.templates().render(phase, prompt_variables(state, context, registry))
    turn = user_turn(state["messages"])
    answer = await ask_structured(
        lambda n: context.phase_model(phase, state["model_calls"] + n, turn),
        [SystemMessage(prompt), *earlier_turns(state["messages"]), HumanMessage(state["goal"])],
        schema,
        method=context.structured_output,
        check=check,
        max_chars=context.max_tool_args_chars,
        on_reject=lambda problem, text: emitter.trace(
            "model_output_rejected", problem=problem, text=text, **meta
        ),
    )
    emitter.emit(
        PhaseEnd,
        reason="answered",
        prompt_chars=answer.prompt_chars,
        prompt_tokens=answer.prompt_tokens,
        retries=len(answer.rejected) or None,
        **meta,
    )
    emitter.trace("orchestration_phase_end", answer=answer.value.model_dump(mode="json"), **meta)
    return answer.value, update | {"model_calls": state["model_calls"] + answer.calls}


def earlier_turns(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The thread's earlier turns as every phase reads them: the user's messages and the answers.

    The current goal follows them; what the tools returned is in the context and the assessment.
    """
    return dialogue(messages[: len(messages) - len(turn_messages(messages))])


def prompt_variables(
    state: GoalPursuitState, context: GoalPursuitContext, registry: ToolRegistry
) -> dict[str, Any]:
    """Everything a phase template may use, the context rendered in the seed's order.

    ``registry`` holds the run's tools (``await context.open_tools()``).
    """
    editor = ContextEditor(state["resources"], context.repository())
    decision = state["decision"]
    planned = state["last_planned_action"]
    return {
        "progress": {
            "iteration": state["iteration"],
            "max_iter": context.max_iter,
            "min_iter": context.min_iter,
            "context_round": state["context_round"],
            "max_context_rounds": context.max_context_rounds,
            "mode": context.mode,
            "step": steps_used(state),
            "max_steps": context.max_steps,
        },
        "assessment": state["assessment"],
        "hints": state["hints"],
        "context": context_view(editor, context.context_budget_chars),
        "tools": tool_listing(registry, state["expanded_tools"]),
        "results": [r | {"text": _cut(r["text"])} for r in state["results"]],
        "decision": decision,
        "planned": planned,
        "last_planned_action": read_action(planned).model_dump() if planned else None,
    }


def context_view(editor: ContextEditor, budget: int) -> dict[str, Any]:
    """The ResourceContext as the templates render it: queried, excluded, filters, searches, segments."""
    ctx, repository = editor.context, editor.repository
    searches = [
        {
            "query": record.query,
            "count": record.count,
            "hits": [
                {"uri": u, "summary": repository.get(u).summary} for u in record.uris if u in repository
            ],
        }
        for record in ctx.search_history
    ]
    segments = [editor.segment(u) for u in ctx.workspace_segments]
    return {
        "chars": sum(map(len, segments)),
        "budget": budget,
        "queried": ctx.queried_resources,
        "excluded": ctx.excluded_resources,
        "filters": {t: rule.model_dump() for t, rule in ctx.property_filters.items()},
        "searches": searches,
        "missing": ctx.not_found,
        "segments": segments,
    }


def tool_listing(registry: ToolRegistry, expanded: list[str]) -> list[dict[str, Any]]:
    """Every tool on offer: one line when collapsed, its full parameter schema when expanded.

    Resource, MCP (``<server>.<tool>``, a JSON schema) and Python tools are listed alike.
    """
    listing = []
    for item, schema in zip(registry, registry.schemas(), strict=True):  # both in registration order
        function = schema["function"]
        description = function.get("description", "")
        listing.append(
            {
                "name": item.name,  # its own name (git.git_log), the one plans give
                "summary": description.strip().split("\n", 1)[0],
                "description": description.strip(),
                "expanded": item.name in expanded,
                "parameters": function.get("parameters", {}),
            }
        )
    return listing


def _cut(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + " ..."


def report_changes(emitter: Emitter, changes: list[Change], meta: dict[str, Any]) -> None:
    """One ``context_update`` event per change, in the order they were made."""
    for change in changes:
        emitter.emit(
            ContextUpdate,
            action=change.action,
            uris=change.uris,
            tools=change.tools,
            missing=change.missing,
            query=change.query,
            chars=change.chars,
            context_chars=change.context_chars,
            **meta,
        )
