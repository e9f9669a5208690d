"""xml_contract on scripted models against the demo MCP server, started as a real subprocess."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run, stream_graph
from phasegraph.nodes.dataset import export, read_lines, run_file
from phasegraph.nodes.events import Final, ToolCall, ToolResultEvent, XmlBlock
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.contract import CUT_IN_THOUGHT, EMPTY, read_proposal
from tests.helpers import kinds, of_type, scripted, turn

TASK = "Summarise the roadmap and say who is on the team."


def echo(text: str, ms: int) -> str:
    return f"<demo><slow_echo><text>{text}</text><ms>{ms}</ms></slow_echo></demo>"


async def run_xml(
    tmp_path: Path, workspace: Path, *answers: str, **fields: Any
) -> tuple[RunResult, ScriptedChatModel]:
    model = scripted(*(turn(a) for a in answers))
    fields.setdefault("dataset_dir", str(tmp_path / "dataset"))
    context = XmlContractContext(chat_model=model, workspace=str(workspace), **fields)
    return await run("xml_contract", TASK, context=context, traces=MemoryTraceStore()), model


def observations(model: ScriptedChatModel) -> list[str]:
    """What the model read back after each call: the last message of each later prompt."""
    return [prompt[-1].text for prompt in model.prompts[1:]]


async def test_demo_reads_in_parallel_then_substitutes_in_sequence(tmp_path, workspace):
    result = await run("xml_contract", TASK, workspace=str(workspace), dataset_dir=str(tmp_path / "ds"))
    assert kinds(result) == [
        "phase_start", "phase_end",
        "phase_start", "xml_block", "tool_call", "tool_call", "tool_result", "tool_result", "phase_end",
        "phase_start", "phase_end",
        "phase_start", "xml_block", "tool_call", "tool_result", "tool_call", "tool_result", "phase_end",
        "phase_start", "phase_end", "final",
    ]  # fmt: skip
    blocks = of_type(result, "xml_block")
    assert [(b.kind, b.group, len(b.steps)) for b in blocks] == [
        ("parallel", "1.1", 2),
        ("sequential", "2.1", 2),
    ]
    calls = of_type(result, "tool_call")
    assert [(c.name, c.step_index, c.group) for c in calls] == [
        ("demo.read_file", 1, "1.1"), ("demo.read_file", 2, "1.1"),
        ("demo.calculate", 1, "2.1"), ("demo.slow_echo", 2, "2.1"),
    ]  # fmt: skip
    assert calls[3].args == {"text": "3 people work on the project", "ms": 50}  # $result_of_step_1 replaced
    assert all(r.status == "ok" for r in of_type(result, "tool_result"))
    assert result.final is not None and result.final.answer.startswith("The roadmap has two milestones")
    request = result.events[0].request_id
    lines = (run_file(tmp_path / "ds", "xml_contract", request)).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["iteration"] for r in records] == [1, 2]
    first = records[0]
    assert first["state"][0]["role"] == "system" and first["state"][-1] == {"role": "user", "content": TASK}
    assert first["action"].rstrip().endswith("</parallel>")  # cut at <execute_tools />
    assert first["observation"].count("<result ") == 2 and "Milestone 1" in first["observation"]
    assert records[1]["state"][-1]["content"] == first["observation"]  # the next state holds the result
    assert set(first["timings"]) == {"model_ms", "tools_ms"}
    out = tmp_path / "export.jsonl"
    assert export(tmp_path / "ds", out, protocol="xml_contract") == {"xml_contract": 2}
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == records
    assert list(read_lines(tmp_path / "ds", since=datetime.fromisoformat("2999-01-01T00:00:00+00:00"))) == []


async def test_a_parallel_block_of_four_half_second_calls_takes_under_a_second(tmp_path, workspace):
    block = "<parallel>" + "".join(echo(f"e{i}", 500) for i in range(4)) + "</parallel><execute_tools />"
    result, _ = await run_xml(tmp_path, workspace, block, "Final Answer: echoed")
    started = of_type(result, "xml_block")[0].ts
    results = of_type(result, "tool_result")
    assert len(results) == 4 and all(r.status == "ok" and r.duration_ms >= 500 for r in results)
    wall = (max(r.ts for r in results) - started).total_seconds()
    assert wall < 1.0, f"the block took {wall:.2f} s for 4 x 500 ms"


async def test_stop_sequences_cut_the_answer_and_an_invented_result_is_never_read(tmp_path, workspace):
    answer = "<demo><read_file>docs/team.md</read_file></demo><execute_tools />NOT-READ <result>fake</result>"
    _, model = await run_xml(tmp_path, workspace, answer, "Final Answer: done")
    assert model.stats[0].stopped_by == "<execute_tools />"
    assert "NOT-READ" not in model.prompts[1][-2].text and "fake" not in "".join(
        m.text for m in model.prompts[1]
    )
    invented = "<demo><read_file>docs/team.md</read_file></demo>\n<result>Ada is the only one</result>"
    _, model = await run_xml(tmp_path, workspace, invented, "Final Answer: done")
    assert model.stats[0].stopped_by == "<result>"  # the block before it still runs
    assert "Ada is the only one" not in observations(model)[0] and "Linus" in observations(model)[0]


@pytest.mark.parametrize(
    "signal", ["<execute_tools  />", '<execute_tools foo="1"/>', "< execute_tools />", "</execute_tools>"]
)
async def test_nothing_after_the_execute_signal_runs_whatever_its_spelling(tmp_path, workspace, signal):
    after = "<demo><calculate>1 + 1</calculate></demo><parallel><demo><always_fails/></demo></parallel>"
    answer = f"<demo><calculate>6 * 7</calculate></demo>{signal}{after}<execute_tools />"
    result, model = await run_xml(tmp_path, workspace, answer, "Final Answer: 42")
    assert model.stats[0].stopped_by == "<execute_tools />"  # only the later one: the calls between were sent
    ran = [(c.name, c.args) for c in of_type(result, "tool_call")]
    assert ran == [("demo.calculate", {"expression": "6 * 7"})]
    assert len(of_type(result, "xml_block")) == 1 and ">42<" in observations(model)[0]
    assert "1 + 1" not in model.prompts[1][-2].text  # the history keeps the answer as cut
    assert result.final is not None and result.final.answer == "42"


async def test_an_answer_is_read_off_the_event_loop(tmp_path, workspace):
    """However long a model answer, reading it never holds the event loop other requests share."""
    loop_thread, readers = threading.get_ident(), []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is read_proposal.__code__:
            readers.append(threading.get_ident())

    sys.setprofile(profile)  # this thread's calls: the event loop's
    try:
        result, _ = await run_xml(tmp_path, workspace, "<x>" * 8000 + echo("read", 1), "Final Answer: done")
    finally:
        sys.setprofile(None)
    assert [c.name for c in of_type(result, "tool_call")] == ["demo.slow_echo"]  # the answer was read
    assert loop_thread not in readers


async def test_complete_blocks_without_the_signal_still_run(tmp_path, workspace):
    result, model = await run_xml(
        tmp_path, workspace, "<demo><calculate>6 * 7</calculate></demo>", "Final Answer: 42"
    )
    assert model.stats[0].stopped_by is None
    assert of_type(result, "tool_result")[0].status == "ok" and ">42<" in observations(model)[0]
    assert result.final is not None and result.final.answer == "42"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("<demo><launch>x</launch></demo>", "unknown tool"),
        ("<nowhere><x>1</x></nowhere>", "unknown service &lt;nowhere&gt;"),
        ("<demo><slow_echo><text>x</text><ms>later</ms></slow_echo></demo>", "is not of type"),
        ("<sequential>" + echo("$result_of_step_2", 1) + echo("b", 1) + "</sequential>", "points forward"),
        ("<demo><read_file>a</read_file>", "is never closed"),
        ('<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><demo><read_file>&xxe;</read_file></demo>',
         "declares a DTD or entities"),
    ],
)  # fmt: skip
async def test_a_broken_block_is_answered_with_an_error_result_and_the_run_goes_on(
    tmp_path, workspace, answer, problem
):
    result, model = await run_xml(
        tmp_path, workspace, answer, "<demo><calculate>1+1</calculate></demo>", "Final Answer: 2"
    )
    errors = of_type(result, "validation_error")
    assert len(errors) == 1 and errors[0].problems
    assert problem in observations(model)[0] and 'status="error"' in observations(model)[0]
    assert [e.name for e in of_type(result, "tool_call")] == [
        "demo.calculate"
    ]  # nothing of the bad block ran
    assert result.final is not None and result.final.answer == "2"


async def test_a_failing_tool_does_not_stop_its_parallel_neighbours(tmp_path, workspace):
    block = "<parallel><demo><always_fails/></demo>" + echo("still here", 10) + "</parallel>"
    result, model = await run_xml(tmp_path, workspace, block, "Final Answer: ok")
    finished = {r.step_index: r.status for r in of_type(result, "tool_result")}  # in the order they finished
    assert finished == {1: "error", 2: "ok"}
    seen = observations(model)[0]
    assert seen.index('step="1"') < seen.index('step="2"') and "still here" in seen  # block order


async def test_the_step_budget_ends_with_one_tool_less_answer(tmp_path, workspace):
    calls = [f"<demo><calculate>{i} + 1</calculate></demo>" for i in range(2)]
    result, model = await run_xml(tmp_path, workspace, *calls, "Final Answer: I counted to 2.", max_steps=2)
    assert [(b.budget, b.limit, b.used) for b in of_type(result, "budget_exhausted")] == [("steps", 2, 2)]
    assert result.final is not None and result.final.answer == "I counted to 2."
    last = model.prompts[-1]
    assert "No more tools will run" in last[-1].text and model.exhausted


async def test_a_paused_run_resumes_without_running_a_block_again(tmp_path, workspace):
    spec = get_protocol("xml_contract")
    graph = spec.compile(InMemorySaver(), pausable=True)
    model = scripted(turn(echo("once", 1)), turn("Final Answer: done"))
    context = XmlContractContext(chat_model=model, workspace=str(workspace), dataset_dir="")
    config: Any = {"configurable": {"thread_id": "xml-pause"}}
    try:
        events = [e async for e in stream_graph(spec, graph, {"messages": [("user", "go")]}, context, config)]
        assert (await graph.aget_state(config)).next == ("propose_action",)
        events += [e async for e in stream_graph(spec, graph, None, context, config, seq_start=len(events))]
    finally:
        await context.aclose()
    assert sum(isinstance(e, ToolCall) for e in events) == 1 and isinstance(events[-1], Final)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert any(isinstance(e, XmlBlock) for e in events) and any(
        isinstance(e, ToolResultEvent) for e in events
    )


async def test_an_answer_resting_on_failed_calls_only_says_so(tmp_path, workspace):
    failed, _ = await run_xml(tmp_path, workspace, "<demo><always_fails/></demo>", "Final Answer: sorry")
    assert failed.final is not None and failed.final.all_tools_failed
    mixed, _ = await run_xml(
        tmp_path,
        workspace,
        "<parallel><demo><always_fails/></demo>" + echo("ok", 1) + "</parallel>",
        "Final Answer: half",
    )
    assert mixed.final is not None and not mixed.final.all_tools_failed


async def test_an_answer_cut_inside_its_thinking_is_sent_back_not_taken_as_final(tmp_path, workspace):
    thinking = "<think>I read the team file, then write <execute_tools /> and wait.</think>"
    call = "<demo><read_file>docs/team.md</read_file></demo><execute_tools />"
    final = "Final Answer: Ada, Linus and Grace"
    result, model = await run_xml(tmp_path, workspace, thinking + call, call, final)
    assert [e.problems for e in of_type(result, "validation_error")] == [[CUT_IN_THOUGHT]]
    assert "the answer stopped inside &lt;think&gt;" in observations(model)[0]  # escaped, as results are
    assert result.final is not None and result.final.answer == "Ada, Linus and Grace"


async def test_the_budget_answer_ignores_final_answer_written_while_thinking(tmp_path, workspace):
    last = "<think>The ask says to start with Final Answer: so I will.</think>\nFinal Answer: 2"
    result, _ = await run_xml(
        tmp_path, workspace, "<demo><calculate>1+1</calculate></demo>", last, max_steps=1
    )
    assert result.final is not None and result.final.answer == "2"


async def test_two_answers_in_a_row_that_cannot_run_end_with_one_tool_less_answer(tmp_path, workspace):
    broken = "<demo><read_file>a</read_file>"  # never closed
    result, model = await run_xml(
        tmp_path,
        workspace,
        broken,
        "<nowhere><x>1</x></nowhere>",
        "Final Answer: I could not read it.",
        max_steps=8,
    )
    assert len(of_type(result, "validation_error")) == 2 and not of_type(result, "tool_call")
    assert not of_type(result, "budget_exhausted")  # not the budget: the one correction was used
    assert "could not be run" in model.prompts[-1][-1].text and model.exhausted
    assert result.final is not None and result.final.answer == "I could not read it."


async def test_an_empty_answer_gets_a_correction(tmp_path, workspace):
    result, _ = await run_xml(tmp_path, workspace, "", "Final Answer: here it is")
    assert [e.problems for e in of_type(result, "validation_error")] == [[EMPTY]]
    assert result.final is not None and result.final.answer == "here it is"


async def test_a_failed_run_closes_its_services_even_when_nobody_closes_its_context(workspace):
    spec = get_protocol("xml_contract")
    context = XmlContractContext(
        chat_model=scripted(turn(echo("one", 1))), workspace=str(workspace), dataset_dir=""
    )  # its script ends before the run does
    with pytest.raises(Exception, match="has no turn 2"):
        async for _ in spec.compile().astream({"messages": [("user", "go")]}, context=context):
            pass  # driven as langgraph dev drives it: no driver closes the Context
    assert context._opened is None  # the sessions (and the demo server's process) are gone
