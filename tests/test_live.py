"""Real-provider runs through the OpenAI-compatible API; skipped unless credentials are set."""

import os

import pytest

from phasegraph.nodes.events import Final
from phasegraph.nodes.prices import price_of
from phasegraph.tools.planning import LedgerFilter, open_planning
from tests.helpers import of_type

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY (and OPENAI_BASE_URL)"
    ),
]

MODEL = os.environ.get("PHASEGRAPH_LIVE_MODEL", "gpt-4o-mini")


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified"])
async def test_real_model_answers_within_budget(collect, protocol: str):
    result = await collect(
        protocol, "Read docs/roadmap.md and tell me how many milestones it has.", model=f"openai:{MODEL}"
    )
    assert result.error is None, result.error
    assert isinstance(result.events[-1], Final)
    if protocol == "triggered_phase":
        assert sum(e.type == "tool_call" for e in result.events) <= 3


async def test_real_model_determines_a_goal_on_the_story_world(collect):
    result = await collect(
        "goal_pursuit",
        "Give the brass compass to Mira Voss.",
        model=f"openai:{MODEL}",
        mode="determine",
        resources="",  # the bundled story world, changed in memory only
        max_iter=3,
    )
    assert result.error is None, result.error
    finals = [e for e in result.events if isinstance(e, Final)]
    assert len(finals) == 1 and result.events[-1] is finals[0]
    final = finals[0]
    assert (final.resolution is None) != (final.operation_plan is None)  # a Resolution or an OperationPlan
    if final.operation_plan is not None:
        assert final.operation_plan["tool"] and final.operation_plan["kind"] == "operation_plan"
    else:
        assert final.resolution["response"] and final.resolution["kind"] == "resolution"
    assert not [e for e in result.events if e.type == "tool_call"]  # determine mode runs nothing


async def test_real_model_runs_the_bundled_agent_network(collect):
    result = await collect(
        "agent_network",
        "Which roadmap milestone covers pausing and resuming a run?",
        model=f"openai:{MODEL}",
        max_steps=8,  # the bundled network: triage, researcher, writer
    )
    # a real model may not respond within the budget: the run ends with one final or one error
    ends = [e for e in result.events if e.type in ("final", "error")]
    assert len(ends) == 1 and result.events[-1] is ends[0], [e.type for e in result.events]
    steps = [e for e in result.events if e.type == "agent_step"]
    assert len(steps) <= 8 and all(e.agent == "triage" for e in steps[:1])  # an error may come first
    if isinstance(ends[0], Final):
        assert steps and ends[0].answer.strip() and ends[0].agent in ("triage", "researcher", "writer")


async def test_real_model_runs_the_xml_contract_demo_task(collect, tmp_path):
    result = await collect(
        "xml_contract",
        "Summarise the roadmap and say who is on the team.",  # the task the bundled demo script answers
        model=f"openai:{MODEL}",
        max_steps=4,
        dataset_dir=str(tmp_path / "dataset"),  # not the default .phasegraph/dataset of the checkout
    )
    # a real model may break the contract or the provider may fail: the run ends with one final or one error
    ends = [e for e in result.events if e.type in ("final", "error")]
    assert len(ends) == 1 and result.events[-1] is ends[0], [e.type for e in result.events]
    assert len([e for e in result.events if e.type == "budget_exhausted"]) <= 1
    blocks = [e for e in result.events if e.type == "xml_block"]
    assert all(b.kind in ("single", "parallel", "sequential") and b.steps for b in blocks)
    assert len({b.group.split(".")[0] for b in blocks}) <= 4  # at most max_steps iterations ran blocks
    if isinstance(ends[0], Final):
        assert isinstance(ends[0].answer, str)


async def test_real_model_runs_a_planner_session_with_its_ledger(collect, tmp_path):
    database = f"sqlite:{tmp_path / 'planner.db'}"
    result = await collect(
        "planner",
        "Create a project called Orbit for a product launch, with a short context document.",
        model=f"openai:{MODEL}",
        context_type="project_create",
        database=database,  # the domain, plans and ledgers in a file of this test, not the checkout's
        request_id="live-planner",
    )
    # a real model may plan, call tools directly, or fail: the run ends with one final or one error
    ends = [e for e in result.events if e.type in ("final", "error")]
    assert len(ends) == 1 and result.events[-1] is ends[0], [e.type for e in result.events]
    assert result.events[0].type == "session"
    assert len(of_type(result, "tool_call")) - len(of_type(result, "step_start")) <= 8  # max_tool_calls
    store = open_planning(database)
    try:
        rows = (await store.ledger.usage(LedgerFilter(request_id="live-planner"))).rows
    finally:
        await store.close()
    assert all(r.model == f"openai:{MODEL}" for r in rows)  # a row per model call that answered
    if not of_type(result, "budget_exhausted"):  # a call the watchdog cut reports no usage
        assert all(r.input_tokens > 0 for r in rows)  # the provider's reported usage, per call
    if price_of(f"openai:{MODEL}") is not None:
        assert all(r.cost_usd > 0 for r in rows if r.input_tokens)
    if isinstance(ends[0], Final):
        assert ends[0].answer.strip() and ends[0].usage is not None
        assert rows and ends[0].usage["calls"] == len(rows)
