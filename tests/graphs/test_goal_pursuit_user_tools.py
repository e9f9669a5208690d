"""goal_pursuit with a project's tools: real MCP servers (the demo server, the reference git server) and
Python tools beside its resource tools, expanded, chosen and executed; approval before a call; phase models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run, stream_graph
from phasegraph.nodes.conversation import is_rejected
from phasegraph.nodes.errors import ConfigurationError, ScriptError
from phasegraph.nodes.events import Event
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import load_bundled
from tests import user_tools
from tests.graphs.test_goal_pursuit import approve, discover, execute, finalize
from tests.helpers import of_type, scripted
from tests.tool_projects import demo_server, git_repository, git_server, write_project, write_script

GOAL = "Tell me what the project's history holds."


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A workspace with a file, and a git repository with two commits beside it."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    git_repository(tmp_path / "repo")
    return tmp_path


def project(folder: Path, servers: tuple[str, ...] = ("demo", "git"), **more: Any) -> Path:
    """A project file naming the demo MCP server, the git server and the Python tools of tests/user_tools.

    ``servers`` keeps some of the MCP servers (a test that needs none starts none).
    """
    entries = {"demo": demo_server(), "git": git_server(folder / "repo")}
    data: dict[str, Any] = {
        "workspace": str(folder / "workspace"),
        **{k: v for k, v in more.items() if k in ("model", "models")},
        "mcp_servers": {name: entries[name] for name in servers},
        "python_tools": {"count": "tests.user_tools:word_count", "mine": "tests.user_tools:TOOLS"},
        "tools": {"archive_everything": {"confirm": True}},
        **{k: v for k, v in more.items() if k not in ("model", "models")},
    }
    return write_project(folder, data)


def context_of(folder: Path, model: ScriptedChatModel, **fields: Any) -> GoalPursuitContext:
    return GoalPursuitContext(
        chat_model=model,
        resource_repository=load_bundled(),
        project_file=str(fields.pop("project_file", None) or project(folder)),
        show_tool_outputs=True,
        **fields,
    )


async def pursue(context: GoalPursuitContext, goal: str = GOAL) -> RunResult:
    return await run("goal_pursuit", goal, context=context, traces=MemoryTraceStore())


def tool_block(prompt: str) -> str:
    """The ``## Tools`` part of a phase prompt."""
    return prompt.split("## Tools", 1)[1].strip().split("\n\n", 1)[0]


@pytest.mark.parametrize(
    ("tool", "params", "expected"),
    [
        ("git.git_log", None, "second commit"),  # the reference git server (params: the repository)
        ("demo.calculate", {"expression": "6 * 7"}, "42"),  # the bundled demo MCP server
        ("demo.read_file", {"path": "notes.txt"}, "hello from the workspace"),  # on ${workspace}
        ("word_count", {"text": "one two three"}, "3 words"),  # a Python function
        ("shout", {"text": "quiet"}, "QUIET"),  # a Python BaseTool from a list
    ],
)
async def test_a_project_tool_is_expanded_chosen_and_executed_for_real(
    folder: Path, tool: str, params: dict[str, Any] | None, expected: str
):
    params = params if params is not None else {"repo_path": str(folder / "repo")}
    model = scripted(
        discover(expand_tools=[tool]),
        discover(),
        execute(tool, **params),
        approve(),
        discover(),  # after the step
        finalize(f"{tool} answered"),
        approve(),
    )
    context = context_of(folder, model)
    result = await pursue(context)

    assert result.error is None and model.exhausted
    assert [(e.action, e.tools) for e in of_type(result, "context_update")] == [("expanded", [tool])]
    # every phase lists the project's tools beside the resource tools; the expanded one with its schema
    listing = tool_block(model.prompts[2][0].text)
    for name in ("move_item", "git.git_log", "demo.calculate", "word_count", "shout", "archive_everything"):
        assert f"- {name}" in listing
    expanded = next(line for line in listing.splitlines() if line.startswith(f"- {tool} (expanded)"))
    parameters = listing.split(expanded, 1)[1].splitlines()[1]
    assert all(f'"{key}"' in parameters for key in params)  # its JSON schema names the arguments
    assert "(expanded)" not in tool_block(model.prompts[0][0].text)
    calls = of_type(result, "tool_call")
    assert [(c.name, c.args) for c in calls] == [(tool, params)]
    [answer] = of_type(result, "tool_result")
    assert answer.status == "ok" and expected in (answer.output or "")
    # the next decision reads the real output
    assert expected in model.prompts[5][0].text
    assert result.final.answer == f"{tool} answered"


