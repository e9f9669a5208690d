"""xml_contract end to end through 'openai:test-model': stop sequences, no native tool calling.

The provider is a real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py) that honours
``stop`` as providers do; the services are the bundled demo MCP server, started over stdio per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.xml_contract.action_phase import STOP_SEQUENCES
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.prompts import ANSWER_NOW, XML_CONTRACT_PROMPT, catalogue
from phasegraph.tools.mcp import ToolSpec
from phasegraph.tools.mcp.demo_server import build_server
from tests.conftest import PROVIDER_KEY
from tests.fake_openai import Reply, ToolCall, fake_openai, last_message
from tests.helpers import kinds, of_type

TASK = "Summarise the roadmap and say who is on the team."
DEMO_TOOLS = {"always_fails", "calculate", "list_files", "read_file", "slow_echo"}
TEAM = "<demo><read_file>docs/team.md</read_file></demo>\n"
SUM = "<demo><calculate>6 * 7</calculate></demo>\n"


@pytest.fixture
def provider_env(provider_env: Any) -> Any:
    """The shared provider fixture with no retries and a short timeout."""

    def configure(base_url: str) -> None:
        provider_env(base_url, PHASEGRAPH_MODEL_MAX_RETRIES="0", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="10")

    return configure


async def run_xml(tmp_path: Path, workspace: Path, **fields: Any) -> RunResult:
    """One turn through 'openai:test-model' on the demo MCP server; the training data under tmp_path."""
    fields.setdefault("dataset_dir", str(tmp_path / "dataset"))
    context = XmlContractContext(model="openai:test-model", workspace=str(workspace), **fields)
    return await run("xml_contract", TASK, context=context, traces=MemoryTraceStore())


async def expected_system_prompt(workspace: Path) -> str:
    """The contract with the catalogue built from the demo server's own MCP listing (in process)."""
    listed = await build_server(workspace).list_tools()
    tools = {t.name: ToolSpec(t.name, t.description or "", dict(t.inputSchema)) for t in listed}
    assert set(tools) == DEMO_TOOLS
    return XML_CONTRACT_PROMPT.format(catalogue=catalogue({"demo": tools}, {}))


def history(request: dict[str, Any]) -> str:
    """Everything a request shows the model, as one text."""
    return "\n".join(str(m["content"]) for m in request["messages"])


# --- the fake server honours `stop` -------------------------------------------------------------------


def stream(url: str, **request: Any) -> tuple[str, list[str], list[Any]]:
    """The streamed text, finish reasons and tool-call deltas of one request, read by the openai client."""
    client = openai.OpenAI(base_url=url, api_key=PROVIDER_KEY, max_retries=0, timeout=10)
    text, finishes = "", []
    calls: list[Any] = []
    messages: Any = [{"role": "user", "content": "go"}]
    with client.chat.completions.create(
        model="test-model", messages=messages, stream=True, **request
    ) as chunks:
        for chunk in chunks:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                calls += choice.delta.tool_calls or []
                finishes += [choice.finish_reason] if choice.finish_reason else []
    return text, finishes, calls


@pytest.mark.parametrize("stop", ["<execute_tools />", STOP_SEQUENCES])
def test_the_fake_server_cuts_the_stream_before_the_first_stop_string(stop: str | list[str]):
    text = f"{TEAM}<execute_tools />\nafter <result>invented</result>"
    planned = Reply(text=text, tool_calls=[ToolCall("f", "{}")], finish_reason="length")
    with fake_openai(planned, planned) as fake:
        cut, finishes, calls = stream(fake.url, stop=stop)
        whole, whole_finishes, whole_calls = stream(fake.url)
    assert cut == TEAM and finishes == ["stop"] and calls == []  # nothing after it, tool calls included
    assert whole == text and whole_finishes == ["length"] and len(whole_calls) > 1  # no stop: all of it
    assert fake.stopped_by == ["<execute_tools />", None]
    assert fake.requests[0]["stop"] == stop and "stop" not in fake.requests[1]


def test_the_earliest_stop_string_wins_and_an_absent_one_changes_nothing():
    text = "<think>plan</think><demo><x/></demo><result>r</result><execute_tools/>"
    with fake_openai(Reply(text=text), Reply(text="Final Answer: 42")) as fake:
        cut, finishes, _ = stream(fake.url, stop=STOP_SEQUENCES)
        plain, plain_finishes, _ = stream(fake.url, stop=STOP_SEQUENCES)
    assert cut == "<think>plan</think><demo><x/></demo>" and finishes == ["stop"]
    assert plain == "Final Answer: 42" and plain_finishes == ["stop"]
    assert fake.stopped_by == ["<result>", None]


# --- xml_contract through the provider ----------------------------------------------------------------


