"""The planner with a project's tools: the reference git MCP server and Python tools beside its domain tools,
filtered by ``[protocols.planner] tools``, called directly and as plan steps; approval before a call (a tool
the project marks ``confirm``, and the domain's destructive ones) answered with ``Command(resume=...)``;
the reviewer's own model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run, stream_graph
from phasegraph.nodes.approval import REJECTED
from phasegraph.nodes.conversation import is_rejected
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import Event
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.planning import LedgerFilter, open_planning
from tests import user_tools
from tests.helpers import scripted, turn
from tests.tool_projects import git_repository, git_server, write_project, write_script

#: What the planner may see: two git tools, the Python tools and part of its domain (a glob).
TOOLS = ["git.git_log", "git.git_status", "word_count", "shout", "archive_everything", "*_project*", "list_*"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A workspace, and a git repository with two commits beside it."""
    (tmp_path / "workspace").mkdir()
    git_repository(tmp_path / "repo")
    return tmp_path


@pytest.fixture
def archived() -> Iterator[list[str]]:
    """What archive_everything archived during the test (empty at its start, restored after it)."""
    before = list(user_tools.ARCHIVED)
    user_tools.ARCHIVED.clear()  # other tests of the process archive too
    yield user_tools.ARCHIVED
    user_tools.ARCHIVED[:] = before


def project(folder: Path, **more: Any) -> Path:
    """A project file naming the git server and the Python tools of tests/user_tools, for the planner."""
    data: dict[str, Any] = {
        "workspace": str(folder / "workspace"),
        **{k: v for k, v in more.items() if k in ("model", "models")},
        "protocols": {"planner": {"tools": TOOLS}},
        "mcp_servers": {"git": git_server(folder / "repo")},
        "python_tools": {"count": "tests.user_tools:word_count", "mine": "tests.user_tools:TOOLS"},
        "tools": {"archive_everything": {"confirm": True}},
    }
    return write_project(folder, data)


_OPENED: list[PlannerContext] = []


@pytest.fixture(autouse=True)
async def closed_at_the_end() -> Any:
    """Every Context a test made is closed after it (its store, any MCP session left open)."""
    yield
    while _OPENED:
        await _OPENED.pop().aclose()


def context_of(folder: Path, model: ScriptedChatModel | None, **fields: Any) -> PlannerContext:
    chosen = {"chat_model": model} if model is not None else {}
    context = PlannerContext(
        project_file=str(project(folder, **fields.pop("project", {}))),
        database=f"sqlite:{folder / 'planner.db'}",
        **chosen,
        **({"show_tool_outputs": True} | fields),
    )
    _OPENED.append(context)
    return context


async def stream(graph: Any, graph_input: Any, context: PlannerContext, config: Any) -> list[Event]:
    spec = get_protocol("planner")
    return [
        e async for e in stream_graph(spec, graph, graph_input, context, config, traces=MemoryTraceStore())
    ]


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def with_orbit(folder: Path) -> None:
    """The domain's project Orbit, active, in the planner's database."""
    store = open_planning(f"sqlite:{folder / 'planner.db'}")
    await store.ensure_schema()
    await store.domain.create_project("default", "Orbit", "product-launch")
    await store.close()


async def orbit_status(folder: Path) -> str:
    store = open_planning(f"sqlite:{folder / 'planner.db'}")
    try:
        return (await store.domain.get_project("default", "orbit")).status
    finally:
        await store.close()


async def test_project_tools_sit_beside_the_domain_tools_and_run_for_real(folder: Path):
    repo = str(folder / "repo")
    model = scripted(
        turn("", ("git.git_log", {"repo_path": repo}), ("word_count", {"text": "three small words"})),
        turn("", ("git.git_log", {"repo_path": str(folder / "workspace")})),  # not a repository: an error
        turn("Two commits, three words."),
    )
    context, config = context_of(folder, model), {"configurable": {"thread_id": "t1"}}
    graph = get_protocol("planner").compile(InMemorySaver())
    events = await stream(graph, {"messages": [HumanMessage("What is in the history?")]}, context, config)

    assert not of(events, "error") and events[-1].type == "final"
    [session] = of(events, "session")
    domain, mcp, meta = session.tools[:9], session.tools[9:11], session.tools[11:]
    assert domain == [
        "list_templates", "create_project", "list_projects", "list_tasks", "audit_project", "archive_project",
        "word_count", "shout", "archive_everything",
    ]  # fmt: skip
    assert sorted(mcp) == ["git.git_log", "git.git_status"]  # in the server's order
    assert meta == ["agent_create_plan", "agent_execute_plan"]
    ok, failed = of(events, "tool_result")[:2], of(events, "tool_result")[2]
    assert [(e.name, e.status) for e in ok] == [("git.git_log", "ok"), ("word_count", "ok")]
    assert "second commit" in ok[0].output and "first commit" in ok[0].output
    assert ok[1].output == "3 words"
    assert (failed.name, failed.status) == ("git.git_log", "error")
    # the model read both results on its next step
    read = "\n".join(m.text for m in model.prompts[1])
    assert "second commit" in read and "3 words" in read
    store = open_planning(context.database)
    try:
        usage = (await store.ledger.usage(LedgerFilter(request_id=context.request_id))).rows
        errors = (await store.ledger.errors(LedgerFilter(request_id=context.request_id))).rows
    finally:
        await store.close()
    assert len(usage) == 3 and {r.operation_type for r in usage} == {"planner_stream"}
    assert [(r.stage, r.kind, r.tool_name) for r in errors] == [
        ("tool_execution", "tool_error", "git.git_log")
    ]
    with pytest.raises(ConfigurationError, match="not open"):  # the turn's end closed its MCP sessions
        context.registry()


