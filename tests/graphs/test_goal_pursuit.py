"""goal_pursuit on scripted models: the demo pursuit, the seed's edge cases, bad answers, templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run, stream_graph
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.goal_pursuit.context import DEMO_SCRIPT, GoalPursuitContext
from phasegraph.nodes.goal_pursuit.prompts import BUNDLED_TEMPLATES, TEMPLATE_FILES
from phasegraph.nodes.goal_pursuit.repository import open_repository
from phasegraph.nodes.scripted import ScriptedChatModel, load_script
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import load_bundled
from tests.helpers import kinds, of_type, scripted, turn, write_script

GOAL = (
    "The Grey Fox found her compass at the lighthouse in chapter 3: "
    "give it back to her and note it in that chapter."
)
COMPASS, MIRA = "res://item/brass-compass", "res://character/mira-voss"
CHAPTER, LIGHTHOUSE = "res://chapter/03-the-drowned-bell", "res://place/saltmarsh-lighthouse"


def discover(**plan: Any) -> dict[str, Any]:
    return turn("", ("DiscoveryPlan", {"discovery_analysis": "looked", **plan}))


def execute(tool: str, **params: Any) -> dict[str, Any]:
    decision = {"tool": tool, "params": params, "reason": "next step"}
    return turn(
        "",
        (
            "ActionDecision",
            {"situation_analysis": "ready", "decision_type": "execute", "execution": decision},
        ),
    )


def finalize(response: str, status: str = "success") -> dict[str, Any]:
    final = {"response": response, "status": status}
    return turn(
        "",
        (
            "ActionDecision",
            {"situation_analysis": "done", "decision_type": "finalize", "finalization": final},
        ),
    )


def approve(confidence: float = 0.9) -> dict[str, Any]:
    return turn(
        "",
        (
            "RefinementDecision",
            {"analysis": "fine", "verdict": "approve", "approval": {"confidence": confidence}},
        ),
    )


def refine(hints: list[str] | None = None, **assessment: Any) -> dict[str, Any]:
    refinement = {"assessment": assessment, "exploration_hints": hints or []}
    return turn(
        "", ("RefinementDecision", {"analysis": "not yet", "verdict": "refine", "refinement": refinement})
    )


async def pursue(*turns: dict[str, Any], **fields: Any) -> tuple[RunResult, ScriptedChatModel, Any]:
    """Run one turn on a fresh in-memory copy of the story world; every scripted turn must be used."""
    model = scripted(*turns)
    repository = fields.pop("resource_repository", None) or load_bundled()
    context = GoalPursuitContext(chat_model=model, resource_repository=repository, **fields)
    result = await run("goal_pursuit", fields.pop("goal", GOAL), context=context, traces=MemoryTraceStore())
    return result, model, repository


def phases(result: RunResult) -> list[str]:
    return [e.phase for e in of_type(result, "phase_start")]


async def test_demo_pursuit_searches_loads_excludes_expands_refines_executes_and_finalizes():
    model = ScriptedChatModel(script=load_script(DEMO_SCRIPT))
    repository = load_bundled()
    context = GoalPursuitContext(chat_model=model, resource_repository=repository)
    traces = MemoryTraceStore()
    result = await run("goal_pursuit", GOAL, context=context, traces=traces)

    assert model.exhausted and result.error is None
    updates = [(e.action, tuple(e.uris or e.tools)) for e in of_type(result, "context_update")]
    assert [a for a, _ in updates] == [
        "searched",
        "searched",
        "loaded",
        "expanded",
        "excluded",
        "filtered",
        "sorted",
    ]
    assert updates[0][1][0] == MIRA  # the alias search found the Grey Fox first
    assert ("excluded", (LIGHTHOUSE,)) in updates and ("expanded", ("move_item",)) in updates
    assert phases(result) == [
        "context_discovery", "context_discovery", "context_refinement", "context_discovery",
        "action_decision", "refinement_analysis",                       # iteration 1: refined
        "context_discovery", "action_decision", "refinement_analysis",  # iteration 2: approved
        "execution",                                                    # step 1
        "context_discovery", "action_decision", "refinement_analysis", "execution",  # step 2
        "context_discovery", "action_decision", "refinement_analysis",  # finalize
    ]  # fmt: skip
    assert [v.verdict for v in of_type(result, "verdict")] == ["refine", "approve", "approve", "approve"]
    assert "required_context" in of_type(result, "verdict")[0].assessment_delta
    assert [(e.name, e.status) for e in of_type(result, "tool_result")] == [
        ("move_item", "ok"),
        ("add_chapter_note", "ok"),
    ]
    final = result.final
    assert (
        kinds(result)[-1] == "final" and final.exit == "approved" and final.resolution["status"] == "success"
    )
    assert final.answer == final.resolution["response"] and final.operation_plan is None
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    # the repository shows what was executed
    assert repository.get(COMPASS).properties["owner"] == MIRA
    assert any("compass" in note for note in repository.get(CHAPTER).properties["notes"])
    kept = [t.type for t in traces.get(context.request_id)]
    assert kept.count("tool_call") == 2 and kept.count("orchestration_phase_end") == 17


async def test_refinement_and_property_filters_change_what_the_decision_reads():
    model = ScriptedChatModel(script=load_script(DEMO_SCRIPT))
    context = GoalPursuitContext(chat_model=model, resource_repository=load_bundled())
    await run("goal_pursuit", GOAL, context=context, traces=MemoryTraceStore())
    refinement_prompt, decision_prompt = model.prompts[2][0].text, model.prompts[4][0].text
    assert "backstory:" in refinement_prompt and "backstory:" not in decision_prompt
    assert f"Excluded resources: {LIGHTHOUSE}" in decision_prompt
    segments = decision_prompt.split("Workspace segments", 1)[1]
    assert segments.index(COMPASS) < segments.index(MIRA) < segments.index(CHAPTER)  # the sorted order
    assert "move_item (expanded)" in decision_prompt and '"item_uri"' in decision_prompt
    assert "- add_chapter_note:" in decision_prompt  # collapsed: one line, no schema


EDGE_CASES = {
    "direct answer: finalize at once": (
        [discover(), finalize("Mira Voss is the Grey Fox."), approve()],
        {"mode": "pursue"},
        ["context_discovery", "action_decision", "refinement_analysis"],
        ("resolution", "approved"),
    ),
    "tool ready: executes only after min_iter": (
        [discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve(),
         discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve()],
        {"mode": "determine", "min_iter": 1},
        ["context_discovery", "action_decision", "refinement_analysis"] * 2,
        ("operation_plan", "approved"),
    ),
    "missing prerequisite: refine, the assessment gains it": (
        [discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA),
         refine(["load the compass"], required_context="The compass must be loaded first."),
         discover(query_resources=[COMPASS]), discover(),
         execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve()],
        {"mode": "determine"},
        ["context_discovery", "action_decision", "refinement_analysis",
         "context_discovery", "context_discovery", "action_decision", "refinement_analysis"],
        ("operation_plan", "approved"),
    ),
    "no suitable tool: finalize with an explanation": (
        [discover(), finalize("No tool can delete a chapter; notes can be added.", "failure"), approve()],
        {"mode": "pursue"},
        ["context_discovery", "action_decision", "refinement_analysis"],
        ("resolution", "approved"),
    ),
    "max_iter: the last planned action is returned": (
        [discover(), execute("move_item", item_uri=COMPASS, to_uri=LIGHTHOUSE), refine(),
         discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA), refine()],
        {"mode": "determine", "max_iter": 2},
        ["context_discovery", "action_decision", "refinement_analysis"] * 2,
        ("operation_plan", "max_iterations"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(EDGE_CASES))
async def test_seed_edge_cases(case: str):
    turns, fields, expected_phases, (outcome, exit_reason) = EDGE_CASES[case]
    result, model, repository = await pursue(*turns, **fields)
    assert model.exhausted and result.error is None
    assert phases(result) == expected_phases
    assert kinds(result)[-1] == "final" and kinds(result).count("final") == 1
    final = result.final
    assert final.exit == exit_reason
    assert (final.resolution is not None, final.operation_plan is not None) == (
        outcome == "resolution",
        outcome == "operation_plan",
    )
    assert not of_type(result, "tool_call")  # nothing ran: determine mode, or a resolution
    assert repository.get(COMPASS).properties["owner"] != MIRA
    verdicts = of_type(result, "verdict")
    if case.startswith("tool ready"):
        assert [v.deferred for v in verdicts] == [True, False]
        plan = {"item_uri": COMPASS, "to_uri": MIRA}
        assert final.operation_plan == {
            "kind": "operation_plan",
            "tool": "move_item",
            "params": plan,
            "reason": "next step",
        }
        assert final.iteration == 2
        assert "execution is allowed from iteration 2" in model.prompts[3][0].text  # told why it did not run
    if case.startswith("missing prerequisite"):
        assert verdicts[0].assessment_delta == {"required_context": "The compass must be loaded first."}
        second_discovery = model.prompts[3][0].text
        assert (
            "The compass must be loaded first." in second_discovery and "load the compass" in second_discovery
        )
    if case.startswith("no suitable tool"):
        assert final.resolution["status"] == "failure" and "No tool can" in final.answer
    if case.startswith("max_iter"):
        budget = of_type(result, "budget_exhausted")
        assert [(b.budget, b.limit, b.used) for b in budget] == [("iterations", 2, 2)]
        assert final.operation_plan["params"]["to_uri"] == MIRA  # the last planned, not the first
        assert kinds(result)[-3:] == ["verdict", "budget_exhausted", "final"]


async def test_event_order_of_one_iteration_with_an_execution():
    result, _, repository = await pursue(
        discover(query_resources=[COMPASS], expand_tools=["move_item"]),
        discover(),
        execute("move_item", item_uri=COMPASS, to_uri=MIRA),
        approve(),
        discover(),
        finalize("Given back."),
        approve(),
    )
    assert kinds(result) == [
        "phase_start", "phase_end", "context_update", "context_update",  # discovery: load, expand
        "phase_start", "phase_end",                                      # discovery: enough
        "phase_start", "phase_end", "decision",
        "phase_start", "phase_end", "verdict",
        "phase_start", "tool_call", "tool_result", "phase_end",          # execution (step 1)
        "phase_start", "phase_end",
        "phase_start", "phase_end", "decision",
        "phase_start", "phase_end", "verdict",
        "final",
    ]  # fmt: skip
    progress = [
        (e.type, e.iteration, e.context_round, e.step) for e in result.events if e.type != "phase_end"
    ]
    assert progress[:3] == [
        ("phase_start", 1, 1, 0),
        ("context_update", 1, 1, 0),
        ("context_update", 1, 1, 0),
    ]
    assert ("tool_call", 1, None, 1) in progress and progress[-1] == ("final", 1, None, 1)
    assert repository.get(COMPASS).properties["owner"] == MIRA


async def test_the_step_budget_ends_a_pursuit_with_what_was_done():
    result, model, _ = await pursue(
        discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve(),
        max_steps=1,
    )  # fmt: skip
    assert model.exhausted
    assert kinds(result)[-2:] == ["budget_exhausted", "final"]
    assert result.final.exit == "step_budget" and result.final.fallback
    assert "move_item" in result.final.answer


async def test_an_approved_repeat_of_an_executed_call_is_not_run_again():
    call = execute("move_item", item_uri=COMPASS, to_uri=MIRA)
    result, _, _ = await pursue(discover(), call, approve(), discover(), call, approve(), discover(),
                                finalize("done"), approve())  # fmt: skip
    assert [e.name for e in of_type(result, "tool_call")] == ["move_item"]
    assert len(of_type(result, "duplicate_tool_call")) == 1


async def test_collapsed_tools_make_a_measurably_smaller_prompt():
    names = ["set_resource_property", "add_chapter_note", "move_item"]
    expanded, _, _ = await pursue(discover(expand_tools=names), discover(), finalize("ok"), approve())
    collapsed, _, _ = await pursue(discover(), finalize("ok"), approve())
    size = {
        label: next(e.prompt_chars for e in of_type(r, "phase_end") if e.phase == "action_decision")
        for label, r in (("expanded", expanded), ("collapsed", collapsed))
    }
    print(f"\naction_decision prompt: collapsed {size['collapsed']} chars, expanded {size['expanded']} chars")
    assert size["collapsed"] < size["expanded"] - 300
    # the scripted model reports usage as a provider does: a token per 4 characters of the prompt
    ends = of_type(collapsed, "phase_end")
    assert ends and all(e.prompt_tokens == -(-e.prompt_chars // 4) for e in ends)


# --- bad answers: one corrective retry, then a clear error -------------------------------------------


async def test_a_wrong_schema_gets_one_corrective_retry():
    traces = MemoryTraceStore()
    model = scripted(
        turn("", ("DiscoveryPlan", {"search_queries": "not a list"})), discover(), finalize("ok"), approve()
    )
    context = GoalPursuitContext(chat_model=model, resource_repository=load_bundled())
    result = await run("goal_pursuit", GOAL, context=context, traces=traces)
    assert result.final is not None and model.exhausted
    first_end = of_type(result, "phase_end")[0]
    assert first_end.retries == 1
    correction = model.prompts[1][-1].text
    assert (
        "could not be used" in correction
        and "discovery_analysis" in correction
        and "search_queries" in correction
    )
    rejected = [t for t in traces.get(context.request_id) if t.type == "model_output_rejected"]
    assert len(rejected) == 1 and "search_queries" in rejected[0].details["problem"]


BAD_TWICE = {
    "wrong schema": (turn("", ("DiscoveryPlan", {"search_queries": 3})), "does not match the schema"),
    "broken JSON text": (turn('{"discovery_analysis": "x", '), "not valid JSON"),
    "empty answer": (turn(""), "the answer was empty"),
    "another tool": (
        turn("", ("move_item", {"item_uri": COMPASS})),
        "called move_item instead of DiscoveryPlan",
    ),
    "prose": (turn("I think we should look around."), "holds no JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_TWICE))
async def test_a_second_bad_answer_ends_with_one_clear_error(case: str):
    bad, reason = BAD_TWICE[case]
    result, model, _ = await pursue(bad, bad)
    assert model.exhausted
    assert kinds(result) == ["phase_start", "error"]
    error = result.error
    assert (
        error.kind == "invalid_model_output" and "DiscoveryPlan" in error.message and reason in error.message
    )
    assert "corrective retry" in error.message


async def test_json_text_answers_are_read_when_the_server_ignores_tools():
    result, model, _ = await pursue(
        turn('```json\n{"discovery_analysis": "enough"}\n```'), finalize("ok"), approve()
    )
    assert result.final is not None and model.exhausted
    assert of_type(result, "phase_end")[0].retries is None


async def test_json_mode_puts_the_schema_in_the_prompt():
    result, model, _ = await pursue(
        turn('{"discovery_analysis": "enough"}'),
        turn('{"situation_analysis": "s", "decision_type": "finalize", "finalization": {"response": "ok"}}'),
        turn('{"analysis": "a", "verdict": "approve"}'),
        structured_output="json_mode",
    )
    assert result.final.answer == "ok" and model.exhausted
    assert '"discovery_analysis"' in model.prompts[0][-1].text and "JSON" in model.prompts[0][-1].text


async def test_an_unknown_tool_or_bad_parameters_are_corrected_once_then_an_error():
    result, model, _ = await pursue(discover(), execute("delete_chapter", uri=CHAPTER),
                                    execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve(),
                                    mode="determine")  # fmt: skip
    assert result.final.operation_plan["tool"] == "move_item"
    assert "there is no tool 'delete_chapter'" in model.prompts[2][-1].text
    assert "move_item" in model.prompts[2][-1].text
    result, _, _ = await pursue(
        discover(), execute("move_item", item=COMPASS), execute("move_item", to_uri=MIRA)
    )
    assert result.error.kind == "invalid_model_output" and "move_item" in result.error.message


async def test_a_runaway_plan_is_corrected_before_anything_runs():
    runaway = discover(search_queries=[f"term {i}" for i in range(500)])
    result, model, _ = await pursue(
        runaway, discover(search_queries=["Grey Fox"]), discover(), finalize("ok"), approve()
    )
    assert result.final is not None and model.exhausted
    assert "at most 10 items" in model.prompts[1][-1].text
    assert [e.query for e in of_type(result, "context_update")] == ["Grey Fox"]  # none of the 500 ran


async def test_an_oversized_answer_is_refused():
    huge = turn("", ("DiscoveryPlan", {"discovery_analysis": "x" * 5000}))
    result, _, _ = await pursue(huge, huge, max_tool_args_chars=1000)
    assert result.error.kind == "invalid_model_output" and "at most 1000" in result.error.message


async def test_a_script_past_its_end_is_one_error_with_the_phase_open():
    result, _, _ = await pursue(discover())
    assert kinds(result) == ["phase_start", "phase_end", "phase_start", "error"]
    assert result.error.kind == "script"


# --- templates ---------------------------------------------------------------------------------------


async def test_templates_in_german_and_the_fallback_to_english():
    result, model, _ = await pursue(discover(), finalize("ok"), approve(), template_lang="de")
    assert result.final is not None
    assert "Bewertung" in model.prompts[0][0].text
    result, model, _ = await pursue(discover(), finalize("ok"), approve(), template_lang="fr")
    assert "Pursuit assessment" in model.prompts[0][0].text  # no French templates: English


def _template_folder(tmp_path: Path, en: list[str], de: list[str]) -> Path:
    for lang, names in (("en", en), ("de", de)):
        (tmp_path / lang).mkdir(parents=True, exist_ok=True)
        for name in names:
            text = f"{lang.upper()} {name}: {{{{ progress.iteration }}}}"
            (tmp_path / lang / name).write_text(text, encoding="utf-8")
    return tmp_path


async def test_a_template_missing_in_the_chosen_language_falls_back_to_en(tmp_path: Path):
    all_names = list(TEMPLATE_FILES.values())
    folder = _template_folder(tmp_path, en=all_names, de=["context_discovery.jinja2"])
    result, model, _ = await pursue(discover(), finalize("ok"), approve(), template_lang="de",
                                    template_dir=str(folder))  # fmt: skip
    assert result.final is not None
    assert model.prompts[0][0].text == "DE context_discovery.jinja2: 1"
    assert model.prompts[1][0].text == "EN action_decision.jinja2: 1"


def test_a_template_missing_altogether_is_a_configuration_error_at_start(tmp_path: Path):
    names = [n for n in TEMPLATE_FILES.values() if n != "refinement_analysis.jinja2"]
    folder = _template_folder(tmp_path, en=names, de=names)
    with pytest.raises(
        ConfigurationError, match=r"lack\(s\) refinement_analysis.jinja2 in both 'de' and 'en'"
    ):
        GoalPursuitContext(template_dir=str(folder), template_lang="de")
    with pytest.raises(ConfigurationError, match="not a language name"):
        GoalPursuitContext(template_lang="../en")
    assert (BUNDLED_TEMPLATES / "de" / "refinement_analysis.jinja2").is_file()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_iter": 0}, "max_iter must be at least 1"),
        ({"min_iter": 5, "max_iter": 5}, "min_iter (5) must be below max_iter (5)"),
        ({"min_iter": -1}, "min_iter must not be negative"),
        ({"resources": "/no/such/folder"}, "is not a folder"),
    ],
)
def test_bad_settings_are_refused_before_the_run(fields: dict[str, Any], message: str):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GoalPursuitContext(**fields)


async def test_a_broken_resource_folder_is_one_clear_error(tmp_path: Path):
    (tmp_path / "character").mkdir()
    (tmp_path / "character" / "bad.yaml").write_text("name: [unclosed", encoding="utf-8")
    model = scripted(discover())
    context = GoalPursuitContext(chat_model=model, resources=str(tmp_path))
    result = await run("goal_pursuit", GOAL, context=context, traces=MemoryTraceStore())
    assert kinds(result) == ["error"] and result.error.kind == "configuration"
    assert "bad.yaml" in result.error.message and str(tmp_path) not in result.error.message


async def test_an_empty_resource_folder_is_a_world_where_nothing_is_found(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Nothing here yet\n", encoding="utf-8")  # not a resource
    model = scripted(
        discover(search_queries=["Grey Fox", "compass"]),
        discover(),
        execute("add_chapter_note", chapter_uri=CHAPTER, note="The compass went back."),
        approve(),
        discover(),
        finalize("Nothing found: the repository holds no resources.", "failure"),
        approve(),
    )
    context = GoalPursuitContext(chat_model=model, resources=str(tmp_path))
    result = await run("goal_pursuit", GOAL, context=context, traces=MemoryTraceStore())
    assert model.exhausted and result.error is None, result.error
    searched = [(e.query, e.uris) for e in of_type(result, "context_update") if e.action == "searched"]
    assert searched == [("Grey Fox", []), ("compass", [])]  # the searches ran and found nothing
    [done] = of_type(result, "tool_result")  # the tool ran and refused: there is no such chapter
    assert (done.name, done.status) == ("add_chapter_note", "error") and CHAPTER in (done.error or "")
    assert kinds(result)[-1] == "final" and result.final.resolution["status"] == "failure"
    assert result.final.answer.startswith("Nothing found")
    assert len(context.repository()) == 0


async def test_a_resumed_run_keeps_what_its_tools_changed_in_the_in_memory_world(tmp_path: Path):
    spec = write_script(
        tmp_path,
        discover(), execute("move_item", item_uri=COMPASS, to_uri=MIRA), approve(),
        discover(), execute("set_resource_property", uri=COMPASS, property="location", value="res://place/port-carrow"),
        approve(), discover(), finalize("done"), approve(),
    )  # fmt: skip
    protocol = get_protocol("goal_pursuit")
    graph = protocol.compile(InMemorySaver(), pausable=True)
    config = {"configurable": {"thread_id": "resume-world"}}
    inputs: Any = {"messages": [HumanMessage(GOAL)]}
    seq, context = 0, GoalPursuitContext(model=spec)
    while True:
        # every segment gets a fresh Context, as a resume in a new process (or on the server) does
        context = GoalPursuitContext(model=spec, request_id="resume-world")
        events = [e async for e in stream_graph(protocol, graph, inputs, context, config, seq_start=seq)]
        assert events and all(e.type != "error" for e in events), events
        seq, inputs = events[-1].seq, None
        if events[-1].type == "final":
            break
    values = graph.get_state(config).values
    assert [c["name"] for c in values["resource_changes"]] == ["owner", "location"]
    fresh = GoalPursuitContext(model=spec)  # a copy of the world as a later segment would get it
    compass = (await open_repository(fresh, values)).get(COMPASS).properties
    assert compass["owner"] == MIRA  # made in the first execution, replayed into the later copies
    assert compass["location"] == "res://place/port-carrow"
    assert fresh.repository().changes == values["resource_changes"]