async def test_requests_carry_the_four_stop_sequences_no_tools_and_the_contract(
    tmp_path, workspace, provider_env
):
    replies = [Reply(text=f"{SUM}<execute_tools />"), Reply(text="Final Answer: 42")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_xml(tmp_path, workspace)
    assert result.error is None, result.error
    assert len(fake.requests) == 2
    system = await expected_system_prompt(workspace)
    for request in fake.requests:
        assert request["model"] == "test-model" and request["stream"] is True
        assert request["stop"] == STOP_SEQUENCES  # all four, in order: OpenAI takes no more
        assert "tools" not in request and "tool_choice" not in request and "response_format" not in request
        assert request["messages"][0] == {"role": "system", "content": system}
        assert request["messages"][1] == {"role": "user", "content": TASK}
    assert all(f"  {name}(" in system for name in DEMO_TOOLS)  # the catalogue lists every MCP tool
    assert [c.name for c in of_type(result, "tool_call")] == ["demo.calculate"]
    assert result.final is not None and result.final.answer == "42"


async def test_a_reply_past_the_execute_signal_is_cut_by_the_server_and_its_block_runs(
    tmp_path, workspace, provider_env
):
    past = f"{TEAM}<execute_tools />\nNOT-SENT: the team is <result>Ada alone</result>\nFinal Answer: Ada."
    with fake_openai(Reply(text=past), Reply(text="Final Answer: Ada, Linus and Grace.")) as fake:
        provider_env(fake.url)
        result = await run_xml(tmp_path, workspace)
    assert fake.stopped_by == ["<execute_tools />", None]
    assert kinds(result) == [
        "phase_start", "phase_end",
        "phase_start", "xml_block", "tool_call", "tool_result", "phase_end",
        "phase_start", "phase_end", "final",
    ]  # fmt: skip
    assert of_type(result, "tool_result")[0].status == "ok"
    second = fake.requests[1]["messages"]
    assert second[2] == {"role": "assistant", "content": TEAM}  # the model's answer as the server cut it
    observation = last_message(fake.requests[1])
    assert observation.startswith('<result step="1" service="demo" tool="read_file" status="ok">')
    assert "Linus" in observation  # the real file, read by the block
    assert "NOT-SENT" not in history(fake.requests[1]) and "Ada alone" not in history(fake.requests[1])
    assert result.final is not None and result.final.answer == "Ada, Linus and Grace."


async def test_a_final_answer_ends_the_run_with_that_answer(tmp_path, workspace, provider_env):
    answer = "<think>Nothing to look up.</think>\nFinal Answer: The roadmap has two milestones."
    with fake_openai(Reply(text=answer)) as fake:
        provider_env(fake.url)
        result = await run_xml(tmp_path, workspace)
    assert kinds(result) == ["phase_start", "phase_end", "final"]
    assert result.final is not None and result.final.answer == "The roadmap has two milestones."
    assert len(fake.requests) == 1 and fake.stopped_by == [None]
    assert not list((tmp_path / "dataset").glob("**/*.jsonl"))  # no block ran: no iteration to log


async def test_an_invented_result_is_stopped_at_and_only_the_real_one_is_read(
    tmp_path, workspace, provider_env
):
    invented = f"{SUM}<result>41</result>\nFinal Answer: 41"
    with fake_openai(Reply(text=invented), Reply(text="Final Answer: 42")) as fake:
        provider_env(fake.url)
        result = await run_xml(tmp_path, workspace)
    assert fake.stopped_by == ["<result>", None]
    second = fake.requests[1]
    assert second["messages"][2] == {"role": "assistant", "content": SUM}
    assert ">42</result>" in last_message(second) and "41" not in history(second)
    assert [(r.name, r.status) for r in of_type(result, "tool_result")] == [("demo.calculate", "ok")]
    assert result.final is not None and result.final.answer == "42"


async def test_the_spent_budget_makes_one_last_call_without_stop_sequences(tmp_path, workspace, provider_env):
    # The last reply still writes a call and the execute signal: unstopped, its answer after them is read.
    last = f"{SUM}<execute_tools />\nFinal Answer: 6 * 7 is 42."
    with fake_openai(Reply(text=f"{SUM}<execute_tools />"), Reply(text=last)) as fake:
        provider_env(fake.url)
        result = await run_xml(tmp_path, workspace, max_steps=1)
    assert len(fake.requests) == 2 and fake.stopped_by == ["<execute_tools />", None]
    first, final_call = fake.requests
    assert first["stop"] == STOP_SEQUENCES and "stop" not in final_call
    assert "tools" not in final_call and "tool_choice" not in final_call
    assert final_call["messages"][0] == first["messages"][0]  # the same contract as system prompt
    assert final_call["messages"][-1] == {"role": "user", "content": ANSWER_NOW.format(limit=1)}
    assert ">42</result>" in final_call["messages"][-2]["content"]  # the block's result before the ask
    assert [(b.budget, b.limit, b.used) for b in of_type(result, "budget_exhausted")] == [("steps", 1, 1)]
    assert len(of_type(result, "tool_call")) == 1  # the last reply's block never runs
    assert kinds(result)[-1] == "final" and result.final.answer == "6 * 7 is 42."