async def test_a_plan_runs_project_tools_as_its_steps(folder: Path):
    steps = [
        {"id": "s1", "tool": "git.git_log", "args": {"repo_path": str(folder / "repo"), "max_count": 1},
         "rationale": "the last commit", "depends_on": []},
        {"id": "s2", "tool": "shout", "args": {"text": "ship it"}, "rationale": "say it",
         "depends_on": ["s1"]},
    ]  # fmt: skip
    model = scripted(
        turn(
            "",
            ("agent_create_plan", {"objective": "Report the last commit", "execution_mode": "auto_execute"}),
        ),
        turn("", ("PlanDraft", {"reasoning": "log, then shout", "steps": steps})),
        turn("Done."),
    )
    context = context_of(folder, model)
    result = await run("planner", "Report it", context=context, traces=MemoryTraceStore())

    assert [(e.step_id, e.tool, e.status) for e in of(result.events, "step_complete")] == [
        ("s1", "git.git_log", "ok"),
        ("s2", "shout", "ok"),
    ]
    outputs = [e.output for e in of(result.events, "tool_result")]
    assert "second commit" in outputs[0] and "first commit" not in outputs[0] and outputs[1] == "SHIP IT"
    # the drafting call was shown the project tools with their parameters
    assert "git.git_log" in model.prompts[1][0].text and "repo_path" in model.prompts[1][0].text
    assert result.final is not None and result.final.answer == "Done."


async def until_approval(
    folder: Path, model: ScriptedChatModel, message: str, **fields: Any
) -> tuple[Any, PlannerContext, Any, list[Event]]:
    """Run a turn on a checkpointed graph until it waits for an approval."""
    graph = get_protocol("planner").compile(InMemorySaver())
    context, config = context_of(folder, model, **fields), {"configurable": {"thread_id": "t1"}}
    events = await stream(graph, {"messages": [HumanMessage(message)]}, context, config)
    assert [e.type for e in events][-1] == "approval_requested"
    return graph, context, config, events


async def waiting_on(graph: Any, config: Any) -> dict[str, Any]:
    snapshot = await graph.aget_state(config)
    [waiting] = snapshot.interrupts
    assert waiting.value["type"] == "approval"
    return dict(waiting.value)


def archive_everything(*after: dict[str, Any]) -> ScriptedChatModel:
    return scripted(turn("", ("archive_everything", {"reason": "tidy up"})), *after)


async def test_a_confirm_tool_waits_and_runs_once_approved(folder: Path, archived: list[str]):
    model = archive_everything(turn("Archived."))
    graph, context, config, asked = await until_approval(folder, model, "Tidy up")
    assert not of(asked, "tool_call")  # asked before anything of the call
    value = await waiting_on(graph, config)
    assert value["call"]["name"] == "archive_everything" and value["call"]["args"] == {"reason": "tidy up"}
    assert (await graph.aget_state(config)).next == ("run_tools",)
    assert archived == []

    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["tidy up"]
    assert [e.type for e in events][:3] == ["approval_answered", "agent_state", "tool_call"]
    [result] = of(events, "tool_result")
    assert (result.status, result.output) == ("ok", "archived (tidy up)")
    assert events[-1].type == "final" and events[-1].answer == "Archived."


async def test_an_edited_call_runs_with_the_edited_arguments(folder: Path, archived: list[str]):
    model = archive_everything(turn("Archived the old ones."))
    graph, context, config, _ = await until_approval(folder, model, "Tidy up")

    edit = {"decision": "edit", "args": {"reason": "only old"}}
    events = await stream(graph, Command(resume=edit), context, config)

    assert archived == ["only old"]
    [call] = of(events, "tool_call")
    assert call.args == {"reason": "only old"}
    read = model.prompts[1][-1].text  # the model reads that a person changed its call, and the result
    assert '{"reason": "only old"}' in read and "archived (only old)" in read


