"""Mermaid snapshots: the drawing is the protocol's contract, budgets included."""

import os
from pathlib import Path

import pytest

from phasegraph.graphs.registry import PROTOCOLS

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_mermaid_matches_snapshot(protocol: str):
    drawing = PROTOCOLS[protocol].compile().get_graph().draw_mermaid()
    snapshot = SNAPSHOTS / f"{protocol}.mmd"
    if os.environ.get("PHASEGRAPH_UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(drawing, encoding="utf-8")
    assert drawing == snapshot.read_text(encoding="utf-8"), (
        f"{protocol} drawing changed; review it and rerun with PHASEGRAPH_UPDATE_SNAPSHOTS=1"
    )


def test_triggered_phase_budgets_are_visible_edges():
    drawing = (SNAPSHOTS / "triggered_phase.mmd").read_text(encoding="utf-8")
    for edge in (
        "tool_phase -. &nbsp;cycles_spent&nbsp; .-> final_phase",
        "refuse_duplicate -. &nbsp;duplicates_exceeded&nbsp; .-> final_phase",
        "action_phase -. &nbsp;duplicate&nbsp; .-> refuse_duplicate",
        "action_phase -. &nbsp;new_call&nbsp; .-> tool_phase",
    ):
        assert edge in drawing


def test_goal_pursuit_loops_and_budgets_are_visible_edges():
    drawing = (SNAPSHOTS / "goal_pursuit.mmd").read_text(encoding="utf-8")
    for edge in (
        "discover_context -. &nbsp;next_round&nbsp; .-> discover_context",  # the context loop
        "discover_context -. &nbsp;refine&nbsp; .-> refine_context",
        "analyze_refinement -. &nbsp;refine&nbsp; .-> discover_context",  # the main loop
        "analyze_refinement -. &nbsp;deferred&nbsp; .-> defer_execution",  # min_iter
        "analyze_refinement -. &nbsp;iterations_spent&nbsp; .-> return_last_planned",  # max_iter
        "execute_action -. &nbsp;steps_spent&nbsp; .-> finish_pursuit",  # the step budget
    ):
        assert edge in drawing


def test_agent_network_routing_and_budgets_are_visible_edges():
    drawing = (SNAPSHOTS / "agent_network.mmd").read_text(encoding="utf-8")
    for edge in (
        "run_agent_step -. &nbsp;handoff&nbsp; .-> route_to_agent",  # agent routing
        "route_to_agent -. &nbsp;next_step&nbsp; .-> run_agent_step",
        "use_tool -. &nbsp;next_step&nbsp; .-> run_agent_step",  # tools keep control with the agent
        "run_agent_step -. &nbsp;refused&nbsp; .-> run_agent_step",  # a refused decision goes back
        "run_agent_step -.-> respond",
        "use_tool -. &nbsp;steps_spent&nbsp; .-> stop_at_max_steps",  # the budgets
        "use_tool -. &nbsp;errors_spent&nbsp; .-> stop_at_max_tool_errors",
        "run_agent_step -. &nbsp;errors_spent&nbsp; .-> stop_at_max_tool_errors",
    ):
        assert edge in drawing


def test_xml_contract_loop_and_budget_are_visible_edges():
    drawing = (SNAPSHOTS / "xml_contract.mmd").read_text(encoding="utf-8")
    for edge in (
        "propose_action -. &nbsp;execute&nbsp; .-> execute_blocks",  # the tool phase
        "execute_blocks -. &nbsp;next_step&nbsp; .-> propose_action",  # the loop
        "propose_action -. &nbsp;answer&nbsp; .-> finish_turn",
        "execute_blocks -. &nbsp;steps_spent&nbsp; .-> answer_without_tools",  # the step budget
        "execute_blocks -. &nbsp;refused_twice&nbsp; .-> answer_after_refusals",  # one correction only
    ):
        assert edge in drawing


def test_planner_guardrails_and_plan_modes_are_visible_edges():
    drawing = (SNAPSHOTS / "planner.mmd").read_text(encoding="utf-8")
    for edge in (
        "run_tools -. &nbsp;tool_cap&nbsp; .-> stop_at_tool_cap",  # the 8-call cap
        "call_planner -. &nbsp;watchdog&nbsp; .-> stop_at_watchdog",  # the session watchdog
        "run_tools -. &nbsp;watchdog&nbsp; .-> stop_at_watchdog",
        "draft_plan -. &nbsp;auto_execute&nbsp; .-> execute_plan",
        "draft_plan -. &nbsp;agent_review&nbsp; .-> review_plan",
        "review_plan -. &nbsp;sent_back&nbsp; .-> call_planner",
        "start_turn -. &nbsp;blank&nbsp; .-> clarify",
    ):
        assert edge in drawing
    assert "confirmation" not in drawing  # a destructive call waits for approval inside run_tools
