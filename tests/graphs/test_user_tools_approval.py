"""Approval before a tool runs, graph level: a thread waits in an interrupt; ``Command(resume=...)`` answers.

``archive_everything`` (``tests.user_tools``) has ``confirm = true``; ``ARCHIVED`` records each time it
really ran, so a rejected call that ran anyway would show there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run, stream_graph, turn_input
from phasegraph.nodes.approval import AwaitingAnswer
from phasegraph.nodes.conversation import is_rejected
from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Event
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from tests import user_tools
from tests.helpers import metric_points, scripted, turn
from tests.tool_checks import left_running
from tests.tool_projects import demo_server, write_project

PROTOCOLS = ["triggered_phase", "unified"]
ARCHIVE = ("archive_everything", {"reason": "tidy"})
CONFIRMED = {
    "python_tools": {"mine": "tests.user_tools:TOOLS"},
    "tools": {"archive_everything": {"confirm": True}},
}


class Thread:
    """One checkpointed thread of a protocol, driven turn by turn as a client would."""

    def __init__(self, protocol: str, folder: Path, workspace: Path, model: ScriptedChatModel, **more: Any):
        self.spec = get_protocol(protocol)
        self.graph = self.spec.compile(InMemorySaver())
        path = write_project(folder, {"model": "scripted:demo", **CONFIRMED, **more})
        self.context = self.spec.make_context(
            project_file=str(path), workspace=str(workspace), chat_model=model
        )
        self.config: Any = {"configurable": {"thread_id": "approval"}}
        self.events: list[Event] = []

    async def send(self, graph_input: Any) -> list[Event]:
        """Run until the thread ends or waits; the events of this stretch."""
        found = [
            e
            async for e in stream_graph(
                self.spec, self.graph, graph_input, self.context, self.config, traces=MemoryTraceStore()
            )
        ]
        self.events += found
        return found

    async def start(self) -> dict[str, Any]:
        """Send the user's message; the approval question the thread then waits in."""
        await self.send({"messages": [HumanMessage("Tidy the project.")]})
        question = await self.waiting()
        assert question is not None, [e.type for e in self.events]
        return question

    async def answer(self, answer: Any) -> list[Event]:
        """Resume the waiting thread with ``answer``."""
        return await self.send(Command(resume=answer))

    async def waiting(self) -> dict[str, Any] | None:
        """The interrupt the thread waits in, if any."""
        snapshot = await self.graph.aget_state(self.config)
        return snapshot.interrupts[0].value if snapshot.interrupts else None

    def of(self, kind: str) -> list[Any]:
        """The events of one type so far."""
        return [e for e in self.events if e.type == kind]

    @property
    def answer_text(self) -> str | None:
        """The final answer, once there is one."""
        final = self.of("final")
        return final[-1].answer if final else None


_threads: list[Thread] = []


@pytest.fixture(autouse=True)
async def _closed_after() -> AsyncIterator[None]:
    """Every thread's MCP sessions end with its test, passed or not."""
    yield
    while _threads:
        await _threads.pop().context.aclose()


def _thread(protocol: str, tmp_path: Path, workspace: Path, *turns: dict[str, Any], **more: Any) -> Thread:
    _threads.append(Thread(protocol, tmp_path, workspace, scripted(*turns), **more))
    return _threads[-1]


