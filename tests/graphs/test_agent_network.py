"""agent_network on scripted models: the seed's loop, logs, epochs, injection, refusals and budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run, stream_graph
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import AgentStep, ErrorEvent, Final, Route, ToolCall, ToolResultEvent
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools import default_registry
from phasegraph.tools.networks import compile_network, open_network_store, parse_definition
from tests.helpers import kinds, of_type, scripted, turn

QUESTION = "Who works on the streaming server, and which roadmap milestone covers streaming?"
#: A marker placed past the 100 characters a log preview keeps: only a full output shows it.
HIDDEN = "SECRET-MARKER-ONLY-IN-FULL-OUTPUT"


def decide(action: str, reasoning: str = "because", **details: Any) -> dict[str, Any]:
    args = {"action": action, "action_reasoning": reasoning, "action_details": details}
    return turn("", ("AgentDecision", args))


def tool(name: str, **params: Any) -> dict[str, Any]:
    return decide("USE_TOOL", tool=name, params=params)


def route(target: str, message: str = "over to you") -> dict[str, Any]:
    return decide("ROUTE_TO_AGENT", target_agent=target, message=message)


def answer(text: str) -> dict[str, Any]:
    return decide("RESPOND", message=text)


PAIR = {
    "name": "pair",
    "agents": [
        {
            "key": "reader",
            "is_default": True,
            "prompt_template": "You are {agent_key}. Tools:\n{tools}\nRoutes:\n{routes}",
            "tools": [{"tool": "read_file"}, {"tool": "search_files", "agent_params": ["query"]}],
            "routes": ["speaker"],
        },
        {
            "key": "speaker",
            "description": "Answers.",
            "prompt_template": "You are {agent_key}.\n{tool_history}\nRoutes:\n{routes}",
            "tools": [{"tool": "list_files"}],
            "routes": ["reader"],
            "allow_respond": True,
        },
    ],
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("alpha " * 30 + HIDDEN + "-A\n", encoding="utf-8")
    (root / "docs" / "b.md").write_text("beta " * 30 + HIDDEN + "-B\n", encoding="utf-8")
    (root / "notes.md").write_text("stream notes\n", encoding="utf-8")
    return root


def network_file(tmp_path: Path, network: dict[str, Any] = PAIR) -> str:
    path = tmp_path / f"{network['name']}.yaml"
    path.write_text(yaml.safe_dump(network), encoding="utf-8")
    return str(path)


async def run_network(
    tmp_path: Path, workspace: Path, *turns: dict[str, Any], **fields: Any
) -> tuple[RunResult, AgentNetworkContext]:
    fields.setdefault("network_file", network_file(tmp_path))
    context = AgentNetworkContext(chat_model=scripted(*turns), workspace=str(workspace), **fields)
    result = await run("agent_network", fields.pop("message", "read a and answer"), context=context,
                       traces=MemoryTraceStore())  # fmt: skip
    return result, context


def prompts(result: RunResult) -> dict[int, str]:
    """The prompt each step sent, from the trace."""
    return {e.details["step"]: e.details["prompt"] for e in result.trace if e.type == "agent_prompt"}


async def final_state(
    context: AgentNetworkContext, *turns: dict[str, Any]
) -> tuple[RunResult, dict[str, Any]]:
    spec = get_protocol("agent_network")
    graph = spec.compile(InMemorySaver())
    config: Any = {"configurable": {"thread_id": context.request_id}}
    result = RunResult()
    inputs = {"messages": [("user", "read a and answer")]}
    async for event in stream_graph(spec, graph, inputs, context, config, traces=MemoryTraceStore()):
        result.events.append(event)
    return result, (await graph.aget_state(config)).values


async def test_demo_hands_control_from_triage_to_researcher_to_writer():
    traces = MemoryTraceStore()
    result = await run("agent_network", QUESTION, traces=traces)
    assert kinds(result) == [
        "agent_step", "route",
        "agent_step", "tool_call", "tool_result",
        "agent_step", "tool_call", "tool_result",
        "agent_step", "route",
        "agent_step", "final",
    ]  # fmt: skip
    steps = of_type(result, "agent_step")
    assert [(e.step, e.agent, e.epoch) for e in steps] == [
        (1, "triage", 1), (2, "researcher", 2), (3, "researcher", 2), (4, "researcher", 2), (5, "writer", 3),
    ]  # fmt: skip
    assert [(e.from_agent, e.to_agent, e.epoch) for e in of_type(result, "route")] == [
        ("triage", "researcher", 2),
        ("researcher", "writer", 3),
    ]
    final = result.final
    assert final is not None and final.agent == "writer" and "Linus" in final.answer
    # the researcher's search was confined to docs/ by the network's system parameter
    search = of_type(result, "tool_call")[0]
    assert search.name == "search_files" and search.args == {"query": "stream", "path": "docs"}


async def test_seed_loop_use_tool_route_respond_logs_epochs_and_execution_ids(tmp_path, workspace):
    context = AgentNetworkContext(
        chat_model=scripted(
            tool("read_file", path="docs/a.md"), route("speaker", "a.md read"), answer("alpha it is")
        ),
        workspace=str(workspace),
        network_file=network_file(tmp_path),
        max_steps=3,
    )
    result, state = await final_state(context)
    assert isinstance(result.events[-1], Final) and result.events[-1].agent == "speaker"
    log = state["execution_log"]
    assert [(e["type"], e["step"], e["epoch"], e["agent_key"]) for e in log] == [
        ("agent", 1, 1, "reader"),
        ("tool", 1, 1, "reader"),
        ("agent", 2, 1, "reader"),
        ("agent", 3, 2, "speaker"),
    ]
    first, used = log[0], log[1]
    assert first["input_preview"] == "read a and answer"
    assert first["decision"]["action"] == "USE_TOOL" and len(first["decision"]["action_reasoning"]) <= 120
    assert log[2]["decision"]["action_details"] == '{"target_agent": "speaker", "message": "a.md read"}'
    assert used["tool_key"] == "read_file" and used["status"] == "ok"
    assert len(used["request_preview"]) <= 50 and len(used["response_preview"]) <= 100
    assert HIDDEN not in used["response_preview"]  # previews are cut; the payload is whole
    payload = state["tool_execution_log"][used["execution_id"]]
    assert payload["agent_key"] == "reader" and payload["merged_params"] == {"path": "docs/a.md"}
    assert HIDDEN + "-A" in payload["result"] and payload["status"] == "ok"
    # the events name the same execution id
    call = next(e for e in result.events if isinstance(e, ToolCall))
    done = next(e for e in result.events if isinstance(e, ToolResultEvent))
    assert call.execution_id == done.execution_id == used["execution_id"]
    assert [i["action"] for i in state["instructions"]] == ["USE_TOOL", "ROUTE_TO_AGENT", "RESPOND"]
    assert state["control_epoch"] == 2 and state["responder"] == "speaker"


async def test_an_agent_sees_full_outputs_of_its_own_current_epoch_only(tmp_path, workspace):
    result, _ = await run_network(
        tmp_path, workspace,
        tool("read_file", path="docs/a.md"),  # 1 reader, epoch 1
        tool("read_file", path="docs/b.md"),  # 2 reader, epoch 1: sees a.md in full
        route("speaker"),  # 3 reader, epoch 1: sees a.md and b.md
        route("reader", "read b again"),  # 4 speaker, epoch 2: sees neither
        tool("read_file", path="docs/b.md"),  # 5 reader, epoch 3: not epoch 1's outputs
        route("speaker"),  # 6 reader, epoch 3: its new b.md only
        answer("done"),  # 7 speaker, epoch 4
    )  # fmt: skip
    assert result.final is not None
    sent = prompts(result)
    assert HIDDEN + "-A" in sent[2] and HIDDEN + "-B" not in sent[2]
    assert HIDDEN + "-A" in sent[3] and HIDDEN + "-B" in sent[3]
    assert HIDDEN not in sent[4]  # the speaker never saw the reader's outputs
    assert HIDDEN not in sent[5]  # back with the reader: epoch 1 is over
    assert HIDDEN + "-B" in sent[6] and HIDDEN + "-A" not in sent[6]
    assert HIDDEN not in sent[7]
    assert "read b again" in sent[5]  # the handoff note goes with control
    assert "Execution log" in sent[4]  # the summary is there, as previews
    sizes = [e.prompt_chars for e in of_type(result, "agent_step")]
    assert all(size > 0 for size in sizes) and sizes[1] > sizes[0]


async def test_tool_history_placeholder_places_the_context(tmp_path, workspace):
    result, _ = await run_network(tmp_path, workspace, route("speaker"), answer("ok"))
    speaker = prompts(result)[2]
    assert speaker.index("## Context") < speaker.index("Routes:") < speaker.index("## Constraints")
    assert "{tool_history}" not in speaker


@pytest.mark.parametrize(
    ("decision", "refused"),
    [
        (tool("list_files"), "reader has no tool 'list_files'"),
        (tool("search_files", query="x", path="/etc"), "may not provide path to search_files"),
        (route("nobody"), "reader cannot route to 'nobody'"),
        (answer("too early"), "reader may not respond"),
    ],
)
async def test_a_decision_outside_the_agents_limits_is_refused_and_fed_back(
    tmp_path, workspace, decision, refused
):
    result, _ = await run_network(tmp_path, workspace, decision, route("speaker"), answer("ok"))
    first, second = of_type(result, "agent_step")[:2]
    assert first.refused is not None and refused in first.refused
    assert second.refused is None
    assert not of_type(result, "tool_call")  # nothing of the refused decision ran
    assert refused in prompts(result)[2]  # the agent read why
    assert result.final is not None


async def test_system_parameters_are_merged_into_what_the_agent_provides(tmp_path, workspace):
    result, _ = await run_network(
        tmp_path, workspace, tool("search_files", query="stream"), route("speaker"), answer("ok"),
        system_params={"path": "docs", "ignored": 1}, show_tool_outputs=True,
    )  # fmt: skip
    call, done = of_type(result, "tool_call")[0], of_type(result, "tool_result")[0]
    assert call.args == {"query": "stream", "path": "docs"}  # "ignored" is no parameter of search_files
    assert done.output == "no matches for 'stream'"  # notes.md, outside docs/, was not searched


async def test_max_steps_ends_the_run_with_an_error_carrying_the_transcript(tmp_path, workspace):
    loop = [route("speaker"), route("reader")] * 2
    result, _ = await run_network(tmp_path, workspace, *loop, max_steps=4)
    assert kinds(result)[-2:] == ["budget_exhausted", "error"]
    budget = of_type(result, "budget_exhausted")[0]
    assert (budget.budget, budget.limit, budget.used) == ("steps", 4, 4)
    error = result.error
    assert error is not None and error.kind == "budget_exhausted" and result.final is None
    assert error.transcript is not None and [e["step"] for e in error.transcript] == [1, 2, 3, 4]
    assert sum(isinstance(e, ErrorEvent) for e in result.events) == 1


async def test_max_tool_errors_counts_failed_tools_and_refusals(tmp_path, workspace):
    result, _ = await run_network(
        tmp_path, workspace,
        tool("read_file", path="missing.md"),  # fails
        route("nobody"),  # refused
        tool("read_file", path="../outside"),  # fails: outside the workspace
        max_tool_errors=3,
    )  # fmt: skip
    budget = of_type(result, "budget_exhausted")[0]
    assert (budget.budget, budget.used) == ("tool_errors", 3)
    error = result.error
    assert error is not None and error.transcript is not None
    statuses = [e.get("status") for e in error.transcript if e["type"] == "tool"]
    assert statuses == ["error", "error"]
    assert any(e.get("refused") for e in error.transcript)


async def test_malformed_decisions_get_one_corrective_retry_then_an_error(tmp_path, workspace):
    retried, _ = await run_network(
        tmp_path, workspace, turn("{not json"), route("speaker"), answer("ok"),
    )  # fmt: skip
    assert retried.final is not None and of_type(retried, "agent_step")[0].retries == 1
    incomplete, _ = await run_network(tmp_path, workspace, decide("USE_TOOL"), route("speaker"), answer("ok"))
    assert incomplete.final is not None and of_type(incomplete, "agent_step")[0].retries == 1
    failed, _ = await run_network(tmp_path, workspace, turn(""), decide("RESPOND", message=" "))
    assert kinds(failed) == ["error"] and failed.error is not None
    assert failed.error.kind == "invalid_model_output"
    assert [t.type for t in failed.trace].count("model_output_rejected") == 2


async def test_published_networks_run_by_name_and_version(tmp_path, workspace):
    store = open_network_store("memory")

    async def publish(**changes: Any) -> int:
        definition = parse_definition(yaml.safe_dump({**PAIR, "name": "pinned", **changes}))
        return (await store.publish("default", compile_network(definition, default_registry()))).version

    first = await publish()
    assert await publish() == first  # the same definition again: no new version
    latest = await publish(description="v2")
    assert latest == first + 1
    for version, expected in ((0, latest), (first, first)):
        context = AgentNetworkContext(
            chat_model=scripted(answer("hi")), workspace=str(workspace), network="pinned",
            network_version=version, agent_key="speaker", database="memory",
        )  # fmt: skip
        _, state = await final_state(context)
        assert state["network"]["version"] == expected and state["responder"] == "speaker"
    for name, version, problem in (
        ("nope", 0, "publish it first"),
        ("pinned", 99, f"its latest is {latest}"),
    ):
        missing = AgentNetworkContext(
            chat_model=scripted(answer("unused")), workspace=str(workspace), network=name,
            network_version=version, database="memory",
        )  # fmt: skip
        result = await run("agent_network", "hi", context=missing)
        assert kinds(result) == ["error"] and result.error is not None and result.error.kind == "not_found"
        assert problem in result.error.message


async def test_bad_settings_are_configuration_errors(tmp_path, workspace):
    for fields, problem in [
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"network_version": 2}, "network_version needs a network name"),
        ({"network_version": -1, "network": "x"}, "must not be negative"),
    ]:
        with pytest.raises(ConfigurationError, match=problem):
            AgentNetworkContext(workspace=str(workspace), **fields)
    broken = AgentNetworkContext(
        chat_model=scripted(answer("unused")), workspace=str(workspace),
        network_file=str(Path(__file__).parents[2] / "tools" / "networks" / "examples" / "broken.yaml"),
    )  # fmt: skip
    result = await run("agent_network", "hi", context=broken)
    assert result.error is not None and result.error.kind == "configuration"
    assert "cannot be published" in result.error.message
    wrong_start = AgentNetworkContext(
        chat_model=scripted(answer("unused")),
        workspace=str(workspace),
        network_file=network_file(tmp_path),
        agent_key="ghost",
    )
    result = await run("agent_network", "hi", context=wrong_start)
    assert result.error is not None and "no agent 'ghost'" in result.error.message


async def test_a_paused_run_resumes_without_running_a_finished_tool_again(tmp_path, workspace):
    spec = get_protocol("agent_network")
    graph = spec.compile(InMemorySaver(), pausable=True)
    model = scripted(tool("read_file", path="docs/a.md"), route("speaker"), answer("done"))
    context = AgentNetworkContext(
        chat_model=model, workspace=str(workspace), network_file=network_file(tmp_path)
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    events = [e async for e in stream_graph(spec, graph, {"messages": [("user", "go")]}, context, config)]
    assert [e.type for e in events] == ["agent_step", "tool_call", "tool_result"]
    assert (await graph.aget_state(config)).next == ("run_agent_step",)
    while (await graph.aget_state(config)).next:
        events += [e async for e in stream_graph(spec, graph, None, context, config, seq_start=len(events))]
    assert sum(isinstance(e, ToolCall) for e in events) == 1
    assert isinstance(events[-1], Final) and model.exhausted
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(isinstance(e, AgentStep | Route | ToolCall | ToolResultEvent | Final) for e in events)


async def test_an_answer_resting_on_failed_tools_only_says_so(tmp_path, workspace):
    failed, _ = await run_network(
        tmp_path, workspace, tool("read_file", path="missing.md"), route("speaker"), answer("guessing")
    )
    assert failed.final is not None and failed.final.all_tools_failed
    worked, _ = await run_network(
        tmp_path, workspace, tool("read_file", path="docs/a.md"), route("speaker"), answer("alpha")
    )
    assert worked.final is not None and not worked.final.all_tools_failed


async def test_an_oversized_decision_is_corrected_once_then_ends_the_run(tmp_path, workspace):
    huge = decide("ROUTE_TO_AGENT", "x" * 500, target_agent="speaker")
    corrected, _ = await run_network(
        tmp_path, workspace, huge, route("speaker"), answer("ok"), max_tool_args_chars=300
    )
    assert corrected.final is not None and of_type(corrected, "agent_step")[0].retries == 1
    failed, _ = await run_network(tmp_path, workspace, huge, huge, max_tool_args_chars=300)
    assert kinds(failed) == ["error"] and failed.error is not None
    assert failed.error.kind == "invalid_model_output" and "at most 300 are accepted" in failed.error.message


async def test_a_tool_the_run_does_not_offer_is_an_error_result_not_a_crash(tmp_path, workspace):
    definition = parse_definition(yaml.safe_dump({**PAIR, "name": "unoffered"}))
    await open_network_store("memory").publish("default", compile_network(definition, default_registry()))
    fewer = ["list_files", "search_files"]  # the published network has read_file; this run does not
    context = AgentNetworkContext(
        chat_model=scripted(tool("read_file", path="docs/a.md"), route("speaker"), answer("ok")),
        workspace=str(workspace), network="unoffered", database="memory", tools=fewer,
    )  # fmt: skip
    result = await run("agent_network", "go", context=context)
    done = of_type(result, "tool_result")[0]
    assert done.status == "error" and "read_file" in (done.error or "")
    assert result.final is not None and result.final.all_tools_failed


async def test_a_conversation_without_a_user_message_is_refused_clearly(tmp_path, workspace):
    spec = get_protocol("agent_network")
    context = AgentNetworkContext(chat_model=scripted(answer("unused")), workspace=str(workspace))
    events = [e async for e in stream_graph(spec, spec.compile(), {"messages": [("ai", "hello")]}, context)]
    assert [e.type for e in events] == ["error"] and "no user message" in events[0].message


async def test_a_step_run_again_names_its_tool_call_as_before(tmp_path, workspace):
    # A finished call is found again by its id when its step re-runs after a crash; an id drawn at
    # random each time would make the re-run call the tool a second time.
    def attempt() -> AgentNetworkContext:
        return AgentNetworkContext(
            chat_model=scripted(tool("read_file", path="docs/a.md"), answer("alpha it is")),
            workspace=str(workspace), network_file=network_file(tmp_path), max_steps=2, request_id="req-same",
        )  # fmt: skip

    first, again = [(await final_state(attempt()))[1]["tool_execution_log"] for _ in range(2)]
    assert list(first) == list(again) and len(first) == 1
    other = AgentNetworkContext(
        chat_model=scripted(tool("read_file", path="docs/a.md"), answer("alpha it is")),
        workspace=str(workspace), network_file=network_file(tmp_path), max_steps=2, request_id="req-other",
    )  # fmt: skip
    assert list((await final_state(other))[1]["tool_execution_log"]) != list(first)  # another request's own
