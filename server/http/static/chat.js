// @ts-check
// The chat column and the status chip: turns run events into messages, tool lines and answers.
// Only the DOM lives here; the request's state (status, ids) is kept by app.js.

import { answeredText, approvalCard, retireCard, settleCard } from "./approval.js";
import { el, els } from "./dom.js";
import { inPlanner, lastTurnLine, sessionLine, usageLine } from "./planner.js";
import { contextLine, decisionLine, outcomeBlock, verdictLine } from "./pursuit.js";
import { inXmlBlock, validationBox } from "./xml.js";
import { markdownBlock } from "./markdown.js";
import { finishToolRow, toolRow } from "./toolrow.js";
import {
  agentState,
  agentStep,
  budgetText,
  handoff,
  phaseEnded,
  phaseLabel,
  phaseStarted,
  planStep,
  planStepCall,
  planStepResult,
  reviewPlan,
  settleState,
  showError,
  showPlan,
  xmlBlock,
  xmlCall,
  xmlResult,
} from "./lines.js";
import {
  appendText,
  argsText,
  block,
  current,
  dropReplaced,
  endText,
  noteLine,
  releaseAnswerId,
  scrollChat,
  setChip,
  tag,
  turn,
} from "./turn.js";

export { addUserMessage, chipFor, endText, errorLine, forgetTurn, noteLine, setChip, startTurn } from "./turn.js";

function toolLine(callId, name, args, executionId) {
  const line = block(toolRow(callId, name, args, executionId));
  if (callId) current.tools.set(callId, line);
  return line;
}

function toolResult(ev) {
  // A result whose call we never saw (e.g. after a resume) still gets a line of its own.
  const line = current.tools.get(ev.callId) || toolLine(ev.callId, ev.name, undefined, ev.executionId);
  finishToolRow(line, ev);
  endText();
  scrollChat();
}

function answerLabel(ev) {
  const label = ev.agent ? `Final answer from ${ev.agent}` : "Final answer"; // agent_network: who responded
  if (ev.allToolsFailed) return `${label} (every tool call failed: it rests on no tool output)`;
  return ev.fallback ? `${label} (fallback, built from tool results)` : label;
}

function showFinal(ev) {
  endText();
  releaseAnswerId();
  // The answer is shown once, in its box: the text it was streamed as goes (text before it stays).
  const streamed = current.lastText;
  if (streamed && streamed.isConnected && streamed.textContent.trim() === String(ev.answer || "").trim()) {
    streamed.remove();
  }
  current.lastText = null;
  const box = el("div", "answer");
  box.id = "answer";
  if (ev.allToolsFailed) box.classList.add("unsupported");
  box.dataset.testid = "answer";
  if (ev.agent) box.dataset.agent = ev.agent;
  box.append(
    el("div", "answer-label", answerLabel(ev)),
    markdownBlock("answer-text", ev.answer),
  );
  const outcome = outcomeBlock(ev); // goal_pursuit: its Resolution or OperationPlan
  if (outcome) box.append(outcome);
  if (ev.usage) box.append(usageLine(ev.usage)); // planner: the turn's model calls, tokens and cost
  turn().append(tag(box));
  scrollChat();
}


// ---------------------------------------------------------------- approvals

/** A call waits for approval: its card (tool, editable arguments, why) with Approve / Run edited / Reject. */
export function showApproval(ask) {
  const earlier = waitingCard(ask.callId);
  if (earlier) retireCard(earlier); // asked again (the answer was not taken): the new card takes the answer
  const card = block(approvalCard(ask));
  setChip("waiting for approval", "paused");
  return card;
}

/** The card of a call still waiting (or being answered), if the chat shows it. */
function waitingCard(callId) {
  const cards = /** @type {NodeListOf<HTMLElement>} */ (
    els.chat.querySelectorAll('.approval[data-state="waiting"], .approval[data-state="answering"]')
  );
  return [...cards].reverse().find((card) => card.dataset.callId === (callId || "")) || null;
}

function approvalAnswered(ev) {
  // the line that said the run waits for an answer says so no more
  for (const wait of els.chat.querySelectorAll('[data-testid="approval-wait"]')) wait.remove();
  const card = waitingCard(ev.callId);
  if (card) settleCard(card, ev);
  else noteLine(answeredText(ev), ev.decision === "reject" ? "warn" : "");
  scrollChat();
}