def _read(thread: Thread) -> str:
    """What the model read on its last call."""
    model = thread.context.chat_model
    assert isinstance(model, ScriptedChatModel)
    return "\n".join(str(m.content) for m in model.prompts[-1])


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_approve_runs_the_call_once_after_the_answer(protocol: str, tmp_path: Path, workspace: Path):
    before = len(user_tools.ARCHIVED)
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("Archived."))
    question = await thread.start()
    assert question["type"] == "approval" and question["call"]["name"] == "archive_everything"
    assert question["call"]["args"] == {"reason": "tidy"} and "confirm" in question["reason"]
    assert len(user_tools.ARCHIVED) == before and thread.of("tool_call") == []  # nothing ran yet
    (asked,) = thread.of("approval_requested")
    assert (asked.name, asked.args, asked.call_id) == (
        "archive_everything",
        {"reason": "tidy"},
        question["call"]["id"],
    )
    await thread.answer("approve")
    assert user_tools.ARCHIVED[before:] == ["tidy"]
    (answered,) = thread.of("approval_answered")
    assert (answered.decision, answered.call_id) == ("approve", asked.call_id)
    assert [(r.name, r.status) for r in thread.of("tool_result")] == [("archive_everything", "ok")]
    assert thread.answer_text == "Archived." and await thread.waiting() is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_edit_runs_the_edited_arguments(protocol: str, tmp_path: Path, workspace: Path):
    before = len(user_tools.ARCHIVED)
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("Archived."))
    await thread.start()
    await thread.answer({"decision": "edit", "args": {"reason": "edited"}})
    assert user_tools.ARCHIVED[before:] == ["edited"]
    assert [c.args for c in thread.of("tool_call")] == [{"reason": "edited"}]
    assert [(a.decision, a.args) for a in thread.of("approval_answered")] == [("edit", {"reason": "edited"})]
    assert thread.answer_text == "Archived."


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("edit", [{"bogus": 1}, {"reason": 5}, {}], ids=["unknown", "wrong-type", "missing"])
async def test_a_bad_edit_asks_again_saying_why_and_never_runs(
    protocol: str, edit: dict[str, Any], tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("Not archived."))
    first = await thread.start()
    await thread.answer({"decision": "edit", "args": edit})
    again = await thread.waiting()
    assert again is not None and again["call"] == first["call"]
    assert again["problem"].startswith("the edited arguments do not fit archive_everything: ")
    assert thread.of("tool_call") == [] and thread.of("approval_answered") == []
    assert [a.problem for a in thread.of("approval_requested")] == [None, again["problem"]]
    await thread.answer({"decision": "reject", "reason": "never mind"})
    assert len(user_tools.ARCHIVED) == before
    assert thread.answer_text == "Not archived."


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_reject_never_runs_and_the_model_reads_the_reason(
    protocol: str, tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("I left it."))
    await thread.start()
    await thread.answer({"decision": "reject", "reason": "the archive is frozen today"})
    assert len(user_tools.ARCHIVED) == before
    (result,) = thread.of("tool_result")
    assert result.status == "error" and "the archive is frozen today" in result.error
    assert "A person rejected this call; it did not run. Their reason: the archive is frozen today" in _read(
        thread
    )
    assert thread.answer_text == "I left it."


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_turn_whose_only_call_was_rejected_is_not_one_whose_tools_all_failed(
    protocol: str, tmp_path: Path, workspace: Path
):
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("I left it."))
    await thread.start()
    await thread.answer("reject")
    (final,) = thread.of("final")
    assert final.answer == "I left it." and not final.all_tools_failed  # no tool ran, so none failed


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_rejected_call_is_no_tool_call_of_the_metrics(
    protocol: str, tmp_path: Path, workspace: Path, reader
):
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("", ARCHIVE), turn("Archived."))
    await thread.start()
    await thread.answer("reject")
    await thread.answer("approve")

    assert [e.not_run for e in thread.of("tool_result")] == ["rejected", None]
    points = metric_points(reader)["phasegraph.tool.calls"]
    assert [(p.attributes["phasegraph.status"], p.value) for p in points] == [("ok", 1)]  # the one that ran


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("answer", "archived"),
    [
        ({"decisions": [{"type": "approve"}]}, ["tidy"]),
        ({"decisions": [{"type": "edit", "edited_action": {"name": ARCHIVE[0], "args": {"reason": "hitl"}}}]},
         ["hitl"]),
        ({"decisions": [{"type": "reject", "message": "not now"}]}, []),
    ],
    ids=["approve", "edit", "reject"],
)  # fmt: skip
async def test_langchains_human_in_the_loop_answer_shape(
    protocol: str, answer: dict[str, Any], archived: list[str], tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    thread = _thread(protocol, tmp_path, workspace, turn("", ARCHIVE), turn("Answered."))
    await thread.start()
    await thread.answer(answer)
    assert user_tools.ARCHIVED[before:] == archived
    assert [a.decision for a in thread.of("approval_answered")] == [answer["decisions"][0]["type"]]
    assert thread.answer_text == "Answered."


def _everything_read(thread: Thread) -> str:
    """Everything the model read on every call."""
    model = thread.context.chat_model
    assert isinstance(model, ScriptedChatModel)
    return "\n".join(str(m.content) for prompt in model.prompts for m in prompt)


#: Each protocol's default per-turn tool budget, with the budget event that says it ran out.
DEFAULT_BUDGETS = {"triggered_phase": ("cycles", 3), "unified": ("tool_calls", 8)}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_rejected_call_proposed_again_asks_again_and_the_retry_ends_within_the_default_budget(
    protocol: str, tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    budget, limit = DEFAULT_BUDGETS[protocol]
    shouts = [turn("", ("shout", {"text": f"word {n}"})) for n in range(limit - 1)]
    script = [turn("", ARCHIVE), turn("", ARCHIVE), *shouts, turn("Archived, then shouted.")]
    thread = _thread(protocol, tmp_path, workspace, *script)
    first = await thread.start()
    await thread.answer({"decision": "reject", "reason": "say why first"})
    again = await thread.waiting()  # the same call made again is asked again: it never ran
    assert again is not None and (again["call"]["name"], again["call"]["args"]) == ARCHIVE
    assert again["call"]["id"] != first["call"]["id"]
    await thread.answer("approve")
    assert user_tools.ARCHIVED[before:] == ["tidy"]
    assert [a.decision for a in thread.of("approval_answered")] == ["reject", "approve"]
    assert thread.of("duplicate_tool_call") == [] and "already executed" not in _everything_read(thread)
    # the rejection used none of the budget: the retried call and every shout ran, then the answer came
    assert [(r.name, r.status) for r in thread.of("tool_result")] == [
        ("archive_everything", "error"), ("archive_everything", "ok"), *[("shout", "ok")] * (limit - 1),
    ]  # fmt: skip
    assert [(b.budget, b.used, b.limit) for b in thread.of("budget_exhausted")] == [(budget, limit, limit)]
    assert thread.answer_text == "Archived, then shouted."
    answers = [
        m for m in (await thread.graph.aget_state(thread.config)).values["messages"] if m.type == "tool"
    ]
    assert [is_rejected(m) for m in answers] == [True, *[False] * limit]  # the thread says it was rejected


async def test_an_edited_calls_original_is_asked_again_and_only_what_ran_is_a_duplicate(
    tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    edited = ("archive_everything", {"reason": "edited"})
    thread = _thread(
        "triggered_phase", tmp_path, workspace,
        turn("", ARCHIVE), turn("", ARCHIVE), turn("", edited), turn("Both archived."),
    )  # fmt: skip
    await thread.start()
    await thread.answer({"decision": "edit", "args": {"reason": "edited"}})
    again = await thread.waiting()  # the original never ran: proposed again, it is a new call, asked
    assert again is not None and again["call"]["args"] == {"reason": "tidy"}
    await thread.answer("approve")
    assert user_tools.ARCHIVED[before:] == ["edited", "tidy"]
    (duplicate,) = thread.of("duplicate_tool_call")  # the edited call did run: proposing it again is refused
    assert (duplicate.name, duplicate.args) == edited
    assert len(thread.of("approval_requested")) == 2
    assert thread.answer_text == "Both archived."


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_no_mcp_server_runs_while_the_thread_waits(protocol: str, tmp_path: Path, workspace: Path):
    before = len(user_tools.ARCHIVED)
    calculate = ("demo.calculate", {"expression": "6 * 7"})
    thread = _thread(
        protocol, tmp_path, workspace, turn("", calculate), turn("", ARCHIVE), turn("Done."),
        mcp_servers={"demo": demo_server()},
    )  # fmt: skip
    await thread.start()
    assert [(r.name, r.status) for r in thread.of("tool_result")] == [("demo.calculate", "ok")]  # it ran
    assert left_running("phasegraph.tools.mcp.demo_server") == []
    await thread.answer("approve")
    assert user_tools.ARCHIVED[before:] == ["tidy"] and thread.answer_text == "Done."
    await thread.context.aclose()
    assert left_running("phasegraph.tools.mcp.demo_server") == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_mcp_tool_waits_by_its_servers_rule_and_an_edit_is_checked_against_its_json_schema(
    protocol: str, tmp_path: Path, workspace: Path
):
    calculate = ("demo.calculate", {"expression": "6 * 7"})
    thread = _thread(
        protocol, tmp_path, workspace, turn("", calculate), turn("Done."),
        mcp_servers={"demo": demo_server()}, tools={"demo": {"confirm": True}},
    )  # fmt: skip
    question = await thread.start()
    assert question["call"]["name"] == "demo.calculate"
    await thread.answer({"decision": "edit", "args": {"expression": 5}})
    again = await thread.waiting()
    assert again is not None
    assert again["problem"] == (
        "the edited arguments do not fit demo.calculate: "
        "invalid arguments: expression: 5 is not of type 'string'"
    )
    assert thread.of("tool_call") == []
    await thread.answer({"decision": "edit", "args": {"expression": "2 + 2"}})
    assert [(c.name, c.args) for c in thread.of("tool_call")] == [("demo.calculate", {"expression": "2 + 2"})]
    assert [r.status for r in thread.of("tool_result")] == ["ok"]
    assert thread.answer_text == "Done."


async def test_two_calls_of_one_unified_message_are_each_asked_before_either_runs(
    tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    second = ("archive_everything", {"reason": "again"})
    thread = _thread("unified", tmp_path, workspace, turn("", ARCHIVE, second), turn("One archived."))
    first = await thread.start()
    await thread.answer("approve")
    then = await thread.waiting()
    assert then is not None and then["call"]["args"] == {"reason": "again"} and then["call"] != first["call"]
    assert len(user_tools.ARCHIVED) == before and thread.of("tool_call") == []  # neither ran yet
    await thread.answer({"decision": "reject", "reason": "once is enough"})
    assert user_tools.ARCHIVED[before:] == ["tidy"]
    assert [(a.args["reason"], a.decision) for a in thread.of("approval_answered")] == [
        ("tidy", "approve"),
        ("again", "reject"),
    ]
    assert [a.call_id for a in thread.of("approval_requested")] == [first["call"]["id"], then["call"]["id"]]
    assert sorted(r.status for r in thread.of("tool_result")) == ["error", "ok"]
    assert thread.answer_text == "One archived."


async def test_a_rejected_call_does_not_count_toward_max_calls_per_turn(tmp_path: Path, workspace: Path):
    before = len(user_tools.ARCHIVED)
    policy = {"archive_everything": {"confirm": True, "max_calls_per_turn": 1}}
    other = ("archive_everything", {"reason": "other"})
    thread = _thread(
        "triggered_phase", tmp_path, workspace, turn("", ARCHIVE), turn("", other), turn("Ok."), tools=policy
    )
    await thread.start()
    await thread.answer("reject")
    assert await thread.waiting() is not None  # the second call is asked: the first never ran
    await thread.answer("approve")
    assert user_tools.ARCHIVED[before:] == ["other"]


@pytest.mark.parametrize("message", ["Approve", "What would it archive?"])
async def test_a_new_message_on_a_waiting_thread_is_refused_never_read_as_the_answer(
    message: str, tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    thread = _thread("unified", tmp_path, workspace, turn("", ARCHIVE), turn("Archived."))
    await thread.start()
    with pytest.raises(AwaitingAnswer, match="waits for an approval of its call 'archive_everything'"):
        await turn_input(thread.graph, thread.config, message, "approval")
    assert len(user_tools.ARCHIVED) == before and await thread.waiting() is not None


async def test_an_answer_to_a_thread_that_waits_for_none_is_refused(workspace: Path):
    with pytest.raises(ConflictError, match="waits for no answer"):
        await run("unified", "", thread_id="idle", checkpointer=InMemorySaver(), resume="approve",
                  workspace=str(workspace), traces=MemoryTraceStore())  # fmt: skip


@pytest.mark.parametrize(
    "answer",
    ["x" * 900_000, {"decision": "y" * 900_000}, {"decision": "edit", "args": {"reason": ["z" * 900_000]}}],
    ids=["words", "decision", "edit"],
)
async def test_a_huge_wrong_answer_is_not_echoed_in_the_question_asked_again(
    answer: Any, tmp_path: Path, workspace: Path
):
    before = len(user_tools.ARCHIVED)
    thread = _thread("unified", tmp_path, workspace, turn("", ARCHIVE), turn("Archived."))
    await thread.start()
    await thread.answer(answer)
    again = thread.of("approval_requested")[-1]
    assert again.problem is not None and 0 < len(again.problem) < 1_000, len(again.problem or "")
    waiting = await thread.waiting()
    assert waiting is not None and waiting["problem"] == again.problem
    assert len(user_tools.ARCHIVED) == before