async def test_a_bad_edit_asks_again_saying_why(folder: Path, archived: list[str]):
    graph, context, config, _ = await until_approval(folder, archive_everything(turn("Done.")), "Tidy up")

    events = await stream(graph, Command(resume={"decision": "edit", "args": {"all": True}}), context, config)

    assert "reason" in (await waiting_on(graph, config))["problem"] and archived == []
    assert not of(events, "tool_call")


async def test_a_rejected_call_never_runs_and_the_model_reads_why(folder: Path, archived: list[str]):
    model = archive_everything(turn("I left the files alone."))
    graph, context, config, _ = await until_approval(folder, model, "Tidy up")

    answer = {"decision": "reject", "reason": "the archive is shared"}
    events = await stream(graph, Command(resume=answer), context, config)

    assert archived == []
    [result] = of(events, "tool_result")
    assert result.status == "error" and "the archive is shared" in (result.error or "")
    assert "the archive is shared" in model.prompts[1][-1].text
    assert events[-1].type == "final" and events[-1].answer == "I left the files alone."


async def test_a_destructive_domain_call_waits_and_a_rejection_holds_when_the_model_asks_again(folder: Path):
    """The issue's regression: after "No! Do not archive it." the model called archive_project again, and it
    ran."""
    await with_orbit(folder)
    again = turn("", ("archive_project", {}))
    model = scripted(again, again, turn("Orbit stays active."))
    graph, context, config, _ = await until_approval(
        folder, model, "Archive Orbit", context_type="project", entity_id="orbit"
    )
    assert (await waiting_on(graph, config))["call"]["name"] == "archive_project"

    no = {"decision": "reject", "reason": "No! Do not archive it."}
    events = await stream(graph, Command(resume=no), context, config)

    # the model made the call again: it waits again, and has not run
    assert (await waiting_on(graph, config))["call"]["name"] == "archive_project"
    assert [e.status for e in of(events, "tool_result")] == ["error"]
    assert "No! Do not archive it." in model.prompts[1][-1].text
    assert await orbit_status(folder) == "active"

    events = await stream(graph, Command(resume="reject"), context, config)

    assert await orbit_status(folder) == "active"
    assert [e.status for e in of(events, "tool_result")] == ["error"]
    assert events[-1].type == "final" and events[-1].answer == "Orbit stays active."


async def test_a_destructive_domain_call_runs_once_approved(folder: Path):
    await with_orbit(folder)
    model = scripted(turn("", ("archive_project", {})), turn("Orbit is archived."))
    graph, context, config, _ = await until_approval(
        folder, model, "Archive Orbit", context_type="project", entity_id="orbit"
    )
    events = await stream(graph, Command(resume={"decision": "approve"}), context, config)
    assert [(e.name, e.status) for e in of(events, "tool_result")] == [("archive_project", "ok")]
    assert await orbit_status(folder) == "archived"


async def test_a_step_with_several_waiting_calls_asks_all_before_running_any(
    folder: Path, archived: list[str]
):
    await with_orbit(folder)
    model = scripted(
        turn(
            "",
            ("word_count", {"text": "a b"}),
            ("archive_everything", {"reason": "r"}),
            ("archive_project", {}),
        ),
        turn("One of two."),
    )
    graph, context, config, asked = await until_approval(
        folder, model, "Count, then archive both", context_type="project", entity_id="orbit"
    )
    assert not of(asked, "tool_call")
    assert (await waiting_on(graph, config))["call"]["name"] == "archive_everything"

    events = await stream(graph, Command(resume="approve"), context, config)

    assert (await waiting_on(graph, config))["call"]["name"] == "archive_project"
    assert not of(events, "tool_call") and archived == []  # nothing ran while an answer was missing

    events = await stream(graph, Command(resume="reject"), context, config)

    assert [(e.name, e.status) for e in of(events, "tool_result")] == [
        ("word_count", "ok"), ("archive_everything", "ok"), ("archive_project", "error"),
    ]  # fmt: skip
    assert archived == ["r"] and await orbit_status(folder) == "active"