function pausedText(ev) {
  if (ev.reason === "interrupt" && els.chat.querySelector('.approval[data-state="waiting"]')) {
    return "waiting for your approval: approve, edit or reject the call above";
  }
  const why = ev.reason === "crashed" ? "the server stopped mid-run; paused at its last checkpoint" : `paused (${ev.reason})`;
  return `${why}${ev.phase ? ` after ${phaseLabel(ev)}` : ""}; press Resume to continue`;
}

// ---------------------------------------------------------------- events

function resumedText(ev) {
  if (ev.reason === "crashed") return `the server stopped mid-run; resumed from checkpoint ${ev.checkpointId}`;
  if (!ev.fork) return `resumed from checkpoint ${ev.checkpointId}`;
  const where = ev.fromPhaseIndex != null ? ` (end of phase ${ev.fromPhaseIndex})` : "";
  return `forked from checkpoint ${ev.checkpointId}${where}`;
}

// How each event type shows up in the chat and the chip; unknown types are ignored.
const RENDER = {
  phase_start: (ev) => phaseStarted(ev),
  phase_end: (ev) => phaseEnded(ev),
  text: (ev) => appendText(ev.text),
  tool_call: (ev) => {
    if (inXmlBlock(ev)) xmlCall(ev);
    else if (!planStepCall(ev)) toolLine(ev.callId, ev.name, ev.args, ev.executionId);
  },
  tool_result: (ev) => {
    if (inXmlBlock(ev)) xmlResult(ev);
    else if (!planStepResult(ev)) toolResult(ev);
  },
  duplicate_tool_call: (ev) =>
    noteLine(`duplicate call refused: ${ev.name} ${argsText(ev.args)} (attempt ${ev.attempts} of ${ev.limit})`, "warn"),
  ignored_tool_call: (ev) => noteLine(`tool call ignored (${ev.reason}): ${ev.name} ${argsText(ev.args)}`),
  budget_exhausted: (ev) => noteLine(budgetText(ev), "warn"),
  context_update: (ev) => block(contextLine(ev)),
  decision: (ev) => block(decisionLine(ev)),
  verdict: (ev) => block(verdictLine(ev)),
  agent_step: (ev) => agentStep(ev),
  route: (ev) => handoff(ev),
  xml_block: (ev) => xmlBlock(ev),
  validation_error: (ev) => block(validationBox(ev)),
  session: (ev) => block(sessionLine(ev)),
  last_turn_context: (ev) => block(lastTurnLine(ev)),
  agent_state: (ev) => agentState(ev),
  plan_created: (ev) => showPlan(ev, false),
  plan_ready_for_review: (ev) => showPlan(ev, true),
  plan_review: (ev) => reviewPlan(ev),
  step_start: (ev) => planStep(ev, true),
  step_complete: (ev) => planStep(ev, false),
  final: (ev) => {
    showFinal(ev);
    settleState("final");
    setChip("done", "done");
  },
  approval_requested: (ev) => showApproval(ev),
  approval_answered: (ev) => approvalAnswered(ev),
  paused: (ev) => {
    const note = noteLine(pausedText(ev), "pause");
    if (ev.reason === "interrupt" && els.chat.querySelector('.approval[data-state="waiting"]')) {
      note.dataset.testid = "approval-wait"; // taken out once the approval is answered
    }
    settleState("paused");
    setChip("paused", "paused");
  },
  resumed: (ev) => {
    if (ev.replacesFromSeq != null) {
      const dropped = dropReplaced(ev);
      if (dropped) noteLine(`the interrupted attempt is done again (${dropped} items of it removed)`, "warn");
    }
    noteLine(resumedText(ev));
    setChip(ev.fork ? "forked" : "resumed", "running");
  },
  cancelled: () => {
    noteLine("cancelled", "error");
    settleState("cancelled");
    setChip("cancelled", "cancelled");
  },
  error: (ev) => {
    showError(ev);
    settleState("error");
    setChip("error", "error");
  },
};

/** Show one run event in the chat and the status chip. */
export function renderEvent(ev) {
  const unphased = !ev.phase && !inPlanner(ev); // planner's agent_state says more than "running"
  if (unphased && ["text", "tool_call", "tool_result"].includes(ev.type) && els.status.dataset.state === "running") {
    setChip("running", "running"); // protocols without phases (unified) say no more than that
  }
  const render = Object.hasOwn(RENDER, ev.type) ? RENDER[ev.type] : null;
  current.event = ev;
  try {
    if (render) render(ev);
  } finally {
    current.event = null;
  }
}

