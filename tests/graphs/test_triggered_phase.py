"""triggered_phase on scripted models: event order, every budget rule, duplicates, errors, trace."""

from pathlib import Path
from typing import Literal, get_args, get_origin

from langchain_core.messages import SystemMessage

from phasegraph.nodes.events import Event, parse_event
from tests.helpers import kinds, of_type, scripted, turn, write_script

DEMO_ORDER = [
    "phase_start", "text", "phase_end",                      # action phase 1 → list_files
    "phase_start", "tool_call", "tool_result", "phase_end",  # tool phase 2
    "phase_start", "text", "phase_end",                      # action phase 3 → read_file
    "phase_start", "tool_call", "tool_result", "phase_end",  # tool phase 4
    "phase_start", "duplicate_tool_call", "text", "phase_end",  # action phase 5: refusal, then answer
    "final",
]  # fmt: skip


async def test_demo_script_event_order_and_phase_metadata(collect):
    result = await collect("triggered_phase")
    assert kinds(result) == DEMO_ORDER
    meta = [(e.type, e.phase, e.phase_index, e.cycle_index) for e in result.events if e.type != "text"]
    assert meta == [
        ("phase_start", "action_phase", 1, 1),
        ("phase_end", "action_phase", 1, 1),
        ("phase_start", "tool_phase", 2, 1),
        ("tool_call", "tool_phase", 2, 1),
        ("tool_result", "tool_phase", 2, 1),
        ("phase_end", "tool_phase", 2, 1),
        ("phase_start", "action_phase", 3, 1),
        ("phase_end", "action_phase", 3, 1),
        ("phase_start", "tool_phase", 4, 2),
        ("tool_call", "tool_phase", 4, 2),
        ("tool_result", "tool_phase", 4, 2),
        ("phase_end", "tool_phase", 4, 2),
        ("phase_start", "action_phase", 5, 2),
        ("duplicate_tool_call", "action_phase", 5, 2),
        ("phase_end", "action_phase", 5, 2),
        ("final", "complete", 5, 2),
    ]
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    request_ids = {e.request_id for e in result.events}
    assert len(request_ids) == 1 and "" not in request_ids
    assert {(e.project_id, e.protocol) for e in result.events} == {("default", "triggered_phase")}
    assert result.final.answer.startswith("The roadmap has two milestones.")
    assert [e.name for e in of_type(result, "tool_call")] == ["list_files", "read_file"]


