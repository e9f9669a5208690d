"""The plan executor, a subgraph: one step per superstep, then a summary that answers the plan call.

Steps run through the ToolRunner with ``step_start`` / ``step_complete`` around their tool events;
a step whose tool waits for a person's approval (``nodes.planner.approvals``) asks before it starts.
A step whose dependencies failed is skipped; ``${s2.project.id}`` in an argument is read from an
earlier step's JSON result.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.conversation import refused_message
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState, StepComplete, StepStart
from phasegraph.nodes.planner.approvals import approve_planner_calls
from phasegraph.nodes.planner.clock import TurnClock
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.ledger import record_error
from phasegraph.nodes.planner.plan_rules import REFERENCE
from phasegraph.nodes.planner.state import Plan, PlanRunState, StepOutcome, meta, public_plan
from phasegraph.nodes.planner.transcript import executor_calls, not_run, tool_answer
from phasegraph.nodes.tool_calls import execute_tool_call, ran
from phasegraph.tools import ToolResult

#: Characters of a step's result the summary (the plan call's result) quotes.
SUMMARY_CHARS = 600


class UnresolvedReference(ValueError):
    """An argument names a result field that is not there."""


@reports_errors
async def start_plan(state: PlanRunState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Mark the plan running and tell the client the planner is executing it."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    plan = state["plan"]
    assert plan is not None
    emitter.emit(
        AgentState, state="executing_plan", details=plan["objective"], **meta(state, context.context_type)
    )
    await (await context.planning()).plans.set_status(context.project_id, plan["plan_id"], "running")
    return {"plan": {**plan, "status": "running"}, "plan_results": []}


@reports_errors
async def run_step(state: PlanRunState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Run the next step (or skip it when a step it depends on did not succeed).

    A step whose tool waits for a person's approval asks first, before the step emits anything.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    await context.planning()  # a run resumed inside the plan, on a fresh process, opens it here
    registry = await context.open_tools()
    plan, done = state["plan"], state["plan_results"]
    assert plan is not None
    step = plan["steps"][len(done)]
    number, fields = len(done) + 1, meta(state, context.context_type)
    failed = [d for d in step["depends_on"] if _status(done, d) != "ok"]
    clock = TurnClock(state["elapsed"], context.session_seconds)
    if failed or clock.expired:  # a skipped step asks nothing
        why = (
            f"skipped: {', '.join(failed)} did not succeed" if failed else "skipped: the turn ran out of time"
        )
        emitter.emit(
            StepComplete,
            step_id=step["id"],
            tool=step["tool"],
            status="skipped",
            summary=why,
            step=number,
            **fields,
        )
        return {
            "plan_results": [
                *done,
                StepOutcome(id=step["id"], tool=step["tool"], status="skipped", text=why, args=step["args"]),
            ],
            "elapsed": clock.elapsed,
        }
    try:
        args, refusal = resolve(step["args"], done), None
    except UnresolvedReference as exc:
        args, refusal = step["args"], str(exc)
    call: dict[str, Any] = {"id": _call_id(plan, step["id"]), "name": step["tool"], "args": args}
    verdicts = {} if refusal else await approve_planner_calls(context, emitter, registry, [call], fields)
    clock = TurnClock(state["elapsed"], context.session_seconds)  # a person's wait does not count
    verdict = verdicts.get(call["id"])
    if verdict is not None and verdict.decision == "edit":
        call["args"] = verdict.args
    emitter.emit(
        StepStart,
        step_id=step["id"],
        tool=step["tool"],
        args=call["args"],
        rationale=step["rationale"],
        step=number,
        **fields,
    )
    signature = registry.signature(step["tool"], call["args"], context.project_id)
    result: ToolResult = await execute_tool_call(
        context,
        emitter,
        registry,
        call,
        signature,
        {**fields, "step": number},
        refusal=refusal,
        verdict=verdict,
    )
    update: dict[str, Any] = {"elapsed": clock.elapsed}
    rejected = verdict is not None and not verdict.runs
    if result.status == "error" and not rejected:  # a rejection is no failure of the tool
        update["errors_logged"] = await record_error(
            context,
            state["errors_logged"],
            stage="plan_execution",
            kind="step_failed",
            message=result.error or "",
            tool_name=step["tool"],
            execution_mode=plan["execution_mode"],
        )
    text = result.as_text()
    emitter.emit(
        StepComplete,
        step_id=step["id"],
        tool=step["tool"],
        status=result.status,
        summary=text[:200],
        step=number,
        **fields,
    )
    args = call["args"]
    outcome = StepOutcome(id=step["id"], tool=step["tool"], status=result.status, text=text, args=args)
    if rejected:
        outcome["rejected"] = True
    gathered = GatheredResult(name=step["tool"], args=args, status=result.status, text=text, ran=ran(result))
    return update | {"plan_results": [*done, outcome], "results": [*state["results"], gathered]}


async def route_steps(state: PlanRunState) -> Literal["next_step", "done"]:
    """One superstep per step, until every step ran or was skipped."""
    plan = state["plan"]
    assert plan is not None
    return "next_step" if len(state["plan_results"]) < len(plan["steps"]) else "done"


@reports_errors
async def finish_plan(state: PlanRunState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Store the outcome and answer the plan call with its summary, so the planner reasons on."""
    context = runtime.context
    plan, outcomes = state["plan"], state["plan_results"]
    assert plan is not None
    ok = sum(1 for o in outcomes if o["status"] == "ok")
    status = "completed" if ok == len(outcomes) else "failed"
    summary = f"Plan {plan['plan_id']} {status}: {ok} of {len(outcomes)} steps succeeded."
    await (await context.planning()).plans.set_status(
        context.project_id, plan["plan_id"], status, summary=summary
    )
    payload = {
        "status": status,
        "summary": summary,
        "plan": public_plan({**plan, "status": status}),
        "steps": [
            {"id": o["id"], "tool": o["tool"], "status": o["status"], "result": _cut(o["text"])}
            for o in outcomes
        ],
    }
    text, call = json.dumps(payload), {"id": plan["call_id"], "name": "agent_create_plan"}
    show = context.show_tool_outputs
    answer = tool_answer(call, text, show_output=show, error=None if status == "completed" else summary)
    outputs = {**(state.get("tool_outputs") or {}), plan["call_id"]: text}
    messages = [answer, *_step_messages(plan, outcomes, show)]
    return {"messages": messages, "plan": None, "tool_outputs": outputs}


