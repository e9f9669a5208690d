"""Row 6, planner: a 3-step objective through the plan meta-tool against the planner calling each tool itself.

One planner session (one user turn, context type ``project_create``) reaches the same outcome both ways:
the Spring Launch project created from the product-launch template, with its brief published. The anchor
is the planner calling ``list_templates``, ``create_project`` and ``publish_context_document`` itself, one
model step each, then answering. The measured side calls ``agent_create_plan`` once: one structured call
drafts the three steps, the executor subgraph runs them without a model call, and the planner answers
from the plan's summary. Both sides are scripted with the same arguments and the same answer, and every
figure is read back from the usage rows the session wrote (the planning ledger). Model calls repeat
exactly; the scripted model reports a token per 4 characters of the messages it is sent, so token counts
repeat to within a token or two (the tools' results carry timestamps, whose printed length varies).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from bench.harness import Figure, Row, Side
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.events import Event, Final
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.planning import LedgerFilter, open_planning

KEY = "6"
STEPS = 3
ANCHOR = f"the planner calls the {STEPS} tools itself, one model step each"
MEASURED = "agent_create_plan: one structured draft, the executor runs the steps"
HEADLINE = "model calls"
CONTEXT_TYPE = "project_create"
MESSAGE = "Set up a project for our spring launch from the product-launch template, with its brief."
OBJECTIVE = "Create the Spring Launch project from the product-launch template and publish its brief"
ANSWER = "Done: the Spring Launch project exists, created from the product-launch template, with its brief."
BRIEF = {
    "title": "Project brief",
    "body": "Goal: launch the spring product line in April. Audience: existing customers first. "
    "Risks: supplier delays.",
}
#: The three calls, as the anchor's planner makes them (the project's id is what create_project returns).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_templates", {"query": "launch"}),
    ("create_project", {"name": "Spring Launch", "template_id": "product-launch"}),
    ("publish_context_document", {"project_id": "spring-launch", **BRIEF}),
]
#: The same three calls as plan steps (step s3 reads the project's id from step s2's result).
PLAN_STEPS: list[dict[str, Any]] = [
    {"id": "s1", "tool": "list_templates", "args": CALLS[0][1], "rationale": "Find the template.",
     "depends_on": []},
    {"id": "s2", "tool": "create_project", "args": CALLS[1][1], "rationale": "Create the project.",
     "depends_on": ["s1"]},
    {"id": "s3", "tool": "publish_context_document", "args": {"project_id": "${s2.project.id}", **BRIEF},
     "rationale": "Publish its brief.", "depends_on": ["s2"]},
]  # fmt: skip


def _turn(content: str = "", *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "args": args} for name, args in calls]}


SCRIPTS: dict[str, list[dict[str, Any]]] = {
    ANCHOR: [*(_turn("", call) for call in CALLS), _turn(ANSWER)],
    MEASURED: [
        _turn("", ("agent_create_plan", {"objective": OBJECTIVE, "execution_mode": "auto_execute"})),
        _turn(
            "", ("PlanDraft", {"reasoning": "Template, project, brief, in that order.", "steps": PLAN_STEPS})
        ),
        _turn(ANSWER),
    ],
}


@dataclass
class Session:
    """What one side's planner session did, from its events and its usage rows."""

    calls: int
    by_operation: dict[str, int]  # model calls per operation_type
    input_tokens: int
    output_tokens: int
    cost_usd: float
    tools_run: list[str]  # the domain tools that ran, in order (plan steps included)
    outcome: tuple[Any, ...]  # the projects and documents the session left