async def test_a_wrong_call_of_an_mcp_tool_is_corrected_against_its_json_schema(folder: Path):
    model = scripted(
        discover(),
        execute("git.git_log", repository="."),  # not the schema's argument: corrected once
        execute("git.git_log", repo_path=str(folder / "repo"), max_count=1),
        approve(),
        discover(),
        finalize("one commit shown"),
        approve(),
    )
    result = await pursue(context_of(folder, model))

    assert result.error is None and model.exhausted
    assert "repository" in model.prompts[2][-1].text and "git.git_log" in model.prompts[2][-1].text
    [answer] = of_type(result, "tool_result")
    assert "second commit" in (answer.output or "") and "first commit" not in (answer.output or "")


async def test_the_protocols_tool_patterns_choose_what_it_sees(folder: Path):
    path = project(folder, protocols={"goal_pursuit": {"tools": ["git.*", "word_count"]}})
    model = scripted(
        discover(expand_tools=["move_item", "git.git_status"]),
        discover(),
        finalize("nothing to do"),
        approve(),
    )
    result = await pursue(context_of(folder, model, project_file=path))

    assert result.error is None and model.exhausted
    listing = tool_block(model.prompts[0][0].text)
    names = [line[2:].split(":")[0].split(" ")[0] for line in listing.splitlines() if line.startswith("- ")]
    assert "word_count" in names and "git.git_log" in names
    assert all(n.startswith("git.") or n == "word_count" for n in names)  # no resource, demo or other tools
    [change] = of_type(result, "context_update")
    assert change.tools == ["git.git_status"] and change.missing == ["move_item"]


async def test_each_phase_takes_its_role_model_from_the_project(folder: Path):
    """``[models] "goal_pursuit.action_decision"`` answers the decisions; the protocol's model the rest.

    A scripted model is positioned by the turn's model calls, whichever phase made them: the role's
    script answers call 1 (the decision) and call 4; the main script's turns there would finalize.
    """
    repo = str(folder / "repo")
    main = write_script(
        folder,
        [discover(), finalize("the main model decided"), approve(), discover(), finalize("main"), approve()],
        name="main.json",
    )
    role = write_script(
        folder,
        [discover(), execute("git.git_log", repo_path=repo), discover(), discover(), finalize("role")],
        name="role.json",
    )
    path = project(
        folder,
        ("git",),
        model=f"scripted:{main}",
        models={"goal_pursuit.action_decision": f"scripted:{role}"},
    )
    context = GoalPursuitContext(resource_repository=load_bundled(), project_file=str(path))
    assert context.model_for("action_decision") == f"scripted:{role}"
    assert context.model_for("context_discovery") == context.model == f"scripted:{main}"
    result = await pursue(context)

    assert result.error is None
    assert [(c.name, c.args) for c in of_type(result, "tool_call")] == [("git.git_log", {"repo_path": repo})]
    assert result.final.answer == "role"


async def test_a_bad_role_model_is_refused_before_the_run(folder: Path):
    path = project(folder, models={"goal_pursuit.refinement_analysis": "scripted:/no/such/script.json"})
    with pytest.raises(ScriptError, match=r"cannot read script script\.json"):
        GoalPursuitContext(resource_repository=load_bundled(), project_file=str(path))


