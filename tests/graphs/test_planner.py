"""The planner protocol (seed 002) on scripted models: modes, guardrails, fallbacks and its ledgers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.approval import AwaitingAnswer
from phasegraph.nodes.planner.prompts import CLARIFYING_QUESTION, NO_TOOLS_REMINDER
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools import ToolRegistry
from phasegraph.tools.planning import LedgerFilter, PlanningStore, open_planning
from tests.helpers import kinds, of_type, scripted, turn

STEPS = [
    {"id": "s1", "tool": "list_templates", "args": {"query": "launch"}, "rationale": "", "depends_on": []},
    {"id": "s2", "tool": "create_project", "args": {"name": "Orbit", "template_id": "product-launch"},
     "rationale": "", "depends_on": ["s1"]},
    {"id": "s3", "tool": "publish_context_document",
     "args": {"project_id": "${s2.project.id}", "title": "Brief", "body": "Why Orbit."},
     "rationale": "", "depends_on": ["s2"]},
]  # fmt: skip


def plan_call(mode: str | None = "auto_execute", **extra: Any) -> dict[str, Any]:
    args = {"objective": "Set up Orbit", **({"execution_mode": mode} if mode else {}), **extra}
    return turn("", ("agent_create_plan", args))


def draft(steps: list[dict[str, Any]] = STEPS) -> dict[str, Any]:
    return turn("", ("PlanDraft", {"reasoning": "in order", "steps": steps}))


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:{tmp_path / 'planner.db'}"


async def planner(message: str, database: str, model: Any, **fields: Any) -> RunResult:
    return await run(
        "planner", message, chat_model=model, database=database, traces=MemoryTraceStore(), **fields
    )


async def store(database: str) -> PlanningStore:
    opened = open_planning(database)
    await opened.ensure_schema()
    return opened


async def usage_rows(database: str, request_id: str) -> list[Any]:
    ledger = await store(database)
    try:
        return (await ledger.ledger.usage(LedgerFilter(request_id=request_id))).rows
    finally:
        await ledger.close()


async def error_rows(database: str) -> list[Any]:
    ledger = await store(database)
    try:
        return (await ledger.ledger.errors(LedgerFilter())).rows
    finally:
        await ledger.close()


async def test_auto_execute_runs_the_plan_as_a_subgraph_and_accounts_every_call(database):
    model = scripted(plan_call(), draft(), turn("Orbit is ready."))
    result = await planner("Set up Orbit", database, model, context_type="project_create")
    assert kinds(result)[0] == "session" and kinds(result)[-1] == "final"
    assert [e.step_id for e in of_type(result, "step_complete")] == ["s1", "s2", "s3"]
    assert all(e.status == "ok" for e in of_type(result, "step_complete"))
    published = of_type(result, "step_start")[2]
    assert published.args["project_id"] == "orbit"  # ${s2.project.id} read from step s2's result
    assert {"executing_plan", "thinking"} <= {e.state for e in of_type(result, "agent_state")}
    # the executor subgraph counts its own supersteps: its events carry no run step
    assert all(e.graph_step is None for e in of_type(result, "step_start"))
    assert of_type(result, "plan_created")[0].graph_step is not None
    rows = await usage_rows(database, result.events[0].request_id)
    assert len(rows) == model.position == 3  # a row per model call
    assert sorted(r.operation_type for r in rows) == ["plan_create", "planner_stream", "planner_stream"]
    assert all(r.input_tokens > 0 and r.output_tokens > 0 and r.cost_usd > 0 for r in rows)
    usage = result.final.usage
    assert usage["calls"] == 3 and usage["inputTokens"] == sum(r.input_tokens for r in rows)
    opened = await store(database)
    plans = await opened.plans.list("default")
    assert [(p.status, p.context_type, p.execution_mode) for p in plans] == [
        ("completed", "project_create", "auto_execute")
    ]
    assert [d.title for d in await opened.domain.list_documents("default", "orbit")] == ["Brief"]
    await opened.close()
    # the plan's summary is the plan call's result: the model reads it on its next step
    assert '"status": "completed"' in model.prompts[2][-1].content


async def test_draft_only_waits_and_the_next_turn_runs_it(database):
    saver = InMemorySaver()
    model = scripted(
        plan_call("draft_only"), draft(), turn("Here is the plan; shall I run it?"),
        turn("", ("agent_execute_plan", {"plan_id": "plan-req-1-1"})), turn("Done."),
    )  # fmt: skip
    first = await planner(
        "Plan Orbit", database, model, checkpointer=saver, thread_id="t", request_id="req-1"
    )
    assert "plan_ready_for_review" in kinds(first) and "step_start" not in kinds(first)
    assert of_type(first, "agent_state")[-1].state == "waiting_on_user"
    opened = await store(database)
    assert (await opened.plans.get("default", "plan-req-1-1")).status == "pending_review"
    second = await planner("looks good, run it", database, model, checkpointer=saver, thread_id="t",
                           request_id="req-2")  # fmt: skip
    carried = of_type(second, "last_turn_context")[0]
    assert carried.pending_plan["plan_id"] == "plan-req-1-1"
    assert [e.status for e in of_type(second, "step_complete")] == ["ok", "ok", "ok"]
    assert (await opened.plans.get("default", "plan-req-1-1")).status == "completed"
    await opened.close()


async def test_legacy_auto_execute_false_means_draft_only(database):
    model = scripted(plan_call(None, auto_execute=False), draft(), turn("Review it."))
    result = await planner("Plan Orbit", database, model)
    assert of_type(result, "plan_created")[0].plan["execution_mode"] == "draft_only"
    assert "step_start" not in kinds(result)


async def test_agent_review_approves_then_runs_and_counts_outcomes(database):
    verdict = turn("", ("PlanVerdict", {"verdict": "approved", "notes": "Sound."}))
    model = scripted(plan_call("agent_review"), draft(), verdict, turn("Done."))
    result = await planner("Plan Orbit", database, model)
    assert of_type(result, "plan_review")[0].verdict == "approved"
    assert len(of_type(result, "step_complete")) == 3
    rows = await usage_rows(database, result.events[0].request_id)
    review = [r for r in rows if r.operation_type == "plan_review"]
    assert len(review) == 1 and review[0].profile == "quality" and review[0].execution_mode == "agent_review"


async def test_agent_review_needs_changes_goes_back_to_the_planner(database):
    verdict = turn("", ("PlanVerdict", {"verdict": "needs_changes", "notes": "Add a brief."}))
    model = scripted(plan_call("agent_review"), draft(), verdict, turn("I will revise it."))
    result = await planner("Plan Orbit", database, model)
    assert "step_start" not in kinds(result)
    assert (
        "needs_changes" in model.prompts[-1][-1].content and "Add a brief." in model.prompts[-1][-1].content
    )
    assert result.final.answer == "I will revise it."


async def test_project_create_order_is_corrected_once_then_accepted(database):
    # the project is created before the templates are looked at: out of order
    create = {**STEPS[1], "id": "s1", "depends_on": []}
    publish = {
        **STEPS[2],
        "depends_on": ["s1"],
        "args": {**STEPS[2]["args"], "project_id": "${s1.project.id}"},
    }
    wrong = [create, {**STEPS[0], "id": "s2"}, publish]
    model = scripted(plan_call(), draft(wrong), draft(), turn("Done."))
    result = await planner("Set up Orbit", database, model, context_type="project_create")
    assert len(of_type(result, "step_complete")) == 3
    assert "out of order" in model.prompts[2][-1].content  # the correction the model read
    rows = await usage_rows(database, result.events[0].request_id)
    assert [r.operation_type for r in rows].count("plan_create") == 2


async def test_a_plan_that_stays_unusable_is_an_error_the_planner_reads(database):
    unknown = [{"id": "s1", "tool": "format_disk", "args": {}, "rationale": "", "depends_on": []}]
    model = scripted(plan_call(), draft(unknown), draft(unknown), turn("I could not plan that."))
    result = await planner("Plan it", database, model)
    assert result.final.answer == "I could not plan that." and "plan_created" not in kinds(result)
    assert "format_disk" in model.prompts[-1][-1].content
    assert [(r.stage, r.tool_name) for r in await error_rows(database)] == [
        ("plan_create", "agent_create_plan")
    ]


async def test_the_tool_call_cap_ends_the_turn_with_what_was_done(database):
    calls = [("list_templates", {"query": str(i)}) for i in range(4)]
    model = scripted(turn("", *calls), turn("", *calls))
    result = await planner("List a lot", database, model, max_tool_calls=6)
    assert len(of_type(result, "tool_result")) == 6
    exhausted = of_type(result, "budget_exhausted")[0]
    assert (exhausted.budget, exhausted.limit, exhausted.used) == ("tool_calls", 6, 6)
    assert result.final.fallback and kinds(result)[-1] == "final"
    assert [(r.stage, r.kind) for r in await error_rows(database)] == [("planner_loop", "tool_call_cap")]
    assert model.position == 2  # the cap ended the turn: no third model call


async def test_the_watchdog_ends_a_slow_turn_with_a_final(database):
    model = scripted(turn("word " * 40), chunk_delay_ms=20)
    result = await planner("Talk slowly", database, model, session_seconds=0.2)
    assert of_type(result, "budget_exhausted")[0].budget == "session_seconds"
    assert kinds(result)[-1] == "final" and result.final.fallback
    assert [r.kind for r in await error_rows(database)] == ["session_timeout"]
    [cut] = await usage_rows(database, result.events[0].request_id)  # the cut call is still a row
    assert (cut.status, cut.error_kind) == ("timeout", "session_timeout")


async def test_a_blank_message_gets_a_question_without_a_model_call(database):
    model = scripted(turn("never said"))
    result = await planner("   ", database, model)
    assert kinds(result) == ["session", "final"] and result.final.answer == CLARIFYING_QUESTION
    assert model.position == 0
    rows = await usage_rows(database, result.events[0].request_id)
    assert [(r.operation_type, r.input_tokens, r.output_tokens) for r in rows] == [
        ("clarifying_question", 0, 0)
    ]


async def test_without_tools_the_planner_is_reminded_to_give_guidance(database):
    model = scripted(turn("Here is some guidance."))
    result = await planner("Help", database, model, tool_registry=ToolRegistry())
    assert result.final.answer == "Here is some guidance."
    assert NO_TOOLS_REMINDER in model.prompts[0][0].content


async def test_a_failing_tool_is_an_error_row_with_its_tags(database):
    model = scripted(
        turn("", ("update_task", {"task_id": "nope", "status": "done"})), turn("That task is unknown.")
    )
    result = await planner("Finish nope", database, model, context_type="task", user_id="ada")
    assert of_type(result, "tool_result")[0].status == "error" and result.final.all_tools_failed
    [row] = await error_rows(database)
    assert (row.component, row.stage, row.tool_name, row.context_type, row.user_id) == (
        "planner",
        "tool_execution",
        "update_task",
        "task",
        "ada",
    )
    assert row.session_id == result.events[0].request_id  # no thread: the request is the session


@pytest.mark.parametrize("context_type", ["project", "general"])
async def test_a_destructive_call_waits_for_an_explicit_approval_not_a_yes_in_words(database, context_type):
    opened = await store(database)
    await opened.domain.create_project("default", "Orbit", "product-launch")
    await opened.close()
    saver = InMemorySaver()
    model = scripted(turn("", ("archive_project", {"project_id": "orbit"})), turn("Archived."))
    fields = {"checkpointer": saver, "thread_id": "t", "context_type": context_type}
    first = await planner("Archive Orbit", database, model, **fields)
    assert kinds(first)[-1] == "approval_requested" and "tool_call" not in kinds(first)
    assert first.final is None and first.error is None
    # words are no answer: a message on the waiting thread is refused, and nothing runs
    for words in ("yes, go ahead", "approve"):
        with pytest.raises(AwaitingAnswer, match="waits for an approval of its call 'archive_project'"):
            await planner(words, database, model, **fields)
    # an answer that is no decision asks again, saying why
    worded = await planner("", database, model, resume="yes, go ahead", **fields)
    [again] = of_type(worded, "approval_requested")
    assert "yes, go ahead" in (again.problem or "") and "tool_call" not in kinds(worded)
    opened = await store(database)
    assert (await opened.domain.get_project("default", "orbit")).status == "active"
    second = await planner("", database, model, resume="approve", **fields)
    assert [e.status for e in of_type(second, "tool_result")] == ["ok"]
    assert second.final is not None and second.final.answer == "Archived."
    assert (await opened.domain.get_project("default", "orbit")).status == "archived"
    await opened.close()


async def test_an_empty_answer_is_replaced_by_one_built_from_the_results(database):
    model = scripted(turn("", ("list_templates", {})), turn(""))
    result = await planner("Templates?", database, model)
    assert result.final.fallback and "list_templates" in result.final.answer


async def test_oversized_arguments_are_refused_unrun(database):
    model = scripted(
        turn("", ("create_project", {"name": "x" * 500, "template_id": "event-plan"})), turn("Too big.")
    )
    result = await planner("Make it", database, model, max_tool_args_chars=100)
    assert of_type(result, "tool_result")[0].status == "error"
    opened = await store(database)
    assert await opened.domain.list_projects("default") == []
    await opened.close()