def _step_messages(plan: Plan, outcomes: list[StepOutcome], show: bool) -> list[BaseMessage]:
    """The steps as the chat shows them: the executor's calls, then how each ended."""
    if not outcomes:
        return []
    calls = [{"id": _call_id(plan, o["id"]), "name": o["tool"], "args": o.get("args", {})} for o in outcomes]
    answers: list[BaseMessage] = []
    for call, outcome in zip(calls, outcomes, strict=True):
        text = outcome["text"]
        if outcome["status"] == "skipped":
            answers.append(not_run(call, f"Not run: {text}"))
        elif outcome.get("rejected"):  # it never ran: no "ran: error" for it
            answers.append(refused_message(call, text.removeprefix("ERROR: "), rejected=True))
        else:
            error = text.removeprefix("ERROR: ") if outcome["status"] == "error" else None
            answers.append(tool_answer(call, text, show_output=show, error=error))
    return [executor_calls(calls), *answers]


def _call_id(plan: Plan, step_id: str) -> str:
    """A step's call id: unique in the thread (plan ids are)."""
    return f"{plan['plan_id']}-{step_id}"


def resolve(args: dict[str, Any], done: list[StepOutcome]) -> dict[str, Any]:
    """``args`` with every ``${sN.path}`` replaced by that field of step sN's JSON result."""
    return {key: _resolve_value(value, done) for key, value in args.items()}


def build_plan_executor() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The executor subgraph: start, one step per superstep, finish."""
    builder = StateGraph(PlanRunState, context_schema=PlannerContext)
    builder.add_node("start_plan", start_plan)
    builder.add_node("run_step", run_step)
    builder.add_node("finish_plan", finish_plan)
    builder.add_edge(START, "start_plan")
    builder.add_conditional_edges("start_plan", route_steps, {"next_step": "run_step", "done": "finish_plan"})
    builder.add_conditional_edges("run_step", route_steps, {"next_step": "run_step", "done": "finish_plan"})
    builder.add_edge("finish_plan", END)
    return builder.compile(name="plan_executor")


def _resolve_value(value: Any, done: list[StepOutcome]) -> Any:
    if isinstance(value, list):
        return [_resolve_value(v, done) for v in value]
    if isinstance(value, dict):
        return {k: _resolve_value(v, done) for k, v in value.items()}
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = REFERENCE.fullmatch(value)
    if whole is not None:
        return _lookup(whole.group(1), whole.group(2), done)
    return REFERENCE.sub(lambda m: str(_lookup(m.group(1), m.group(2), done)), value)


def _lookup(step_id: str, path: str, done: list[StepOutcome]) -> Any:
    found = next((o for o in done if o["id"] == step_id and o["status"] == "ok"), None)
    if found is None:
        raise UnresolvedReference(f"${{{step_id}{path}}}: step {step_id} has no result")
    try:
        value: Any = json.loads(found["text"])
    except json.JSONDecodeError:
        raise UnresolvedReference(f"${{{step_id}{path}}}: step {step_id}'s result is not JSON") from None
    for part in filter(None, path.split(".")):
        if not isinstance(value, dict) or part not in value:
            raise UnresolvedReference(f"${{{step_id}{path}}}: step {step_id}'s result has no {part!r}")
        value = value[part]
    return value


def _status(done: list[StepOutcome], step_id: str) -> str:
    return next((o["status"] for o in done if o["id"] == step_id), "missing")


def _cut(text: str) -> str:
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + " …"