# Approval, at graph level: the thread stops before the call; the answer decides whether and how it runs.


def archive_script(*after: dict[str, Any]) -> ScriptedChatModel:
    return scripted(
        discover(),
        execute("archive_everything", reason="tidy up"),
        approve(),
        *after,
    )


async def stream(graph: Any, graph_input: Any, context: GoalPursuitContext, config: Any) -> list[Event]:
    spec = get_protocol("goal_pursuit")
    return [
        e async for e in stream_graph(spec, graph, graph_input, context, config, traces=MemoryTraceStore())
    ]


async def until_approval(folder: Path, model: ScriptedChatModel) -> tuple[Any, GoalPursuitContext, Any]:
    """Run the turn on a checkpointed graph until it waits for the approval of archive_everything."""
    graph = get_protocol("goal_pursuit").compile(InMemorySaver())
    path = project(folder, servers=())  # Python tools only
    context, config = context_of(folder, model, project_file=path), {"configurable": {"thread_id": "t1"}}
    events = await stream(graph, {"messages": [HumanMessage(GOAL)]}, context, config)
    snapshot = await graph.aget_state(config)
    [waiting] = snapshot.interrupts
    assert waiting.value["type"] == "approval"
    assert waiting.value["call"]["name"] == "archive_everything"
    assert waiting.value["call"]["args"] == {"reason": "tidy up"}
    assert snapshot.next == ("execute_action",)
    kinds = [e.type for e in events]
    assert kinds[-1] == "approval_requested" and "tool_call" not in kinds
    assert not [e for e in events if e.type == "phase_start" and e.phase == "execution"]  # asked first
    return graph, context, config


@pytest.fixture
def archived() -> list[str]:
    before = list(user_tools.ARCHIVED)
    user_tools.ARCHIVED.clear()  # other tests of the process archive too (in any order, under xdist)
    yield user_tools.ARCHIVED
    user_tools.ARCHIVED[:] = before


async def test_an_approved_call_runs_once_after_the_answer(folder: Path, archived: list[str]):
    model = archive_script(discover(), finalize("archived"), approve())
    graph, context, config = await until_approval(folder, model)
    assert archived == []

    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["tidy up"] and model.exhausted
    assert [e.type for e in events][:3] == ["approval_answered", "phase_start", "tool_call"]
    [answer] = [e for e in events if e.type == "tool_result"]
    assert answer.status == "ok" and answer.output == "archived (tidy up)"
    assert events[-1].type == "final" and events[-1].answer == "archived"


async def test_the_turn_that_emits_final_closes_its_tools(folder: Path):
    """A driver that never closes the Context (langgraph dev) leaves no MCP session open after a turn."""
    model = scripted(discover(), finalize("nothing to run"), approve())
    context = context_of(folder, model, project_file=project(folder, ("git",)))
    graph = get_protocol("goal_pursuit").compile()
    events = await stream(graph, {"messages": [HumanMessage(GOAL)]}, context, {})

    assert events[-1].type == "final" and model.exhausted
    with pytest.raises(ConfigurationError, match="not open yet"):
        context.registry()  # the toolset, and the git server's session with it, was closed
    assert "git.git_log" in (await context.open_tools()).names()  # a later turn opens them again
    await context.close_tools()


async def test_an_edited_call_runs_with_the_edited_arguments(folder: Path, archived: list[str]):
    model = archive_script(discover(), finalize("archived"), approve())
    graph, context, config = await until_approval(folder, model)

    events = await stream(
        graph, Command(resume={"decision": "edit", "args": {"reason": "only old"}}), context, config
    )

    assert archived == ["only old"]
    [call] = [e for e in events if e.type == "tool_call"]
    assert call.args == {"reason": "only old"}
    assert "archive_everything(reason='only old') [ok]" in model.prompts[4][0].text  # the finished task