async def run_session(workdir: Path, side: str) -> Session:
    """Run ``side``'s scripted session on a database of its own; raises unless it went as scripted."""
    name = "direct" if side == ANCHOR else "plan"
    script = workdir / f"planner-{name}.json"
    script.write_text(json.dumps({"turns": SCRIPTS[side]}), encoding="utf-8")
    database = f"sqlite:{workdir / f'planner-{name}.db'}"
    spec = get_protocol("planner")
    context = spec.make_context(model=f"scripted:{script}", context_type=CONTEXT_TYPE, database=database)
    config: RunnableConfig = {"configurable": {"thread_id": f"bench-{context.request_id}"}}
    inputs = {"messages": [HumanMessage(MESSAGE)]}
    try:
        events: list[Event] = [
            e
            async for e in stream_graph(
                spec, spec.compile(), inputs, context, config, traces=MemoryTraceStore()
            )
        ]
    finally:
        await context.aclose()
    final = events[-1] if events else None
    if not isinstance(final, Final) or final.fallback or final.answer != ANSWER:
        raise RuntimeError(f"the planner session ({side}) did not answer: {[e.type for e in events]}")
    store = open_planning(database)
    try:
        report = await store.ledger.usage(LedgerFilter(request_id=context.request_id), by="operation")
        projects = await store.domain.list_projects(context.project_id)
        documents = [await store.domain.list_documents(context.project_id, p.project_id) for p in projects]
    finally:
        await store.close()
    totals = report.totals
    if totals["calls"] != len(SCRIPTS[side]) or final.usage != {
        "calls": totals["calls"],
        "inputTokens": totals["input_tokens"],
        "outputTokens": totals["output_tokens"],
        "costUsd": totals["cost_usd"],
    }:
        raise RuntimeError(
            f"the usage rows ({totals}) do not match the script or the final event ({final.usage})"
        )
    return Session(
        calls=totals["calls"],
        by_operation={g["key"]: g["calls"] for g in report.groups},
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        cost_usd=totals["cost_usd"],
        tools_run=[e.name for e in events if e.type == "tool_result" and e.status == "ok"],
        outcome=(
            [(p.project_id, p.template_id) for p in projects],
            [(d.project_id, d.title, d.body) for found in documents for d in found],
        ),
    )


async def plan_tool_row(workdir: Path) -> Row:
    """Model calls and tokens of one session each way, from the usage rows of the same bench run."""
    root = workdir / "planner"
    root.mkdir(parents=True, exist_ok=True)
    sessions = {side: await run_session(root, side) for side in SCRIPTS}
    anchor, measured = sessions[ANCHOR], sessions[MEASURED]
    tools = [name for name, _ in CALLS]
    if anchor.tools_run != tools or measured.tools_run != tools or anchor.outcome != measured.outcome:
        raise RuntimeError(
            f"the two sessions did not do the same work: {anchor.tools_run} -> {anchor.outcome} against "
            f"{measured.tools_run} -> {measured.outcome}"
        )
    row = Row(
        key=KEY,
        title=f"planner: a {STEPS}-step objective, plan meta-tool vs direct tool calls",
        workload=f"one planner session each (context type {CONTEXT_TYPE}, fresh sqlite database, no "
        f"checkpointer), scripted with the same arguments and answer: create the Spring Launch project from "
        f"the product-launch template and publish its brief ({', '.join(tools)}). Anchor: the planner calls "
        f"the {STEPS} tools itself, one model step each, then answers. Measured: the planner calls "
        f"agent_create_plan once, one structured call drafts the {STEPS} steps, the executor subgraph runs "
        "them without a model call, the planner answers from the plan's summary. Figures: the session's "
        "usage rows (the planning ledger); the scripted model counts a token per 4 characters of the "
        "message text it is sent (the tool schemas bound to planner calls are not counted; the plan prompt "
        "lists the tools in its text, so they are; tool results carry timestamps, so tokens may differ by "
        "one or two between runs)",
        anchor=ANCHOR,
        headline=HEADLINE,
        note=f"model calls: {measured.calls} / {anchor.calls} = {measured.calls / anchor.calls:.2f} "
        "(a plan whose draft is accepted takes 3 calls however many steps it has; the anchor one per step, "
        f"plus the answer); input tokens: {measured.input_tokens} / {anchor.input_tokens} = "
        f"{measured.input_tokens / anchor.input_tokens:.2f}",
    )
    for name, session in sessions.items():
        figures = {
            HEADLINE: Figure(session.calls),
            "input tokens": Figure(session.input_tokens),
            "output tokens": Figure(session.output_tokens),
            "cost": Figure(session.cost_usd, "USD"),
            **{f"{op} calls": Figure(n) for op, n in sorted(session.by_operation.items())},
            "tools run": Figure(len(session.tools_run)),
        }
        row.sides.append(Side(name, figures))
    return row


async def planner_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 6's planner row; its figures are counts, so ``quick`` changes nothing."""
    del quick  # counts from usage rows: no repeats to cut
    return [await plan_tool_row(workdir)]
