// @ts-check
// What the protocols' own events draw in the chat: goal_pursuit's phase headers, agent_network's steps and
// hand-offs, xml_contract's blocks, the planner's status chip and plan cards (turn.js holds the turn).

import { el } from "./dom.js";
import {
  agentStepLine,
  budgetLine,
  inNetwork,
  networkProgress,
  routeLine,
  transcriptBlock,
} from "./network.js";
import {
  addPlanStep,
  agentStateChip,
  agentStateText,
  inPlanner,
  planCard,
  planProgress,
  planStepFinished,
  planStepOf,
  planStepStarted,
  plannerBudgetLine,
  reviewPrompt,
  setPlanStatus,
  stepOutput,
  settleAgentState,
  showAgentState,
  verdictNote,
} from "./planner.js";
import { iterates, phaseEndText, phaseHeader, phaseName, progressText } from "./pursuit.js";
import {
  addStep,
  callFinished,
  callStarted,
  closeBlock,
  orphanBox,
  stepOf,
  xmlBlockBox,
  xmlBudgetLine,
} from "./xml.js";
import { block, current, endText, errorLine, noteLine, scrollChat, setChip, tag } from "./turn.js";

export function phaseLabel(ev) {
  if (!ev.phase) return "running";
  const name = phaseName(ev.phase);
  if (inNetwork(ev)) return `${name} · ${networkProgress(ev)}`; // "agent routing · step 4 · writer (epoch 3)"
  let label = ev.phaseIndex != null ? `${name} #${ev.phaseIndex}` : name;
  if (ev.cycleIndex != null) label += ` (cycle ${ev.cycleIndex})`;
  else if (iterates(ev)) label += ` (${progressText(ev)})`;
  if (ev.final) label += " · final";
  return label;
}

// ---------------------------------------------------------------- phases of iterating protocols

/** goal_pursuit's phases get a header line in the chat (the others show theirs in the chip only). */
export function phaseStarted(ev) {
  setChip(phaseLabel(ev), "running");
  if (iterates(ev)) current.phase = block(phaseHeader(ev));
}

/** How the phase ended (and its prompt size) goes on its header, or on a line of its own. */
export function phaseEnded(ev) {
  endText();
  if (ev.phase === "tool_phase") for (const box of current.blocks.values()) closeBlock(box); // xml_contract
  if (!iterates(ev)) return;
  const head = current.phase;
  const text = phaseEndText(ev);
  if (head && head.isConnected && head.dataset.phaseIndex === String(ev.phaseIndex ?? "")) {
    head.append(tag(el("span", "phase-outcome", text)));
    scrollChat();
  } else {
    noteLine(`${phaseName(ev.phase)}${ev.phaseIndex != null ? ` #${ev.phaseIndex}` : ""} ended: ${text}`);
  }
  current.phase = null;
}

// ---------------------------------------------------------------- agent_network

/** An agent decided: its line in the chat, and who is working in the chip. */
export function agentStep(ev) {
  setChip(networkProgress(ev), "running");
  block(agentStepLine(ev));
}

/** Control passed to another agent. */
export function handoff(ev) {
  setChip(`${ev.to} (epoch ${ev.epoch})`, "running");
  block(routeLine(ev));
}

/** The run failed; agent_network's budget errors carry the execution log so far. */
export function showError(ev) {
  errorLine(`${ev.kind}: ${ev.message}`);
  if (Array.isArray(ev.transcript) && ev.transcript.length) block(transcriptBlock(ev.transcript));
}

// ---------------------------------------------------------------- xml_contract

/** A validated block is about to run: its header, and a waiting line per call in step order. */
export function xmlBlock(ev) {
  current.blocks.set(ev.group, block(xmlBlockBox(ev)));
}

/** The line of a block's call; a call whose block was not seen (after a resume) gets a box of its own. */
function xmlStepLine(ev) {
  let box = current.blocks.get(ev.group);
  if (!box || !box.isConnected) {
    box = block(orphanBox(ev));
    current.blocks.set(ev.group, box);
  }
  return stepOf(box, ev.stepIndex) || addStep(box, ev);
}

export function xmlCall(ev) {
  callStarted(xmlStepLine(ev), ev);
  scrollChat();
}

/** A result fills in its own step's line, whatever order a parallel block's calls finish in. */
export function xmlResult(ev) {
  callFinished(xmlStepLine(ev), ev);
  scrollChat();
}

// ---------------------------------------------------------------- planner

/** The turn's one status chip says what the agent does now (the top chip says it too). */
export function agentState(ev) {
  if (!current.agentState || !current.agentState.isConnected) current.agentState = block(agentStateChip());
  showAgentState(current.agentState, ev);
  setChip(agentStateText(ev), "running");
  scrollChat();
}

/** The turn is over: its status chip stops saying the agent works. */
export function settleState(outcome) {
  if (current.agentState && current.agentState.isConnected) settleAgentState(current.agentState, outcome);
  current.agentState = null;
}

/** A plan's card; plan_ready_for_review adds its request for the user's verdict to the card already shown. */
export function showPlan(ev, forReview) {
  const plan = ev.plan && typeof ev.plan === "object" ? ev.plan : {};
  const planId = plan.plan_id ?? ev.planId;
  let card = current.plans.get(planId);
  if (!card || !card.isConnected) {
    card = block(planCard(plan, planId));
    current.plans.set(planId, card);
  }
  if (forReview) {
    if (plan.status) setPlanStatus(card, plan.status);
    card.append(tag(reviewPrompt(ev)));
  }
  scrollChat();
}

/** The card of the event's plan (the latest one when the event names none); one is made if it was not seen. */
function planCardOf(ev) {
  let card = ev.planId != null ? current.plans.get(ev.planId) : [...current.plans.values()].pop();
  if (!card || !card.isConnected) {
    card = block(planCard({}, ev.planId));
    current.plans.set(ev.planId, card);
  }
  return card;
}

export function reviewPlan(ev) {
  const card = planCardOf(ev);
  setPlanStatus(card, ev.verdict);
  card.append(tag(verdictNote(ev)));
  scrollChat();
}

/** A step's line on its plan's card fills in as it starts and ends (a step not listed gets a line). */
export function planStep(ev, started) {
  const card = planCardOf(ev);
  const line = planStepOf(card, ev.stepId) || addPlanStep(card, ev);
  if (started) planStepStarted(line, ev);
  else planStepFinished(line, ev);
  setPlanStatus(card, planProgress(card));
  scrollChat();
}

/**
 * A plan step's own call: the step's line on its plan's card already shows it (no tool row of its own,
 * the steps would show twice). Returns whether the call is such a step's.
 */
export function planStepCall(ev) {
  const card = ev.planId != null ? current.plans.get(ev.planId) : null;
  if (!card || !card.isConnected) return false;
  const running = [...card.querySelectorAll(':scope > .plan-steps > .plan-step[data-status="running"]')].pop();
  if (!running) return false;
  current.stepCalls.set(ev.callId, running);
  return true;
}

/** The result of a plan step's call: its output (when the page asked for outputs) opens from the step's line. */
export function planStepResult(ev) {
  const line = current.stepCalls.get(ev.callId);
  if (!line || !line.isConnected) return false;
  if (typeof ev.output === "string") line.append(tag(stepOutput(ev.output)));
  scrollChat();
  return true;
}

export function budgetText(ev) {
  if (ev.protocol === "xml_contract") return xmlBudgetLine(ev);
  return inPlanner(ev) ? plannerBudgetLine(ev) : budgetLine(ev);
}