async def test_a_bad_edit_asks_again_saying_why(folder: Path, archived: list[str]):
    model = archive_script(discover(), finalize("archived"), approve())
    graph, context, config = await until_approval(folder, model)

    await stream(graph, Command(resume={"decision": "edit", "args": {"everything": True}}), context, config)

    [waiting] = (await graph.aget_state(config)).interrupts
    assert "everything" in waiting.value["problem"] and archived == []


async def test_a_rejected_call_never_runs_and_the_protocol_reads_why(folder: Path, archived: list[str]):
    model = archive_script(
        discover(),
        execute(
            "archive_everything", reason="tidy up"
        ),  # proposed again unchanged: it never ran, so asked again
        approve(),
        discover(),
        finalize("archived after all"),
        approve(),
    )
    graph, context, config = await until_approval(folder, model)

    answer = {"decision": "reject", "reason": "the archive is shared"}
    events = await stream(graph, Command(resume=answer), context, config)

    assert archived == []
    kinds = [e.type for e in events]
    assert kinds.count("approval_requested") == 1 and kinds.count("tool_call") == 1
    [result] = [e for e in events if e.type == "tool_result"]
    assert result.status == "error" and "the archive is shared" in (result.error or "")
    assert "the archive is shared" in model.prompts[4][0].text  # the next decision reads the reason
    assert "duplicate_tool_call" not in kinds
    state = (await graph.aget_state(config)).values
    assert state["messages"][2].status == "error" and "the archive is shared" in state["messages"][2].text
    assert is_rejected(state["messages"][2]) and state["executed"] == [] and state["rejected_steps"] == 1

    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["tidy up"] and model.exhausted
    assert "already ran" not in "\n".join(str(m.content) for p in model.prompts for m in p)
    assert events[-1].type == "final" and events[-1].answer == "archived after all"


async def test_a_rejection_uses_no_step_and_the_retry_ends_within_the_default_budget(
    folder: Path, archived: list[str]
):
    limit = GoalPursuitContext.max_steps  # the default: 5 steps that ran
    shouts = [
        s for n in range(limit - 2) for s in (discover(), execute("shout", text=f"word {n}"), approve())
    ]
    model = archive_script(
        discover(), execute("archive_everything", reason="tidy up"), approve(),  # the retry
        *shouts, discover(), finalize("archived, then shouted"), approve(),
    )  # fmt: skip
    graph, context, config = await until_approval(folder, model)
    await stream(graph, Command(resume="reject"), context, config)
    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["tidy up"] and model.exhausted
    ran = [(e.name, e.status) for e in events if e.type == "tool_result"]
    assert ran == [("archive_everything", "ok"), *[("shout", "ok")] * (limit - 2)]
    assert not [e for e in events if e.type == "budget_exhausted"]  # 4 of 5 steps used: the rejection none
    assert events[-1].type == "final" and events[-1].answer == "archived, then shouted"


async def test_an_edited_calls_original_is_asked_again_and_the_edited_one_is_the_duplicate(
    folder: Path, archived: list[str]
):
    model = archive_script(
        discover(), execute("archive_everything", reason="tidy up"), approve(),  # the original, again
        discover(), execute("archive_everything", reason="only old"), approve(),  # the edit, again
        discover(), finalize("archived twice"), approve(),
    )  # fmt: skip
    graph, context, config = await until_approval(folder, model)
    await stream(graph, Command(resume={"decision": "edit", "args": {"reason": "only old"}}), context, config)
    [waiting] = (await graph.aget_state(config)).interrupts  # the original never ran: asked again
    assert waiting.value["call"]["args"] == {"reason": "tidy up"}

    events = await stream(graph, Command(resume="approve"), context, config)

    assert archived == ["only old", "tidy up"] and model.exhausted
    assert [e.args for e in events if e.type == "duplicate_tool_call"] == [{"reason": "only old"}]
    assert events[-1].type == "final" and events[-1].answer == "archived twice"
