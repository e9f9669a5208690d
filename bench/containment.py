"""Rows 2 and 3: how much of a multi-call message is read, and whether adversarial tool loops end.

Counts, not timings. Every side runs the same scripted model turns against tools that log each real
run (a call refused unrun is not logged), so "tools executed" and "duplicate executions" (runs whose
canonical signature already ran this turn) are counted the same way on every side.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from bench.harness import Figure, Row, Side
from phasegraph.graphs.run import run
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.scripted import Script, ScriptedChatModel
from phasegraph.tools import ToolContext, ToolRegistry, default_registry

MESSAGE = "Summarise the roadmap in the docs folder."
TRIGGERED, UNIFIED = "triggered_phase", "unified (create_agent)"
PLAIN = "plain create_agent (recursion limit only)"
#: LangGraph's long-standing default. LangGraph 1.2 raised its default to 10,007 and create_agent sets 9,999
#: (~5,000 tool cycles, far too slow here), so the anchor passes 25 explicitly: still its only limit.
RECURSION_LIMIT = 25
Log = list[tuple[str, dict[str, Any]]]

DOCS = {"name": "list_files", "args": {"path": "docs"}}
ROADMAP = {"name": "read_file", "args": {"path": "docs/roadmap.md"}}
TEAM = {"name": "read_file", "args": {"path": "docs/team.md"}}
SEARCH = {"name": "search_files", "args": {"query": "milestone", "path": "docs"}}
TOP = {"name": "list_files", "args": {"path": "."}}
FIVE = [DOCS, ROADMAP, TEAM, SEARCH, TOP]
SEARCH_WAYS = [SEARCH, {"name": "search_files", "args": {"path": "docs", "query": "milestone"}},
               {"name": "search_files", "args": {"query": "milestone", "path": "./docs/"}}]  # fmt: skip
ANSWER = {"content": "The roadmap has two milestones, in March and in June."}
#: key, title, workload, script; loop turns carry calls and no text, so an answer forced without tools is
#: empty (the deterministic fallback then answers).
ADVERSARIAL: list[tuple[str, str, str, dict[str, Any]]] = [
    ("3a", "the same call forever", "list_files(path='docs') on every model call",
     {"turns": [{"tool_calls": [DOCS]}], "repeat_last": True}),
    ("3b", "the same call written three ways", "search_files(query='milestone', path='docs') on every model "
     "call, cycling through args reordered and the path written 'docs' or './docs/'",
     {"turns": [{"tool_calls": [SEARCH_WAYS[i % 3]]} for i in range(30)], "repeat_last": True}),
    ("3c", "two calls alternating", "list_files(path='docs') and read_file(path='docs/roadmap.md') "
     "alternating, forever", {"turns": [{"tool_calls": [[DOCS, ROADMAP][i % 2]]} for i in range(30)],
                              "repeat_last": True}),
    ("3d", "50 distinct calls", "50 distinct search_files calls (query 'milestone 1' .. 'milestone 50'), "
     "one per model call, then a text answer",
     {"turns": [{"tool_calls": [{"name": "search_files", "args": {"query": f"milestone {n}"}}]}
                for n in range(1, 51)] + [ANSWER]}),
    ("3e", "five calls per message", "five calls in every model message, forever (list_files docs and ., "
     "read_file roadmap and team, search_files; rotated one place per message, so every call recurs)",
     {"turns": [{"tool_calls": FIVE[k:] + FIVE[:k]} for k in range(5)], "repeat_last": True}),
]  # fmt: skip
STREAM_CUT_SCRIPT = {"turns": [{"content": "I will look at everything at once.", "tool_calls": FIVE}, ANSWER]}


def _logged(tool: BaseTool, log: Log, context: ToolContext | None = None) -> BaseTool:
    """``tool`` logging each real run; with ``context``, that context is bound and hidden from the schema."""
    if not isinstance(tool, StructuredTool) or tool.func is None:
        raise TypeError(f"tool {tool.name!r} is not a StructuredTool over a function")
    func = tool.func

    async def logged(**kwargs: Any) -> str:
        log.append((tool.name, {k: v for k, v in kwargs.items() if k != "context"}))
        return str(func(**kwargs) if context is None else func(**kwargs, context=context))

    if context is None:  # same schema (the injected context included) and signature normalisers
        return tool.model_copy(update={"coroutine": logged})
    return StructuredTool.from_function(
        coroutine=logged, name=tool.name, description=tool.description, args_schema=tool.tool_call_schema
    )


def _duplicates(log: Log) -> int:
    """Runs whose canonical signature already ran earlier in the turn."""
    registry = default_registry()
    return len(log) - len({registry.signature(name, args, "bench") for name, args in log})


def _model(script: dict[str, Any], source: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=Script.model_validate(script), source=f"bench:{source}")


async def _protocol(
    protocol: str, script: dict[str, Any], source: str
) -> tuple[dict[str, Figure], ScriptedChatModel]:
    """One turn of a phasegraph protocol; its containment figures and the scripted model."""
    log: Log = []
    registry = ToolRegistry(_logged(t, log) for t in default_registry())
    model = _model(script, source)
    result = await run(
        protocol, MESSAGE, chat_model=model, workspace=str(DEMO_WORKSPACE), tool_registry=registry
    )
    if result.final is not None:
        ended = "final (fallback)" if result.final.fallback else "final (model)"
    else:
        ended = f"error: {result.error.kind if result.error else 'no final event'}"
    return _figures(log, model, ended), model


async def _plain_agent(script: dict[str, Any], source: str) -> dict[str, Figure]:
    """One turn of ``create_agent`` on the same model and tools, with only the recursion limit."""
    log: Log = []
    context = ToolContext(workspace=DEMO_WORKSPACE, project_id="bench", request_id="bench")
    model = _model(script, source)
    agent = create_agent(model=model, tools=[_logged(t, log, context) for t in default_registry()])
    try:
        state = await agent.ainvoke(
            {"messages": [HumanMessage(MESSAGE)]}, {"recursion_limit": RECURSION_LIMIT}
        )
    except Exception as exc:  # an anchor failing is a figure, not a bench failure
        ended = f"error: {type(exc).__name__}"
    else:
        last = state["messages"][-1]
        answered = isinstance(last, AIMessage) and not last.tool_calls and bool(last.text.strip())
        ended = "final (model)" if answered else "no answer"
    return _figures(log, model, ended)


def _figures(log: Log, model: ScriptedChatModel, ended: str) -> dict[str, Figure]:
    """Containment figures of one turn; "calls requested" counts every call of every model message."""
    turns, calls = model.script.turns, len(model.prompts)
    requested = sum(len(turns[min(i, len(turns) - 1)].tool_calls) for i in range(calls))
    return {
        "duplicate executions": Figure(_duplicates(log)),
        "tools executed": Figure(len(log)),
        "calls requested": Figure(requested),
        "final answer": Figure(ended.startswith("final")),
        "ended with": Figure(ended),
        "model calls": Figure(calls),
    }


async def stream_cut_row() -> Row:
    """Row 2: chunks read after the first complete tool call of a message carrying five calls.

    Returns:
        The row, ``unified`` as the anchor.
    """
    sides = []
    for name, protocol in ((TRIGGERED, "triggered_phase"), (UNIFIED, "unified")):
        figures, model = await _protocol(protocol, STREAM_CUT_SCRIPT, "stream-cut")
        first = model.stats[0]
        sides.append(
            Side(name, {
                "chunks after first call": Figure(first.chunks_after_first_complete_call),
                "chunks read": Figure(first.chunks_read),
                "chunks in message": Figure(first.chunks_total),
                "tools executed": figures["tools executed"],
            })
        )  # fmt: skip
    return Row(
        key="2",
        title="Upstream chunks read after the first complete tool call",
        workload="one model message: a sentence, then five distinct tool calls streamed split (a header and "
        "6-character argument pieces each); the next model call answers in text. Figures of the first "
        "model call; tools executed in the whole turn",
        anchor=UNIFIED,
        headline="chunks after first call",
        sides=sides,
    )


async def containment_rows() -> list[Row]:
    """Rows 3a to 3e: one adversarial script each, on both protocols and on plain ``create_agent``.

    Returns:
        One row per script, plain ``create_agent`` (recursion limit only) as the anchor.
    """
    rows = []
    for key, title, workload, script in ADVERSARIAL:
        sides = [
            Side(TRIGGERED, (await _protocol("triggered_phase", script, key))[0]),
            Side(UNIFIED, (await _protocol("unified", script, key))[0]),
            Side(PLAIN, await _plain_agent(script, key)),
        ]
        rows.append(
            Row(
                key=key,
                title=f"Loop containment: {title}",
                workload=f"{workload}; default budgets; the anchor has only LangGraph's recursion limit, "
                f"{RECURSION_LIMIT} (create_agent's own default is 9,999)",
                anchor=PLAIN,
                headline="duplicate executions",
                sides=sides,
            )
        )
    return rows