async def test_action_phase_end_reports_the_cut_stream(collect):
    result = await collect("triggered_phase")
    first_end = of_type(result, "phase_end")[0]
    assert first_end.reason == "tool_call" and first_end.stream_cut is True
    words = len(["Let", "me", "see", "what", "is", "in", "the", "docs", "folder."])
    header_and_pieces = 1 + -(-len('{"path": "docs"}') // 6)
    assert first_end.chunks_read == words + header_and_pieces


async def test_tool_results_reach_the_next_phase_as_system_messages(collect):
    model = scripted(turn("", ("read_file", {"path": "docs/team.md"})), turn("Ada, Linus and Grace."))
    result = await collect("triggered_phase", "Who is on the team?", chat_model=model)
    second_prompt = model.prompts[1]
    assert [type(m).__name__ for m in second_prompt] == ["SystemMessage", "SystemMessage", "HumanMessage"]
    assert "Result of tool call read_file(path='docs/team.md') [ok]" in second_prompt[1].content
    assert "Grace: tooling and CI" in second_prompt[1].content
    assert result.final.answer == "Ada, Linus and Grace."


async def test_tool_outputs_only_when_asked_but_always_in_the_trace(collect):
    hidden = await collect("triggered_phase")
    assert all(e.output is None for e in of_type(hidden, "tool_result"))
    raw = [t.details["output"] for t in hidden.trace if t.type == "tool_result"]
    assert "docs/roadmap.md\ndocs/team.md" in raw
    shown = await collect("triggered_phase", show_tool_outputs=True)
    assert of_type(shown, "tool_result")[0].output == "docs/roadmap.md\ndocs/team.md"


async def test_trace_has_every_kind_of_entry(collect):
    result = await collect("triggered_phase")
    types = [t.type for t in result.trace]
    assert types[0] == "tool_registration"
    assert result.trace[0].details["tools"][0]["name"] == "list_files"
    for needed in ("tool_call", "tool_result", "duplicate_tool_call"):
        assert needed in types
    assert types.count("orchestration_phase_start") == types.count("orchestration_phase_end") == 5
    assert {t.request_id for t in result.trace} == {result.events[0].request_id}


async def test_duplicate_by_reordered_arguments_is_refused(collect):
    model = scripted(
        turn("", ("search_files", {"query": "milestone", "path": "docs"})),
        turn("", ("search_files", {"path": " docs ", "query": "milestone"})),
        turn("Found two milestones."),
    )
    result = await collect("triggered_phase", chat_model=model)
    assert len(of_type(result, "tool_call")) == 1
    duplicate = of_type(result, "duplicate_tool_call")[0]
    assert duplicate.attempts == 1 and duplicate.args == {"path": " docs ", "query": "milestone"}
    assert "Refused" in model.prompts[2][2].content
    assert result.final.answer == "Found two milestones."


async def test_duplicate_by_path_normalisation_is_refused(collect):
    model = scripted(
        turn("", ("read_file", {"path": "docs/roadmap.md"})),
        turn("", ("read_file", {"path": "./docs/../docs/roadmap.md"})),
        turn("Done."),
    )
    result = await collect("triggered_phase", chat_model=model)
    assert len(of_type(result, "tool_call")) == 1
    assert of_type(result, "duplicate_tool_call")[0].signature == of_type(result, "tool_call")[0].signature


async def test_five_calls_in_one_message_run_only_the_first(collect):
    five = [("read_file", {"path": p}) for p in ("docs/roadmap.md", "docs/team.md", "a", "b", "c")]
    model = scripted(turn("Reading.", *five), turn("Summary."))
    result = await collect("triggered_phase", chat_model=model)
    assert [e.args for e in of_type(result, "tool_call")] == [{"path": "docs/roadmap.md"}]
    assert model.stats[0].chunks_after_first_complete_call == 0
    assert of_type(result, "phase_end")[0].stream_cut is True


async def test_five_batched_calls_record_four_ignored(collect):
    five = [("read_file", {"path": p}) for p in ("docs/roadmap.md", "docs/team.md", "a", "b", "c")]
    model = scripted(turn("", *five), turn("Summary."), tool_call_delivery="batched")
    result = await collect("triggered_phase", chat_model=model)
    assert len(of_type(result, "tool_call")) == 1
    ignored = of_type(result, "ignored_tool_call")
    assert [e.args["path"] for e in ignored] == ["docs/team.md", "a", "b", "c"]
    assert all(e.reason == "after_first_call" and e.phase == "action_phase" for e in ignored)
    assert model.stats[0].chunks_after_first_complete_call == 0


async def test_one_call_repeated_forever_runs_once_then_forces_the_answer(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("Checking.", ("list_files", {"path": "docs"})), repeat_last=True)
    result = await collect("triggered_phase", model=spec)
    assert len(of_type(result, "tool_call")) == 1
    assert [e.attempts for e in of_type(result, "duplicate_tool_call")] == [1, 2, 3, 4]
    budget = of_type(result, "budget_exhausted")
    assert [(b.budget, b.limit, b.used) for b in budget] == [("duplicates", 3, 4)]
    assert of_type(result, "ignored_tool_call")[-1].reason == "tools_unbound"
    assert kinds(result)[-1] == "final" and result.error is None
    assert result.final.answer == "Checking."


async def test_ten_distinct_calls_stop_after_three_executions(collect, tmp_path: Path):
    turns = [turn("", ("search_files", {"query": f"term{i}"})) for i in range(10)]
    result = await collect("triggered_phase", model=write_script(tmp_path, *turns))
    assert len(of_type(result, "tool_call")) == 3
    assert [(b.budget, b.limit, b.used) for b in of_type(result, "budget_exhausted")] == [("cycles", 3, 3)]
    final_start = [e for e in of_type(result, "phase_start") if e.final]
    assert len(final_start) == 1 and final_start[0].cycle_index == 3
    assert of_type(result, "ignored_tool_call")[0].reason == "tools_unbound"
    final = result.final
    assert final.fallback is True
    assert final.answer.startswith("I could not produce a final answer; here is what the tools returned:")
    assert "search_files(query='term2') [ok]" in final.answer


async def test_budget_notice_is_sent_with_tools_unbound(collect):
    model = scripted(turn("", ("list_files", {})), turn("Ok."))
    result = await collect("triggered_phase", chat_model=model, max_phase_cycles_per_turn=1)
    assert len(of_type(result, "tool_call")) == 1
    last_prompt = model.prompts[-1]
    assert model.exhausted and len(model.prompts) == 2
    assert isinstance(last_prompt[-2], SystemMessage)
    assert last_prompt[-2].content.startswith("Tool budget reached; answer using existing results.")
    assert result.final.answer == "Ok." and result.final.fallback is False


async def test_duplicates_do_not_spend_tool_budget(collect):
    model = scripted(
        turn("", ("list_files", {})),
        turn("", ("list_files", {"path": "."})),
        turn("", ("read_file", {"path": "docs/team.md"})),
        turn("Two calls ran."),
    )
    result = await collect("triggered_phase", chat_model=model, max_phase_cycles_per_turn=2)
    assert len(of_type(result, "tool_call")) == 2 and len(of_type(result, "duplicate_tool_call")) == 1
    assert of_type(result, "budget_exhausted")[0].budget == "cycles"
    assert result.final.answer == "Two calls ran."


async def test_tool_errors_are_results_the_model_reads(collect):
    model = scripted(
        turn("", ("read_file", {"path": "../../etc/passwd"})),
        turn("", ("nope", {})),
        turn("", ("read_file", {"file": "x"})),
        turn("I could not read those."),
    )
    result = await collect("triggered_phase", chat_model=model, max_phase_cycles_per_turn=5)
    statuses = [(e.status, e.error.split(";")[0]) for e in of_type(result, "tool_result")]
    assert statuses == [
        ("error", "path '../../etc/passwd' is outside the workspace"),
        ("error", "unknown tool 'nope'"),
        ("error", "unexpected argument(s) ['file'] for 'read_file'"),
    ]
    assert [e.reason for e in of_type(result, "phase_end") if e.phase == "tool_phase"] == ["tool_error"] * 3
    assert "ERROR: path '../../etc/passwd' is outside the workspace" in model.prompts[1][1].content
    assert result.final.answer == "I could not read those."
    assert result.final.all_tools_failed  # the answer rests on no tool output, and the event says so


async def test_a_turn_with_one_working_tool_is_not_marked_failed(collect):
    model = scripted(turn("", ("read_file", {"path": "nope.md"})), turn("", ("list_files", {})), turn("Ok."))
    result = await collect("triggered_phase", chat_model=model)
    assert [e.status for e in of_type(result, "tool_result")] == ["error", "ok"]
    assert not result.final.all_tools_failed


async def test_an_exhausted_script_ends_with_an_error_event(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {})))
    result = await collect("triggered_phase", model=spec)
    assert result.final is None
    assert kinds(result)[-1] == "error" and len(of_type(result, "error")) == 1
    assert result.error.kind == "script" and "script.json has no turn 2" in result.error.message


def test_every_event_type_round_trips_through_json():
    members = get_args(get_args(Event)[0])
    assert len(members) == 30
    for cls in members:
        required = {
            name: _sample(field.annotation) for name, field in cls.model_fields.items() if field.is_required()
        }
        event = cls(request_id="r", project_id="p", protocol="triggered_phase", seq=1, **required)
        assert parse_event(event.to_json()) == event
        assert parse_event(event.to_dict()) == event


def _sample(annotation: object) -> object:
    if annotation is str:
        return "x"
    if annotation in (int, float):
        return 1
    if get_origin(annotation) is dict:
        return {"k": 1}
    if get_origin(annotation) is Literal:
        return get_args(annotation)[0]
    if get_origin(annotation) is list:
        return [_sample(get_args(annotation)[0])]
    return {"k": 1}