async def test_a_plan_step_that_waits_asks_before_it_starts(folder: Path, archived: list[str]):
    steps = [
        {"id": "s1", "tool": "word_count", "args": {"text": "a b c"}, "rationale": "", "depends_on": []},
        {"id": "s2", "tool": "archive_everything", "args": {"reason": "plan"}, "rationale": "",
         "depends_on": []},
        {"id": "s3", "tool": "archive_everything", "args": {"reason": "after s2"}, "rationale": "",
         "depends_on": ["s2"]},
    ]  # fmt: skip
    model = scripted(
        turn("", ("agent_create_plan", {"objective": "Count and archive"})),
        turn("", ("PlanDraft", {"reasoning": "", "steps": steps})),
        turn("The archive step was rejected."),
    )
    graph, context, config, events = await until_approval(folder, model, "Count and archive")
    assert [e.step_id for e in of(events, "step_complete")] == ["s1"]
    assert [e.step_id for e in of(events, "step_start")] == ["s1"]  # s2 waits before it starts

    events = await stream(graph, Command(resume={"decision": "reject", "reason": "not now"}), context, config)

    assert archived == []
    done, skipped = of(events, "step_complete")
    assert (done.step_id, done.status) == ("s2", "error") and "not now" in done.summary
    assert (skipped.step_id, skipped.status) == ("s3", "skipped")  # a skipped step asks nothing
    assert not of(events, "approval_requested") and events[-1].type == "final"


async def test_a_rejected_plan_step_is_recorded_as_rejected_not_as_ran(folder: Path, archived: list[str]):
    steps = [{"id": "s1", "tool": "archive_everything", "args": {"reason": "plan"}, "rationale": "",
              "depends_on": []}]  # fmt: skip
    model = scripted(
        turn("", ("agent_create_plan", {"objective": "Archive"})),
        turn("", ("PlanDraft", {"reasoning": "", "steps": steps})),
        turn("Nothing was archived."),
    )
    graph, context, config, _ = await until_approval(folder, model, "Archive", show_tool_outputs=False)

    await stream(graph, Command(resume={"decision": "reject", "reason": "not now"}), context, config)

    assert archived == []
    messages = (await graph.aget_state(config)).values["messages"]
    [step] = [m for m in messages if m.type == "tool" and m.name == "archive_everything"]
    assert is_rejected(step) and step.text == REJECTED.format(reason="not now")  # not "ran: error"


async def test_the_reviewer_uses_its_own_model_from_the_project_file(folder: Path):
    steps = [{"id": "s1", "tool": "list_templates", "args": {}, "rationale": "", "depends_on": []}]
    plan = turn("", ("agent_create_plan", {"objective": "List", "execution_mode": "agent_review"}))
    planner = write_script(folder, [plan, turn("", ("PlanDraft", {"reasoning": "", "steps": steps})),
                                    turn("unused: the reviewer answers this call"), turn("Listed.")],
                           name="planner.json")  # fmt: skip
    verdict = turn("", ("PlanVerdict", {"verdict": "approved", "notes": "Fine."}))
    reviewer = write_script(folder, [turn("-"), turn("-"), verdict], name="reviewer.json")
    models = {"model": f"scripted:{planner}", "models": {"planner.reviewer": f"scripted:{reviewer}"}}
    context = context_of(folder, None, project=models)
    result = await run("planner", "List the templates", context=context, traces=MemoryTraceStore())

    assert [(e.verdict, e.notes) for e in of(result.events, "plan_review")] == [("approved", "Fine.")]
    assert result.final is not None and result.final.answer == "Listed."
    store = open_planning(context.database)
    try:
        rows = (await store.ledger.usage(LedgerFilter(request_id=context.request_id))).rows
    finally:
        await store.close()
    models_by_operation = {(r.operation_type, r.model) for r in rows}
    assert ("plan_review", "scripted:reviewer.json") in models_by_operation
    assert ("plan_create", "scripted:planner.json") in models_by_operation


async def test_a_rejected_call_made_again_is_asked_again_and_uses_none_of_the_tool_calls(
    folder: Path, archived: list[str]
):
    limit = PlannerContext.max_tool_calls  # the default: 8 a turn
    shouts = [("shout", {"text": f"word {n}"}) for n in range(limit - 1)]
    model = archive_everything(
        turn("", ("archive_everything", {"reason": "tidy up"})),
        turn("", *shouts),
        turn("Archived and shouted."),
    )
    graph, context, config, _ = await until_approval(folder, model, "Tidy up")
    await stream(graph, Command(resume={"decision": "reject", "reason": "ask me again"}), context, config)
    value = await waiting_on(graph, config)  # made again, the call is asked again: it never ran
    assert value["call"]["args"] == {"reason": "tidy up"}

    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["tidy up"]
    ran = [(e.name, e.status) for e in of(events, "tool_result")]
    assert ran == [
        ("archive_everything", "ok"),
        *[("shout", "ok")] * (limit - 1),
    ]  # 8 of 8: the rejection none
    assert events[-1].type == "final" and events[-1].answer == "Archived and shouted."
    state = (await graph.aget_state(config)).values
    assert state["tool_calls_used"] == limit
    assert [is_rejected(m) for m in state["messages"] if m.type == "tool"] == [True, *[False] * limit]
