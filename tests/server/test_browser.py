"""The web page in a real headless Chromium against a real server: chat, tool outputs, pause/resume,
cancel, checkpoints (with a fork), the trace panel, the switch to the fallback route, the protocols'
events as readable lines, and the planner's settings and events."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.events import (
    AgentState,
    BudgetExhaustedEvent,
    EventBase,
    Final,
    LastTurnContext,
    PlanCreated,
    PlanReadyForReview,
    PlanReview,
    Session,
    StepComplete,
    StepStart,
    TextChunk,
    ToolCall,
    ToolResultEvent,
)
from tests.browser import needs_chromium, open_page
from tests.server.conftest import Server, slow_script

ANSWER = "The roadmap has two milestones."
WAIT = 20_000  # ms, for anything that waits on the model

pytestmark = needs_chromium


def send(page: Page, message: str) -> None:
    page.locator("#message").fill(message)
    page.locator("#send").click()


def expect_done(page: Page) -> None:
    expect(page.locator("#answer")).to_contain_text(ANSWER, timeout=WAIT)
    expect(page.locator("#status")).to_have_text("done", timeout=WAIT)


def test_page_drives_a_run_end_to_end(servers: Any, tmp_path: Path) -> None:
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=150))
    with open_page() as page:
        page.goto(server.url)
        chat, status = page.locator("#chat"), page.locator("#status")

        # The picker is filled from /api/protocols.
        expect(page.locator("#protocol option[value='triggered_phase']")).to_have_count(1)
        page.locator("#protocol").select_option("triggered_phase")
        expect(page.locator("#protocol-summary")).to_contain_text("Action phase")
        expect(page.locator("#project-id")).to_have_value("default")

        # 1. Streamed text shows up live, tool calls as compact lines, then the final answer.
        send(page, "What is on the roadmap?")
        expect(chat.locator(".text").first).to_contain_text("Let me look.", timeout=WAIT)
        expect(page.locator("#answer")).to_have_count(0)  # still streaming: no answer yet
        expect(status).to_contain_text(re.compile(r"(action|tool) phase #\d+ \(cycle \d\)"))
        expect_done(page)
        first_turn = chat.locator(".msg.assistant").last
        row = first_turn.locator("[data-testid='tool-line']").first
        expect(row.locator("summary")).to_contain_text('list_files{"path":"docs"}ok')
        expect(first_turn.locator(".tool-output")).to_have_count(0)
        # A call is one closed row; opening it (Enter on its summary) shows its whole arguments.
        expect(row.locator(".tool-args-full")).to_be_hidden()
        row.locator("summary").focus()
        page.keyboard.press("Enter")
        expect(row.locator(".tool-args-full")).to_be_visible()
        expect(row.locator(".tool-args-full")).to_have_text('{\n  "path": "docs"\n}')

        # 2. With "Show tool outputs" each row holds its call's output, shown when the row is opened.
        page.locator("#show-tool-outputs").check()
        send(page, "And with the tool outputs?")
        turn = chat.locator(".msg.assistant").last
        expect(turn.locator(".tool-output").first).to_contain_text("docs/roadmap.md", timeout=WAIT)
        expect_done(page)
        expect(turn.locator(".tool-output").nth(1)).to_contain_text("Milestone 1")
        second = turn.locator("[data-testid='tool-line']").nth(1)
        expect(second.locator(".tool-more")).to_have_text("output")
        expect(second.locator(".tool-output")).to_be_hidden()
        second.locator("summary").click()
        expect(second.locator(".tool-output")).to_be_visible()
        expect(second.locator(".tool-more")).to_be_hidden()

        # 3. Pause at the next pause point, then resume to the end.
        send(page, "Pause this one, please.")
        expect(chat.locator(".msg.assistant").last).to_contain_text("Let me look.", timeout=WAIT)
        page.locator("#pause").click()
        expect(status).to_have_text("paused", timeout=WAIT)
        expect(chat).to_contain_text("paused (requested)")
        expect(page.locator("#resume")).to_be_enabled()
        page.locator("#resume").click()
        expect(chat).to_contain_text("resumed from checkpoint", timeout=WAIT)
        expect_done(page)
        expect(page.locator("#resume")).to_be_disabled()

        # 4. The thread's checkpoint timeline; fork right before the first tool phase.
        page.locator("#checkpoints-button").click()
        rows = page.locator("#checkpoints [data-testid='checkpoint-row']")
        expect(rows.first).to_be_visible(timeout=WAIT)
        assert rows.count() > 5
        expect(rows.filter(has_text="(input)").first).to_contain_text("__start__")
        before_tool = rows.filter(has=page.locator("td", has_text=re.compile(r"^tool_phase$"))).first
        expect(before_tool).to_contain_text("action_phase")
        paused_request = page.locator("#request-info").get_attribute("data-request-id")
        before_tool.get_by_role("button", name="Fork").click()
        expect(chat).to_contain_text("forked from checkpoint", timeout=WAIT)
        expect_done(page)
        expect(page.locator("#request-info")).not_to_have_attribute("data-request-id", paused_request or "")

        # 5. The trace of the (forked) request.
        page.locator("#trace-button").click()
        entries = page.locator("#trace [data-testid='trace-entry']")
        expect(entries.first).to_be_visible(timeout=WAIT)
        expect(page.locator("#trace [data-type='tool_result']").first).to_contain_text("list_files")
        call = page.locator("#trace [data-type='tool_call']").first
        call.locator("summary").click()
        expect(call.locator(".trace-details")).to_contain_text('"call_id"')

        # 6. Cancel a running request.
        send(page, "Cancel this one.")
        expect(chat.locator(".msg.assistant").last).to_contain_text("Let me look.", timeout=WAIT)
        page.locator("#cancel").click()
        expect(status).to_have_text("cancelled", timeout=WAIT)
        expect(page.locator("#cancel")).to_be_disabled()
        expect(page.locator("#send")).to_be_enabled()

        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_the_readme_server_runs_the_protocol_the_page_picks(tmp_path: Path) -> None:
    """``phasegraph serve`` as the README starts it (no settings, a fresh folder), the page's picker left at
    its default: the chat runs triggered_phase on its own route, whose duplicate read is refused."""
    server = Server(env={}, log=tmp_path / "server.log", cwd=tmp_path).start()  # the two-stage route is off
    try:
        with open_page() as page:
            posted: list[str] = []
            page.on("request", lambda request: posted.append(request.url.removeprefix(server.url)))
            page.goto(server.url)
            expect(page.locator("#protocol")).to_have_value("triggered_phase")
            expect(page.locator("#protocol option[value='triggered_phase']")).to_have_text("triggered_phase")
            send(page, "Summarise the roadmap in the docs folder.")
            expect_done(page)
            chat = page.locator("#chat")
            assert chat.inner_text().count(ANSWER) == 1  # the answer once: in its box, not also as streamed
            expect(chat).to_contain_text("duplicate call refused: read_file")
            expect(chat.locator(".note.warn")).not_to_contain_text(["fallback"])
            expect(page.locator("[data-testid='thread-item']").first).to_contain_text("triggered_phase")
            # a chat, not a console: no ids in the header (a button copies them), the side panels closed
            expect(page.locator("header")).not_to_contain_text(re.compile(r"[0-9a-f]{12}"))
            expect(page.locator("#request-info")).to_have_attribute("data-request-id", re.compile(r"\w+"))
            expect(page.locator("[data-testid='panels']")).to_be_hidden()
            page.locator("#checkpoints-button").click()
            rows = page.locator("#checkpoints [data-testid='checkpoint-row']")
            expect(rows.first).to_be_visible(timeout=WAIT)
            expect(page.locator("#checkpoints-button")).to_have_attribute("aria-expanded", "true")
            page.locator("#checkpoints-button").click()
            expect(page.locator("[data-testid='panels']")).to_be_hidden()
            starts = [route for route in posted if route.split("?")[0].endswith("/stream")]
            assert starts == ["/api/runs/triggered_phase/stream"], posted
    finally:
        server.stop()


def test_page_reconnects_after_a_server_crash_and_drops_the_replaced_attempt(
    servers: Any, tmp_path: Path
) -> None:
    """kill -9 mid-phase, restart on the same port: the page follows again, shows the crash pause,
    and after Resume shows the interrupted phase once (the re-run replaces the partial attempt)."""
    first = servers(PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=150))
    with open_page() as page:
        page.goto(first.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='triggered_phase']")).to_have_count(1)
        page.locator("#protocol").select_option("triggered_phase")
        send(page, "What is on the roadmap?")
        expect(chat.locator(".text span", has_text="Reading")).to_have_count(1, timeout=WAIT)
        first.kill()
        restarted = Server(env=first.env, port=first.port, log=tmp_path / "restarted.log").start()
        try:
            expect(chat).to_contain_text("the server stopped mid-run; paused", timeout=WAIT)
            expect(page.locator("#status")).to_have_text("paused")
            page.locator("#resume").click()
            expect_done(page)
            expect(chat).to_contain_text("the interrupted attempt is done again")
            expect(chat).to_contain_text("the server stopped mid-run; paused")  # server notes stay
            expect(chat.locator(".text span", has_text="Reading")).to_have_count(1)
            expect(chat.locator(".tool", has_text="list_files")).to_have_count(1)
            expect(chat.locator(".tool", has_text="read_file")).to_have_count(1)
            page.screenshot(path=str(tmp_path / "page-crash.png"), full_page=True)
        finally:
            restarted.stop()


def test_page_marks_an_answer_that_rests_on_no_tool_output(servers: Any, tmp_path: Path) -> None:
    script = tmp_path / "failing.json"
    turns = [
        {"content": "Reading.", "tool_calls": [{"name": "read_file", "args": {"path": "missing.md"}}]},
        {"content": "It says nothing."},
    ]
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    server = servers(PHASEGRAPH_MODEL=f"scripted:{script}")
    with open_page() as page:
        page.goto(server.url)
        expect(page.locator("#protocol option[value='triggered_phase']")).to_have_count(1)
        send(page, "What does it say?")
        answer = page.locator("#answer")
        expect(answer).to_contain_text("It says nothing.", timeout=WAIT)
        expect(answer).to_contain_text("every tool call failed")
        expect(answer).to_have_class(re.compile(r"\bunsupported\b"))


MARKDOWN_ANSWER = (
    "The roadmap has **two milestones**:\n\n- March: `triggered_phase`\n- June: the rest\n\n"
    '<img src="x" onerror="window.pwned=1"> [details](javascript:window.pwned=2) [docs](https://example.org/)'
)


def test_page_renders_an_answer_as_markdown_and_runs_nothing_it_holds(servers: Any, tmp_path: Path) -> None:
    script = tmp_path / "markdown.json"
    script.write_text(json.dumps({"turns": [{"content": MARKDOWN_ANSWER}]}), encoding="utf-8")
    server = servers(PHASEGRAPH_MODEL=f"scripted:{script}")
    with open_page() as page:
        page.goto(server.url)
        page.locator("#protocol").select_option("unified")
        send(page, "What is on the roadmap?")
        text = page.locator("#answer .answer-text")
        expect(text.locator("strong")).to_have_text("two milestones", timeout=WAIT)
        expect(text.locator("li")).to_have_text(["March: triggered_phase", "June: the rest"])
        expect(text.locator("code")).to_have_text("triggered_phase")
        expect(text.locator("img")).to_have_count(0)  # raw HTML is not shown
        expect(text.locator("a", has_text="docs")).to_have_attribute("target", "_blank")
        assert (text.locator("a", has_text="details").get_attribute("href") or "") == ""  # no javascript: URL
        assert page.evaluate("window.pwned") is None
        assert page.locator("#chat").inner_text().count("two milestones") == 1  # the answer once


GOAL = (
    "The Grey Fox found her compass at the lighthouse in chapter 3: give it back to her and note it "
    "in that chapter."
)
#: Wire names of goal_pursuit's event fields: none may reach the page as raw JSON.
RAW_KEYS = ['"type"', '"action"', '"contextChars"', '"decisionType"', '"assessmentDelta"', '"verdict"',
            '"resolution"', '"kind"', '"promptChars"']  # fmt: skip


def test_page_shows_goal_pursuit_readably(servers: Any, tmp_path: Path) -> None:
    """goal_pursuit's demo (the default scripted:demo model): phase headers with their progress,
    context updates, decisions, verdicts, prompt sizes and the answer's Resolution, all as text."""
    server = servers()
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='goal_pursuit']")).to_have_count(1)
        page.locator("#protocol").select_option("goal_pursuit")
        expect(page.locator("#protocol-summary")).to_contain_text("Context discovery")

        send(page, GOAL)
        answer = page.locator("#answer")
        expect(answer).to_contain_text("the brass compass belongs to Mira Voss", timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        expect(chat.locator(".msg.assistant .who").last).to_have_text("assistant · goal_pursuit")

        # Phase headers: name, index and progress; how each ended, with its prompt size.
        headers = chat.locator("[data-testid='phase-header']")
        expect(headers).to_have_count(17)
        expect(headers.first).to_contain_text("context discovery #1")
        expect(headers.first).to_contain_text("iteration 1, round 1")
        expect(headers.first).to_contain_text(re.compile(r"answered · prompt \d+ chars"))
        execution = headers.filter(has_text="execution #10")
        expect(execution).to_contain_text("iteration 2, step 1")
        expect(execution).to_contain_text("executed")

        # Context updates as short lines.
        updates = chat.locator("[data-testid='context-update']")
        expect(updates.filter(has_text='searched "Grey Fox": 2 hits')).to_have_count(1)
        expect(updates.filter(has_text='searched "Grey Fox"')).to_contain_text("mira-voss")
        loaded = re.compile(r"loaded 4 resources \(\+\d+ chars → \d+\)")
        expect(updates.filter(has_text=loaded)).to_have_count(1)
        excluded = re.compile(r"excluded 1 resource \(-\d+ chars → \d+\)")
        expect(updates.filter(has_text=excluded)).to_have_count(1)
        expect(updates.filter(has_text="expanded move_item")).to_have_count(1)
        expect(updates.filter(has_text="sorted 3 resources")).to_have_count(1)

        # Decisions and verdicts.
        decisions = chat.locator("[data-testid='decision']")
        expect(decisions).to_have_count(4)
        expect(decisions.nth(1).locator(".pursuit-text")).to_have_text(
            'decided: execute move_item(item_uri="res://item/brass-compass", to_uri="res://character/mira-voss")'
        )
        expect(decisions.last).to_contain_text("decided: finalize (success)")
        verdicts = chat.locator("[data-testid='verdict']")
        expect(verdicts).to_have_count(4)
        refine = verdicts.first
        expect(refine).to_contain_text("refine: required context, expected actions, success criteria")
        expect(refine.locator(".verdict-delta li").first).to_contain_text(
            "required context: The compass's owner must become res://character/mira-voss."
        )
        expect(verdicts.nth(1).locator(".pursuit-text")).to_have_text("approved (confidence 0.9)")

        # The executed steps are ordinary tool lines.
        expect(chat.locator(".tool", has_text="move_item")).to_contain_text("ok")
        expect(chat.locator(".tool", has_text="add_chapter_note")).to_contain_text("ok")

        # The answer with its structured Resolution.
        outcome = answer.locator("[data-testid='outcome']")
        expect(outcome).to_have_attribute("data-kind", "resolution")
        expect(outcome).to_contain_text("Resolution")
        expect(outcome).to_contain_text("statussuccess")
        expect(outcome).to_contain_text("endedapproved by the refinement analysis")

        # Nothing of the events shows up as raw JSON.
        text = chat.inner_text()
        assert [key for key in RAW_KEYS if key in text] == []
        page.screenshot(path=str(tmp_path / "page-goal-pursuit.png"), full_page=True)

        # What the demo does not produce: an OperationPlan, a deferred approval, unknown names, retries.
        shown = page.evaluate(
            """async () => {
                const m = await import("/static/pursuit.js");
                const text = (node) => node.textContent;
                return {
                    plan: text(m.outcomeBlock({answer: "Plan.", exit: "max_iterations", operationPlan: {
                        kind: "operation_plan", tool: "move_item", params: {item_uri: "res://item/a"},
                        reason: "Give it back."}})),
                    deferred: text(m.verdictLine({verdict: "approve", confidence: 0.8, deferred: true})),
                    missing: text(m.contextLine({action: "loaded", uris: [], missing: ["res://x/y"]})),
                    collapsed: text(m.contextLine({action: "collapsed", tools: ["move_item"], chars: -120,
                                                   contextChars: 900})),
                    end: m.phaseEndText({reason: "answered", promptChars: 10, promptTokens: 3, retries: 2}),
                };
            }"""
        )
        assert shown == {
            "plan": "Operation plantoolmove_itemitem_urires://item/areasonGive it back."
            "endedthe iteration limit was reached",
            "deferred": "✔approved (confidence 0.8) · deferred: too early to execute (min_iter)",
            "missing": "≡loaded 0 resourcesnot found: res://x/y",
            "collapsed": "≡collapsed move_item (-120 chars → 900)",
            "end": "answered · prompt 10 chars, 3 tokens, 2 corrective retries",
        }


QUESTION = "Who works on the streaming server?"
#: Wire names of agent_network's event fields and its raw action names: none may reach the page.
NETWORK_RAW = ['"type"', '"decision"', '"action"', '"action_reasoning"', '"action_details"', '"target_agent"',
               '"from"', '"to"', '"executionId"', '"promptChars"', '"transcript"', '"agent_key"',
               "USE_TOOL", "ROUTE_TO_AGENT", "RESPOND"]  # fmt: skip


def test_page_shows_agent_network_readably(servers: Any, tmp_path: Path) -> None:
    """agent_network's demo (the default scripted:demo model runs the bundled network): each agent's
    step with its reasoning, the handoffs with their notes, tool lines with their execution ids, and
    the answer titled with the agent that responded, all as text."""
    server = servers()
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='agent_network']")).to_have_count(1)
        page.locator("#protocol").select_option("agent_network")
        expect(page.locator("#protocol-summary")).to_contain_text("network of agents")

        send(page, QUESTION)
        answer = page.locator("#answer")
        expect(answer).to_contain_text("Linus works on the streaming server.", timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        expect(chat.locator(".msg.assistant .who").last).to_have_text("assistant · agent_network")
        expect(answer.locator(".answer-label")).to_have_text("Final answer from writer")
        expect(answer).to_have_attribute("data-agent", "writer")

        # Each agent's step: who, in which epoch, what it decided; the reasoning dimmed; the prompt size.
        steps = chat.locator("[data-testid='agent-step']")
        expect(steps).to_have_count(5)
        heads = steps.locator(".network-head")
        expect(heads.nth(0)).to_contain_text("step 1 · triage (epoch 1) decides to route to researcher")
        expect(heads.nth(0)).to_contain_text(re.compile(r"\(prompt \d+ chars, \d+ tokens\)"))
        expect(steps.nth(0).locator("[data-testid='agent-reasoning']")).to_have_text(
            "The question needs facts from the workspace documents: the researcher can read them."
        )
        expect(heads.nth(1)).to_contain_text("step 2 · researcher (epoch 2) decides to use search_files")
        expect(heads.nth(2)).to_contain_text("step 3 · researcher (epoch 2) decides to use read_file")
        expect(heads.nth(3)).to_contain_text("step 4 · researcher (epoch 2) decides to route to writer")
        expect(heads.nth(4)).to_contain_text("step 5 · writer (epoch 3) decides to respond")
        expect(steps.locator("[data-testid='agent-reasoning']")).to_have_count(5)
        expect(chat.locator("[data-testid='agent-refused']")).to_have_count(0)

        # The handoffs, each with the note the deciding agent left.
        routes = chat.locator("[data-testid='route']")
        expect(routes).to_have_count(2)
        expect(routes.nth(0).locator(".network-head")).to_have_text("⇢ triage → researcher (epoch 2)")
        expect(routes.nth(0).locator("[data-testid='route-note']")).to_have_text(
            "Find who works on the streaming server and which roadmap milestone covers streaming."
        )
        expect(routes.nth(1).locator(".network-head")).to_have_text("⇢ researcher → writer (epoch 3)")
        expect(routes.nth(1)).to_contain_text("team.md: Linus works on the streaming server.")

        # The researcher's tool calls are ordinary tool lines, with their short execution ids.
        tools = chat.locator("[data-testid='tool-line']")
        expect(tools).to_have_count(2)
        expect(tools.nth(0)).to_contain_text('search_files{"path":"docs","query":"stream"}')
        expect(tools.nth(1)).to_contain_text('read_file{"path":"docs/team.md"}ok')
        for index in range(2):
            expect(tools.nth(index).locator("[data-testid='execution-id']")).to_have_text(
                re.compile(r"^#[0-9a-f]{8}$")
            )

        # In order: triage's step, the handoff, the researcher's steps and tools, the handoff, the answer.
        lines = chat.locator(".msg.assistant").last.locator(".body > *")
        order = lines.evaluate_all("nodes => nodes.map((node) => node.dataset.testid)")
        assert order == ["agent-step", "route", "agent-step", "tool-line", "agent-step", "tool-line",
                         "agent-step", "route", "agent-step", "answer"]  # fmt: skip

        # Nothing of the events shows up as raw JSON.
        text = chat.inner_text()
        assert [key for key in NETWORK_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-agent-network.png"), full_page=True)

        # What the demo does not produce: refused decisions, token counts and retries, a cut transcript.
        shown = page.evaluate(
            """async () => {
                const m = await import("/static/network.js");
                const text = (node) => node.textContent;
                const step = (decision, extra) => text(m.agentStepLine(
                    {step: 3, agent: "triage", epoch: 1, decision, promptChars: 900, ...extra}));
                return {
                    tool: step({action: "USE_TOOL", action_reasoning: "Read it.", action_details: {
                        tool: "read_file", params: {path: "docs/a.md"}}},
                        {refused: "triage has no tool 'read_file' (its tools: list_files)",
                         promptTokens: 210, retries: 1}),
                    route: step({action: "ROUTE_TO_AGENT", action_reasoning: "Hand over.", action_details: {
                        target_agent: "boss", message: "Over to you."}},
                        {refused: "triage cannot route to 'boss'"}),
                    cut: text(m.transcriptBlock([{type: "agent", step: 1, epoch: 1, agent_key: "triage",
                        decision: {action: "USE_TOOL", action_reasoning: "Look.",
                                   action_details: '{"tool": "list_files", "params": {"path": "do...'}}])),
                    budget: m.budgetLine({budget: "tool_errors", used: 3, limit: 3}),
                };
            }"""
        )
        assert shown == {
            "tool": "▶ step 3 · triage (epoch 1) decides to use read_file (prompt 900 chars, 210 tokens, "
            "1 corrective retry)Read it.✗ refused: triage has no tool 'read_file' (its tools: list_files) "
            'wanted: read_file(path="docs/a.md")',
            "route": "▶ step 3 · triage (epoch 1) decides to route to boss (prompt 900 chars)Hand over."
            "✗ refused: triage cannot route to 'boss' note: Over to you.",
            "cut": "Transcript · 1 log entry▶ step 1 · triage (epoch 1): decided to use list_files — Look.",
            "budget": "budget exhausted: tool errors (failed tool calls and refused decisions) (3 of 3)",
        }


def decision(action: str, reasoning: str, **details: Any) -> dict[str, Any]:
    """One scripted turn of an agent_network model: an AgentDecision tool call."""
    args = {"action": action, "action_reasoning": reasoning, "action_details": details}
    return {"content": "", "tool_calls": [{"name": "AgentDecision", "args": args}]}


MARKUP_NOTE = "Find the <b>team</b> file."


def test_page_shows_an_agent_network_transcript_readably(servers: Any, tmp_path: Path) -> None:
    """A network that spends its tool-error budget (a refused decision, two failed reads) ends with an
    error that carries the execution log: the page lists it one line per entry, and escapes the notes."""
    script = tmp_path / "refused.json"
    turns = [
        decision("USE_TOOL", "Read the team file myself.", tool="read_file", params={"path": "docs/team.md"}),
        decision("ROUTE_TO_AGENT", "The writer then.", target_agent="writer", message="Answer it."),
        decision("ROUTE_TO_AGENT", "Research first.", target_agent="researcher", message=MARKUP_NOTE),
        decision("USE_TOOL", "Read a missing file.", tool="read_file", params={"path": "docs/missing.md"}),
        decision("USE_TOOL", "Read it again.", tool="read_file", params={"path": "docs/nope.md"}),
    ]
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    server = servers(PHASEGRAPH_MODEL=f"scripted:{script}")
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='agent_network']")).to_have_count(1)
        page.locator("#protocol").select_option("agent_network")
        send(page, QUESTION)
        expect(page.locator("#status")).to_have_text("error", timeout=WAIT)
        expect(page.locator("#answer")).to_have_count(0)

        # The refused decision says why, and what it wanted.
        refused = chat.locator("[data-testid='agent-refused']")
        expect(refused).to_have_count(1)
        expect(refused).to_have_text(
            "✗ refused: triage has no tool 'read_file' (its tools: list_files) "
            'wanted: read_file(path="docs/team.md")'
        )
        expect(chat.locator(".agent-step.refused")).to_contain_text("step 1 · triage (epoch 1)")

        # Notes are text, never markup.
        note = chat.locator("[data-testid='route-note']", has_text="team")
        expect(note).to_have_text(MARKUP_NOTE)
        expect(chat.locator("b")).to_have_count(0)

        # The budget, the error, and its transcript one line per entry.
        expect(chat.locator(".note.warn").last).to_have_text(
            "budget exhausted: tool errors (failed tool calls and refused decisions) (3 of 3)"
        )
        expect(chat.locator(".note.error")).to_contain_text(
            "budget_exhausted: no agent responded within the budget: 3 failed tool calls or refused decisions"
        )
        transcript = chat.locator("[data-testid='transcript']")
        expect(transcript.locator("summary")).to_have_text("Transcript · 7 log entries")
        entries = transcript.locator("[data-testid='transcript-entry']")
        expect(entries).to_have_count(7)
        expect(entries.nth(0)).to_have_text(
            "▶ step 1 · triage (epoch 1): decided to use read_file — Read the team file myself. "
            "refused: triage has no tool 'read_file' (its tools: list_files)"
        )
        expect(entries.nth(0)).to_have_class(re.compile(r"\brefused\b"))
        expect(entries.nth(1)).to_have_text(
            "▶ step 2 · triage (epoch 1): decided to route to writer — The writer then."
        )
        expect(entries.nth(2)).to_contain_text("step 3 · writer (epoch 2): decided to route to researcher")
        expect(entries.nth(4)).to_have_attribute("data-type", "tool")
        expect(entries.nth(4)).to_have_text(
            re.compile(
                r'^⚙ step 4 · researcher \(epoch 3\): read_file\(path="docs/missing\.md"\) error '
                r"— ERROR: 'docs/missing\.md' is not a file in the workspace \(\d+ ms · #[0-9a-f]{8}\)$"
            )
        )
        expect(entries.nth(6)).to_contain_text(
            'step 5 · researcher (epoch 3): read_file(path="docs/nope.md") error'
        )

        text = chat.inner_text()
        assert [key for key in NETWORK_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-agent-network-error.png"), full_page=True)


XML_TASK = "Summarise the roadmap and say who is on the team."
#: Wire names of xml_contract's event fields: none may reach the page as raw JSON.
XML_RAW = ['"type"', '"kind"', '"group"', '"steps"', '"stepIndex"', '"service"', '"tool"', '"args"',
           '"problems"', '"callId"', '"durationMs"']  # fmt: skip


def test_page_shows_xml_contract_readably(servers: Any, tmp_path: Path) -> None:
    """xml_contract's demo (the default scripted:demo model, the bundled demo MCP server on the demo
    workspace): each block as a header with its calls nested in step order, each filled in with its
    result, the sequential step's placeholder replaced, and the final answer, all as text."""
    dataset = tmp_path / "dataset"
    server = servers(PHASEGRAPH_DATASET_DIR=str(dataset))
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='xml_contract']")).to_have_count(1)
        page.locator("#protocol").select_option("xml_contract")
        expect(page.locator("#protocol-summary")).to_contain_text("XML blocks")

        send(page, XML_TASK)
        answer = page.locator("#answer")
        expect(answer).to_contain_text("The roadmap has two milestones", timeout=WAIT)
        expect(answer).to_contain_text("3 people work on the project")
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        expect(chat.locator(".msg.assistant .who").last).to_have_text("assistant · xml_contract")

        # Two blocks, each a header with its kind, id and number of calls.
        blocks = chat.locator("[data-testid='xml-block']")
        expect(blocks).to_have_count(2)
        parallel, sequential = blocks.nth(0), blocks.nth(1)
        expect(parallel).to_have_attribute("data-kind", "parallel")
        expect(parallel.locator(".xml-block-title")).to_have_text("parallel block 1.1 · 2 calls")
        expect(sequential).to_have_attribute("data-kind", "sequential")
        expect(sequential.locator(".xml-block-title")).to_have_text("sequential block 2.1 · 2 calls")

        # Their calls nested under them in step order, each with its result.
        reads = parallel.locator("[data-testid='xml-step']")
        expect(reads).to_have_count(2)
        expect(reads.nth(0).locator(".tool-head")).to_have_text(
            re.compile(r'^1\. demo\.read_file\(path="docs/roadmap\.md"\) ok · \d+ ms$')
        )
        expect(reads.nth(1).locator(".tool-head")).to_have_text(
            re.compile(r'^2\. demo\.read_file\(path="docs/team\.md"\) ok · \d+ ms$')
        )
        steps = sequential.locator("[data-testid='xml-step']")
        expect(steps).to_have_count(2)
        expect(steps.nth(0).locator(".tool-head")).to_have_text(
            re.compile(r'^1\. demo\.calculate\(expression="1 \+ 1 \+ 1"\) ok · \d+ ms$')
        )
        # Step 2 ran with step 1's result in place of its placeholder; what was written stays readable.
        expect(steps.nth(1).locator(".tool-head")).to_have_text(
            re.compile(r'^2\. demo\.slow_echo\(text="3 people work on the project", ms=50\) ok · \d+ ms$')
        )
        expect(steps.nth(1).locator(".xml-written")).to_have_text(
            'as written: demo.slow_echo(text="$result_of_step_1 people work on the project", ms=50)'
        )
        expect(chat.locator("[data-testid='validation-error']")).to_have_count(0)

        # In order: the phases, each tool phase followed by its block, then the answer.
        lines = chat.locator(".msg.assistant").last.locator(".body > *")
        order = lines.evaluate_all(
            "nodes => nodes.map((node) => node.dataset.testid === 'phase-header'"
            " ? node.dataset.phase : node.dataset.testid)"
        )
        assert order == ["action_phase", "tool_phase", "xml-block", "action_phase", "tool_phase", "xml-block",
                         "action_phase", "answer"]  # fmt: skip
        headers = chat.locator("[data-testid='phase-header']")
        expect(headers.nth(1)).to_contain_text("tool phase #2")
        expect(headers.nth(1)).to_contain_text("executed")

        # Nothing of the events shows up as raw JSON.
        text = chat.inner_text()
        assert [key for key in XML_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-xml-contract.png"), full_page=True)

        # Each tool phase logged one line of training data.
        files = list(dataset.glob("xml_contract/*.jsonl"))
        assert [len(path.read_text(encoding="utf-8").splitlines()) for path in files] == [2]

        # What the demo does not produce: results out of order, a failed step, a refused answer, the budget.
        shown = page.evaluate(
            """async () => {
                const m = await import("/static/xml.js");
                const box = m.xmlBlockBox({kind: "sequential", group: "3.1", steps: [
                    {service: "demo", tool: "always_fails", args: {}},
                    {service: "demo", tool: "calculate", args: {expression: "$result_of_step_1"}}]});
                const first = m.stepOf(box, 1);
                m.callStarted(first, {callId: "3.1.1", name: "demo.always_fails", args: {}});
                m.callFinished(first, {status: "error", durationMs: 2.4, error: "no luck"});
                m.closeBlock(box);
                const fan = m.xmlBlockBox({kind: "parallel", group: "1.2", steps: [
                    {service: "demo", tool: "slow_echo", args: {text: "a", ms: 90}},
                    {service: "demo", tool: "slow_echo", args: {text: "b", ms: 10}}]});
                for (const i of [1, 2]) m.callStarted(m.stepOf(fan, i), {name: "demo.slow_echo",
                    args: {text: i === 1 ? "a" : "b", ms: i === 1 ? 90 : 10}});
                m.callFinished(m.stepOf(fan, 2), {status: "ok", durationMs: 11});
                const lines = (node) => [...node.querySelectorAll(".xml-step")].map((n) => n.textContent);
                const midway = lines(fan);
                m.callFinished(m.stepOf(fan, 1), {status: "ok", durationMs: 91});
                const orphan = m.orphanBox({group: "4.1", stepIndex: 2});
                for (const i of [2, 1]) m.addStep(orphan, {name: "demo.read_file", args: {path: `${i}.md`},
                                                            stepIndex: i});
                return {
                    orphan: [orphan.querySelector(".xml-block-head").textContent, ...lines(orphan)],
                    failed: lines(box),
                    midway,
                    done: lines(fan),
                    answer: m.validationBox({group: null, problems: ["a DTD"]}).textContent,
                    budget: m.xmlBudgetLine({budget: "steps", used: 8, limit: 8}),
                };
            }"""
        )
        assert shown == {
            "orphan": ["⚙ block 4.1", '1. demo.read_file(path="1.md") waiting',
                       '2. demo.read_file(path="2.md") waiting'],
            "failed": ["1. demo.always_fails() error · 2 msno luck",
                       '2. demo.calculate(expression="$result_of_step_1") not run'],
            "midway": ['1. demo.slow_echo(text="a", ms=90) running…',
                       '2. demo.slow_echo(text="b", ms=10) ok · 11 ms'],
            "done": ['1. demo.slow_echo(text="a", ms=90) ok · 91 ms',
                     '2. demo.slow_echo(text="b", ms=10) ok · 11 ms'],
            "answer": "✗ the answer was refused; nothing was run:a DTD"
            "The model reads these problems and may write the block again.",
            "budget": "budget exhausted: tool steps (8 of 8): one last call answers without tools",
        }  # fmt: skip


def test_page_shows_a_refused_xml_block(servers: Any, tmp_path: Path) -> None:
    """A block naming an unknown tool and an unknown service is refused as a whole: a red box lists
    its problems (tags in them shown as text), nothing of it runs, and the model's next answer does."""
    script = tmp_path / "refused.json"
    turns = [
        {"content": "<parallel>\n  <demo><read_files>docs/team.md</read_files></demo>\n"
                    "  <web><search>team</search></web>\n</parallel>\n<execute_tools />"},
        {"content": "<demo><read_file>docs/team.md</read_file></demo>\n<execute_tools />"},
        {"content": "Final Answer: Ada, Linus and Grace are on the team."},
    ]  # fmt: skip
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    server = servers(PHASEGRAPH_MODEL=f"scripted:{script}", PHASEGRAPH_DATASET_DIR=str(tmp_path / "dataset"))
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='xml_contract']")).to_have_count(1)
        page.locator("#protocol").select_option("xml_contract")
        send(page, "Who is on the team?")
        expect(page.locator("#answer")).to_contain_text("Ada, Linus and Grace are on the team.", timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)

        refused = chat.locator("[data-testid='validation-error']")
        expect(refused).to_have_count(1)
        expect(refused.locator(".xml-invalid-head")).to_have_text("✗ block 1.1 was not run:")
        problems = refused.locator("[data-testid='validation-problem']")
        expect(problems).to_have_count(2)
        expect(problems.nth(0)).to_have_text(
            re.compile(r"^step 1 \(demo\.read_files\): unknown tool \(tools of demo: .*read_file.*\)$")
        )
        expect(problems.nth(1)).to_have_text("step 2: unknown service <web> (services: demo)")
        expect(chat.locator("web")).to_have_count(0)  # text, never markup

        # Nothing of the refused block ran; the next answer's single call did.
        blocks = chat.locator("[data-testid='xml-block']")
        expect(blocks).to_have_count(1)
        expect(blocks.locator(".xml-block-title")).to_have_text("single block 2.1 · 1 call")
        expect(blocks.locator("[data-testid='xml-step']")).to_have_text(
            re.compile(r'^1\. demo\.read_file\(path="docs/team\.md"\) ok · \d+ ms$')
        )
        lines = chat.locator(".msg.assistant").last.locator(".body > *")
        order = lines.evaluate_all("nodes => nodes.map((node) => node.dataset.testid)")
        assert order == ["phase-header", "validation-error", "phase-header", "phase-header", "phase-header",
                         "xml-block", "phase-header", "answer"]  # fmt: skip

        text = chat.inner_text()
        assert [key for key in XML_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-xml-contract-refused.png"), full_page=True)


#: Wire names of the planner's event fields: none may reach the page as raw JSON.
PLANNER_RAW = ['"type"', '"contextType"', '"requiredBehaviors"', '"state"', '"plan_id"', '"planId"',
               '"steps"', '"execution_mode"', '"depends_on"', '"stepId"', '"verdict"', '"usage"',
               '"inputTokens"', '"costUsd"', '"pendingPlan"', '"budget"']  # fmt: skip
PLAN = {
    "plan_id": "plan-1",
    "objective": "Create the Spring Launch project and publish its brief",
    "context_type": "project_create",
    "execution_mode": "agent_review",
    "status": "draft",
    "steps": [
        {"id": "s1", "tool": "list_templates", "args": {"query": "launch"},
         "rationale": "Confirm the template exists.", "depends_on": []},
        {"id": "s2", "tool": "create_project",
         "args": {"name": "Spring Launch", "template_id": "product-launch"},
         "rationale": "Create the project from it.", "depends_on": ["s1"]},
        {"id": "s3", "tool": "publish_context_document",
         "args": {"project_id": "${s2.project.id}", "title": "Project brief",
                  "body": "Goal: launch the spring product line in April. Audience: existing customers."},
         "rationale": "Give the project its brief.", "depends_on": ["s2"]},
    ],
    "reasoning": "The template first, then the project, then its brief.",
    "requested_outputs": ["project"],
    "priority_entities": ["product-launch"],
}  # fmt: skip
USAGE = {"calls": 3, "inputTokens": 1234, "outputTokens": 210, "costUsd": 0.000321}
PLANNER_ANSWER = "Spring Launch already exists, so I created nothing new."


def wire(*events: EventBase, context_type: str = "project_create") -> list[dict[str, Any]]:
    """Planner events as its stream sends them: wire names, numbered, with what every planner event has."""
    common = {
        "request_id": "r-planner",
        "project_id": "default",
        "protocol": "planner",
        "context_type": context_type,
    }
    return [event.model_copy(update={**common, "seq": seq}).to_dict() for seq, event in enumerate(events, 1)]


def session(**fields: Any) -> Session:
    """A project_create session's first event (its guidance shortened)."""
    return Session(
        session_id="t-1",
        user_id="ada",
        profile="balanced",
        intent="Understand what the user needs, choose a template and create the project.",
        required_behaviors=[
            "Discover templates before creating one.",
            "Publish the project's context document.",
        ],
        tools=["list_templates", "create_project", "agent_create_plan"],
        **fields,
    )


def render(page: Page, events: list[dict[str, Any]], turn: str | None = None) -> None:
    """Feed wire events to the page's own renderer, as its stream reader does (in a new turn if named)."""
    page.evaluate(
        """async ([events, turn]) => {
            const chat = await import("/static/chat.js");
            if (turn) chat.startTurn(turn);
            for (const event of events) chat.renderEvent(event);
        }""",
        [events, turn],
    )


def test_page_sends_the_planner_settings(servers: Any, tmp_path: Path) -> None:
    """The planner's inputs show only while planner is chosen; what they say goes in the body's settings
    (blanks left out, valid for the protocol), and no other protocol gets any."""
    server = servers()
    bodies: list[dict[str, Any]] = []
    stream = wire(session(entity_id="p-7"), AgentState(state="thinking"), Final(answer="Noted.", usage=USAGE))

    def answer(route: Any) -> None:
        """The run's stream, canned: the planner's Python is not what this test is about."""
        body = route.request.post_data_json
        bodies.append(body)
        frames = "".join(f"event: {e['type']}\ndata: {json.dumps({**e, 'requestId': body['requestId']})}\n\n"
                         for e in stream)  # fmt: skip
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=frames)

    with open_page() as page:
        page.route("**/api/runs/*/stream", answer)
        page.goto(server.url)
        fieldset = page.locator("[data-testid='planner-settings']")
        expect(page.locator("#protocol option[value='planner']")).to_have_count(1)
        expect(page.locator("#protocol")).to_have_value("triggered_phase")
        expect(fieldset).to_be_hidden()

        page.locator("#protocol").select_option("planner")
        expect(fieldset).to_be_visible()
        for label in ("Context type", "Project in scope (entity id)", "User id", "Profile"):
            expect(fieldset.get_by_label(label)).to_be_visible()
        expect(fieldset.get_by_label("Profile").locator("option:checked")).to_have_text("the context type's")
        fieldset.get_by_label("Context type").select_option("project")
        fieldset.get_by_label("Project in scope (entity id)").fill("p-7")
        fieldset.get_by_label("User id").fill("ada")
        fieldset.get_by_label("Profile").select_option("quality")
        send(page, "Audit it.")
        expect(page.locator("#answer")).to_contain_text("Noted.", timeout=WAIT)
        chosen = {"context_type": "project", "entity_id": "p-7", "user_id": "ada", "profile": "quality"}
        assert bodies[-1]["settings"] == chosen
        assert get_protocol("planner").client_settings(chosen) == chosen  # the server takes them as they are
        # The stream went through the page's reader: its events read as text.
        turn = page.locator("#chat .msg.assistant").last
        expect(turn.locator(".who")).to_have_text("assistant · planner")
        expect(turn.locator("[data-testid='planner-session']")).to_contain_text("project p-7 · user ada")
        expect(turn.locator("[data-testid='agent-state']")).to_have_text("● Agent finished")
        expect(page.locator("#answer [data-testid='usage']")).to_have_text(
            "3 model calls · 1,234 in / 210 out tokens · $0.000321"
        )
        expect(page.locator("#status")).to_have_text("done")
        page.screenshot(path=str(tmp_path / "page-planner-settings.png"), full_page=True)

        # Blank inputs are left out: the protocol's defaults apply.
        fieldset.get_by_label("User id").fill("")
        fieldset.get_by_label("Profile").select_option("")
        send(page, "Again.")
        expect(page.locator("#chat [data-testid='answer']")).to_have_count(2, timeout=WAIT)
        assert bodies[-1]["settings"] == {"context_type": "project", "entity_id": "p-7"}

        # Another protocol: the inputs go away, and nothing of them is sent. A thread holds one protocol's
        # conversation, so the other protocol starts a new thread.
        page.locator("#protocol").select_option("xml_contract")
        expect(fieldset).to_be_hidden()
        expect(page.locator("#chat [data-testid='answer']")).to_have_count(0)
        send(page, "And now?")
        expect(page.locator("#chat [data-testid='answer']")).to_have_count(1, timeout=WAIT)
        assert "settings" not in bodies[-1]
        assert [body["message"] for body in bodies] == ["Audit it.", "Again.", "And now?"]
        assert bodies[0]["threadId"] == bodies[1]["threadId"] != bodies[2]["threadId"]

        # The choices are remembered with the other run settings.
        page.reload()
        expect(page.locator("#protocol")).to_have_value("xml_contract")
        page.locator("#protocol").select_option("planner")
        expect(fieldset.get_by_label("Context type")).to_have_value("project")
        expect(fieldset.get_by_label("Project in scope (entity id)")).to_have_value("p-7")


def test_page_shows_each_plan_step_once_with_its_output_on_demand(servers: Any, tmp_path: Path) -> None:
    """The planner's demo plan runs three steps: each shows once, as a line of the plan's card (its call
    gets no tool row of its own); the session's own call is the one tool row; with tool outputs on, a
    step's output opens from its line."""
    server = servers()
    with open_page() as page:
        page.goto(server.url)
        expect(page.locator("#protocol option[value='planner']")).to_have_count(1)
        page.locator("#protocol").select_option("planner")
        page.locator("#show-tool-outputs").check()
        page.locator("#message").fill("Create a project for the spring launch.")
        page.locator("#send").click()
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        turn = page.locator("#chat .msg.assistant").last
        steps = turn.locator("[data-testid='plan-card'] .plan-step")
        expect(steps).to_have_count(3)
        expect(steps.locator(".plan-call")).to_have_text(
            [re.compile(r"^list_templates\("), re.compile(r"^create_project\("),
             re.compile(r"^publish_context_document\(")]
        )  # fmt: skip
        rows = turn.locator("[data-testid='tool-line']")
        expect(rows).to_have_count(1)
        expect(rows.locator(".tool-name")).to_have_text("list_templates")
        outputs = steps.locator(".plan-step-output")
        expect(outputs).to_have_count(3)
        expect(outputs.nth(1).locator(".tool-output")).to_be_hidden()
        outputs.nth(1).locator("summary").click()
        expect(outputs.nth(1).locator(".tool-output")).to_contain_text("spring-launch")


def test_page_shows_a_planner_turn_readably(servers: Any, tmp_path: Path) -> None:
    """A planner turn fed to the page's renderer: the session header, one status chip that changes in
    place, the plan card with the reviewer's verdict and each step's state, and the usage line, as text."""
    server = servers()
    started = {"plan_id": "plan-1"}
    events = wire(
        session(),
        AgentState(state="thinking"),
        TextChunk(text="Let me see which templates exist. "),
        AgentState(state="executing_tool", details="list_templates"),
        ToolCall(call_id="c1", name="list_templates", args={"query": "launch"}, signature="list_templates"),
        ToolResultEvent(call_id="c1", name="list_templates", status="ok", duration_ms=3.2),
        AgentState(state="thinking"),
        PlanCreated(plan=PLAN, **started),
        PlanReview(verdict="approved", notes="The order is right.", **started),
        AgentState(state="executing_plan", details=PLAN["objective"], **started),
        StepStart(step_id="s1", tool="list_templates", args={"query": "launch"}, step=1, **started),
        StepComplete(step_id="s1", tool="list_templates", status="ok", summary="1 template: product-launch",
                     step=1, **started),
        StepStart(step_id="s2", tool="create_project", args=PLAN["steps"][1]["args"], step=2, **started),
        StepComplete(step_id="s2", tool="create_project", status="error",
                     summary="ERROR: a project named 'Spring Launch' exists", step=2, **started),
        StepComplete(step_id="s3", tool="publish_context_document", status="skipped",
                     summary="skipped: s2 did not succeed", step=3, **started),
        AgentState(state="thinking", **started),
        TextChunk(text=PLANNER_ANSWER, **started),
        Final(answer=PLANNER_ANSWER, usage=USAGE, **started),
    )  # fmt: skip
    with open_page() as page:
        page.goto(server.url)
        chat, status = page.locator("#chat"), page.locator("#status")
        expect(page.locator("#protocol option[value='planner']")).to_have_count(1)
        chip = chat.locator("[data-testid='agent-state']")

        # The session header, then one status chip that says what the agent does now.
        render(page, events[:2], turn="assistant · planner")
        header = chat.locator("[data-testid='planner-session']")
        expect(header.locator(".planner-head")).to_have_text("◆ project create session · profile balanced · "
                                                             "user ada (3 tools)")  # fmt: skip
        expect(header.locator(".planner-intent")).to_have_text(
            "Understand what the user needs, choose a template and create the project."
        )
        expect(header.locator("li")).to_have_text(
            ["Discover templates before creating one.", "Publish the project's context document."]
        )
        expect(chip).to_have_text("● Agent is thinking…")
        expect(status).to_have_text("Agent is thinking…")
        render(page, events[2:6])
        expect(chip).to_have_text("● Executing tool list_templates…")
        expect(status).to_have_text("Executing tool list_templates…")  # the tool events leave it as it is

        # The plan card: objective, mode, status and its steps in order, each waiting; then the verdict.
        render(page, events[6:8])
        card = chat.locator("[data-testid='plan-card']")
        expect(card.locator(".plan-head")).to_have_text(
            "☰ Plan: Create the Spring Launch project and publish its brief"
        )
        expect(card.locator("[data-testid='plan-meta']")).to_have_text(
            "mode: agent review (a reviewer checks it first) · status: draft"
        )
        steps = card.locator("[data-testid='plan-step']")
        expect(steps.locator(".plan-step-head")).to_have_text([
            's1 list_templates(query="launch") waiting',
            's2 create_project(name="Spring Launch", template_id="product-launch") waiting',
            's3 publish_context_document(project_id="${s2.project.id}", title="Project brief", '
            'body="Goal: launch the spring product line in April.…") waiting',
        ])  # fmt: skip
        expect(steps.locator(".plan-step-rationale")).to_have_text(
            ["Confirm the template exists.", "Create the project from it. (after s1)",
             "Give the project its brief. (after s2)"]
        )  # fmt: skip
        render(page, events[8:11])
        expect(card.locator("[data-testid='plan-verdict']")).to_have_text(
            "review: approved The order is right."
        )
        expect(card.locator("[data-testid='verdict-badge']")).to_have_text("approved")
        expect(chip).to_have_text("● Executing plan…")
        expect(steps.nth(0).locator(".plan-step-status")).to_have_text("running…")
        expect(card.locator("[data-testid='plan-meta']")).to_contain_text("status: running")

        # Each step ends ok, with an error, or skipped, with what it returned or why it did not run.
        render(page, events[11:15])
        expect(steps.locator(".plan-step-status")).to_have_text(["ok", "error", "skipped"])
        expect(steps.locator(".plan-step-summary")).to_have_text(
            ["1 template: product-launch", "ERROR: a project named 'Spring Launch' exists",
             "skipped: s2 did not succeed"]
        )  # fmt: skip
        expect(card.locator("[data-testid='plan-meta']")).to_have_text(
            "mode: agent review (a reviewer checks it first) · status: finished: 1 ok · 1 error · 1 skipped"
        )

        # The answer with the turn's usage; the one chip is settled.
        render(page, events[15:])
        expect(page.locator("#answer .answer-text")).to_have_text(PLANNER_ANSWER)
        expect(page.locator("#answer [data-testid='usage']")).to_have_text(
            "3 model calls · 1,234 in / 210 out tokens · $0.000321"
        )
        expect(chip).to_have_count(1)
        expect(chip).to_have_text("● Agent finished")
        expect(status).to_have_text("done")
        expect(card).to_have_count(1)
        expect(chat.locator("[data-testid='tool-line']")).to_contain_text(
            'list_templates{"query":"launch"}ok'
        )

        # In order: the header, the chip, text, the tool, the card and the answer (its text, streamed, once).
        lines = chat.locator(".msg.assistant").last.locator(".body > *")
        order = lines.evaluate_all("nodes => nodes.map((node) => node.dataset.testid || node.className)")
        assert order == ["planner-session", "agent-state", "text", "tool-line", "plan-card", "answer"]

        text = chat.inner_text()
        assert [key for key in PLANNER_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-planner.png"), full_page=True)


def test_page_asks_for_a_planner_review_in_words(servers: Any, tmp_path: Path) -> None:
    """A draft_only plan: its card asks the user to answer in their own words (no buttons), the chip keeps
    waiting on them after the answer; the next turn says what it carried over; the budgets read as text."""
    server = servers()
    draft = {**PLAN, "execution_mode": "draft_only", "status": "pending_review"}
    waiting = "the drafted plan waits for your review"
    first = wire(
        session(),
        AgentState(state="thinking"),
        PlanCreated(plan=draft, plan_id="plan-1"),
        PlanReadyForReview(plan=draft, reasoning=PLAN["reasoning"], plan_id="plan-1"),
        AgentState(state="waiting_on_user", details=waiting),
        Final(answer="Here is the plan. Shall I run it?", usage={**USAGE, "calls": 1}),
    )
    confirm = {"id": "c9", "name": "archive_project", "args": {"project_id": "p-7"}, "signature": "archive"}
    second = wire(
        session(),
        LastTurnContext(turn=2, summary="Here is the plan. Shall I run it?", pending_plan=draft,
                        pending_confirmation=confirm),
        BudgetExhaustedEvent(budget="tool_calls", limit=8, used=8),
        BudgetExhaustedEvent(budget="session_seconds", limit=90, used=91),
        Final(answer="I stopped there.", fallback=True, usage=USAGE),
    )  # fmt: skip
    with open_page() as page:
        page.goto(server.url)
        chat = page.locator("#chat")
        expect(page.locator("#protocol option[value='planner']")).to_have_count(1)

        render(page, first, turn="assistant · planner")
        card = chat.locator("[data-testid='plan-card']")
        expect(card).to_have_count(1)  # plan_ready_for_review fills in the card plan_created drew
        expect(card.locator("[data-testid='plan-meta']")).to_have_text(
            "mode: draft only (waits for your review) · status: pending review"
        )
        prompt = card.locator("[data-testid='plan-review-prompt']")
        expect(prompt).to_have_text(
            "✎ This plan waits for your review. Reply in your own words: “looks good, run it”, or say what "
            "to change."
        )
        expect(card.locator("button")).to_have_count(0)
        expect(card.locator("[data-testid='plan-step'] .plan-step-status")).to_have_text(["waiting"] * 3)
        expect(chat.locator("[data-testid='agent-state']")).to_have_text(f"● Waiting on you: {waiting}")
        expect(page.locator("#answer [data-testid='usage']")).to_have_text(
            "1 model call · 1,234 in / 210 out tokens · $0.000321"
        )

        render(page, second, turn="assistant · planner")
        turn = chat.locator(".msg.assistant").last
        expect(turn.locator("[data-testid='last-turn']")).to_have_text(
            "carried over: Here is the plan. Shall I run it? · a plan waits for your review: Create the "
            "Spring Launch project and publish its brief · waiting for your yes: "
            'archive_project(project_id="p-7")'
        )
        expect(turn.locator(".note.warn")).to_have_text([
            "budget exhausted: tool calls (8 of 8): the turn answers from what it did",
            "budget exhausted: active time (91 of 90 s): the turn answers from what it did",
        ])  # fmt: skip
        expect(turn.locator("[data-testid='answer'] .answer-label")).to_have_text(
            "Final answer (fallback, built from tool results)"
        )

        text = chat.inner_text()
        assert [key for key in PLANNER_RAW if key in text] == []
        page.screenshot(path=str(tmp_path / "page-planner-review.png"), full_page=True)


def _box(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def test_page_fits_a_1024_pixel_screen_and_a_phone(servers: Any, tmp_path: Path) -> None:
    """At 1024 x 720 the sidebar stays beside the chat, the composer is on screen without scrolling and an
    open panel goes under the chat; at 390 px (a phone) the page is one column, the chat first, and
    nothing is wider than the screen."""
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=0))
    with open_page(viewport={"width": 1024, "height": 720}) as page:
        page.goto(server.url)
        send(page, "What is on the roadmap?")
        expect_done(page)
        sidebar, chat, send_button = _box(page, ".sidebar"), _box(page, "#chat"), _box(page, "#send")
        assert sidebar["x"] + sidebar["width"] <= chat["x"], (sidebar, chat)  # side by side
        assert chat["width"] >= 600, chat
        assert send_button["y"] + send_button["height"] <= 720, send_button  # on screen, no scrolling
        page.locator("#checkpoints-button").click()
        expect(page.locator("#checkpoints [data-testid='checkpoint-row']").first).to_be_visible(timeout=WAIT)
        panel = _box(page, "#checkpoints-panel")
        assert panel["y"] >= chat["y"] + 200 and panel["width"] >= 900, panel  # under the chat, full width
        assert _box(page, "#chat")["width"] >= 600
        assert page.evaluate("document.documentElement.scrollWidth") <= 1024

    with open_page(viewport={"width": 390, "height": 844}) as page:
        page.goto(server.url)
        send(page, "What is on the roadmap?")
        expect_done(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        chat, threads = _box(page, "#chat"), _box(page, ".threads-card")
        assert chat["y"] < threads["y"], (chat, threads)  # the chat first
        assert chat["width"] >= 340 and threads["width"] >= 340
        composer = _box(page, "#message")
        assert composer["y"] + composer["height"] <= 844, composer  # typing needs no scrolling
        answer = _box(page, "#answer")
        assert answer["x"] + answer["width"] <= 390, answer
