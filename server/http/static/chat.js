// The chat column and the status chip: turns run events into messages, tool lines and answers.
// Only the DOM lives here; the request's state (status, ids) is kept by app.js.

import { answeredText, approvalCard, retireCard, settleCard } from "./approval.js";
import { el, els } from "./dom.js";
import { markdownBlock } from "./markdown.js";
import {
  agentStepLine,
  budgetLine,
  executionTag,
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
  lastTurnLine,
  planCard,
  planProgress,
  planStepFinished,
  planStepOf,
  planStepStarted,
  plannerBudgetLine,
  reviewPrompt,
  sessionLine,
  setPlanStatus,
  settleAgentState,
  showAgentState,
  usageLine,
  verdictNote,
} from "./planner.js";
import {
  contextLine,
  decisionLine,
  iterates,
  outcomeBlock,
  phaseEndText,
  phaseHeader,
  phaseName,
  progressText,
  verdictLine,
} from "./pursuit.js";
import {
  addStep,
  callFinished,
  callStarted,
  closeBlock,
  inXmlBlock,
  orphanBox,
  stepOf,
  validationBox,
  xmlBlockBox,
  xmlBudgetLine,
} from "./xml.js";

// Where the current stream's events are written.
const current = {
  turn: null, // the assistant message body
  text: null, // the text block streamed text is appended to
  lastText: null, // the turn's latest text block (its final answer, when it streamed one, is shown once)
  tools: new Map(), // callId -> tool line element
  phase: null, // the header of the phase running now (iterating protocols: goal_pursuit)
  blocks: new Map(), // xml_contract: block group ("1.1") -> its box, which holds its calls' lines
  plans: new Map(), // planner: plan id -> its card, which holds its steps' lines
  agentState: null, // planner: the turn's status chip
  event: null, // the event being rendered: what it adds is tagged with its request and seq
};

/** Tag a node with the run event that made it, so a replaced attempt can be taken out again. */
function tag(node) {
  // Only events a graph step emitted are repeated by a re-run; the server's own (paused...) stay.
  if (current.event && current.event.seq != null && current.event.graphStep != null) {
    node.dataset.seq = String(current.event.seq);
    node.dataset.request = current.event.requestId || "";
  }
  return node;
}

function scrollChat() {
  els.chat.scrollTop = els.chat.scrollHeight;
}

function clearPlaceholder() {
  const empty = els.chat.querySelector(".empty");
  if (empty) empty.remove();
}

/** Drop id="answer" from the older answer: #answer is always the latest request's answer. */
function releaseAnswerId() {
  const previous = document.getElementById("answer");
  if (previous) previous.removeAttribute("id");
}

export function addUserMessage(text) {
  clearPlaceholder();
  const msg = el("div", "msg user");
  msg.append(el("div", "who", "you"), el("div", "body", text));
  els.chat.append(msg);
  scrollChat();
}

/** A new assistant message; events of the current stream are written into it. */
export function startTurn(label) {
  clearPlaceholder();
  releaseAnswerId();
  const msg = el("div", "msg assistant");
  msg.append(el("div", "who", label || "assistant"));
  const body = el("div", "body");
  msg.append(body);
  els.chat.append(msg);
  current.turn = body;
  current.text = null;
  current.lastText = null;
  current.tools = new Map();
  current.phase = null;
  current.blocks = new Map();
  current.plans = new Map();
  current.agentState = null;
  scrollChat();
  return body;
}

/** The chat was redrawn (another thread opened): nothing of the old stream's turn is written to any more. */
export function forgetTurn() {
  endText();
  current.turn = null;
  current.tools = new Map();
  current.phase = null;
  current.blocks = new Map();
  current.plans = new Map();
  current.agentState = null;
}

function turn() {
  return current.turn || startTurn();
}

function appendText(text) {
  if (!current.text) {
    current.text = el("div", "text streaming");
    current.lastText = current.text;
    turn().append(current.text);
  }
  current.text.append(tag(el("span", "", text)));
  scrollChat();
}

/** Close the streaming text block (it loses its cursor); the next text starts a new block. */
export function endText() {
  if (current.text) current.text.classList.remove("streaming");
  current.text = null;
}

function block(node) {
  endText();
  turn().append(tag(node));
  scrollChat();
  return node;
}

export function noteLine(text, kind) {
  return block(el("div", `note${kind ? ` ${kind}` : ""}`, text));
}

export function errorLine(text) {
  return block(el("div", "note error", text));
}

function argsText(args) {
  try {
    return JSON.stringify(args || {});
  } catch (_) {
    return String(args);
  }
}

function toolLine(callId, name, args, executionId) {
  const line = el("div", "tool");
  line.dataset.callId = callId || "";
  line.dataset.testid = "tool-line";
  const head = el("div", "tool-head");
  head.append(
    el("span", "tool-icon", "⚙"),
    el("span", "tool-name", name),
    el("code", "tool-args", argsText(args)),
    el("span", "tool-status pending", "running…"),
  );
  if (executionId) {
    // agent_network: the call runs for the agent in control; its id keys the tool execution log.
    line.classList.add("in-network");
    head.append(executionTag(executionId));
  }
  line.append(head);
  block(line);
  if (callId) current.tools.set(callId, line);
  return line;
}

function toolResult(ev) {
  // A result whose call we never saw (e.g. after a resume) still gets a line of its own.
  const line = current.tools.get(ev.callId) || toolLine(ev.callId, ev.name, undefined, ev.executionId);
  const status = line.querySelector(".tool-status");
  status.className = `tool-status ${ev.status === "ok" ? "ok" : "failed"}`;
  const ms = typeof ev.durationMs === "number" ? ` · ${Math.round(ev.durationMs)} ms` : "";
  status.textContent = `${ev.status}${ms}`;
  if (ev.error) line.append(el("div", "tool-error", ev.error));
  if (typeof ev.output === "string") {
    const output = el("pre", "tool-output", ev.output);
    output.dataset.testid = "tool-output";
    line.append(output);
  }
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

/**
 * A crashed attempt is being done again: take out what its events (``from`` up to the
 * ``resumed`` event) showed, so nothing appears twice. Returns how many were taken out.
 */
function dropReplaced(ev) {
  const replaced = [...els.chat.querySelectorAll("[data-seq]")].filter(
    (node) => node.dataset.request === (ev.requestId || "") && Number(node.dataset.seq) >= ev.replacesFromSeq && Number(node.dataset.seq) < ev.seq,
  );
  for (const node of replaced) node.remove();
  for (const [callId, line] of current.tools) if (!line.isConnected) current.tools.delete(callId);
  for (const [group, box] of current.blocks) if (!box.isConnected) current.blocks.delete(group);
  for (const [planId, card] of current.plans) if (!card.isConnected) current.plans.delete(planId);
  if (current.agentState && !current.agentState.isConnected) current.agentState = null;
  for (const block of els.chat.querySelectorAll(".text")) if (!block.hasChildNodes()) block.remove();
  current.text = null;
  return replaced.length;
}

// ---------------------------------------------------------------- status chip

export function setChip(text, kind) {
  els.status.textContent = text;
  els.status.dataset.state = kind;
}

/** The chip state for a request status from the server. */
export function chipFor(status) {
  return { completed: "done", failed: "error" }[status] || status || "idle";
}

function phaseLabel(ev) {
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
function phaseStarted(ev) {
  setChip(phaseLabel(ev), "running");
  if (iterates(ev)) current.phase = block(phaseHeader(ev));
}

/** How the phase ended (and its prompt size) goes on its header, or on a line of its own. */
function phaseEnded(ev) {
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
function agentStep(ev) {
  setChip(networkProgress(ev), "running");
  block(agentStepLine(ev));
}

/** Control passed to another agent. */
function handoff(ev) {
  setChip(`${ev.to} (epoch ${ev.epoch})`, "running");
  block(routeLine(ev));
}

/** The run failed; agent_network's budget errors carry the execution log so far. */
function showError(ev) {
  errorLine(`${ev.kind}: ${ev.message}`);
  if (Array.isArray(ev.transcript) && ev.transcript.length) block(transcriptBlock(ev.transcript));
}

// ---------------------------------------------------------------- xml_contract

/** A validated block is about to run: its header, and a waiting line per call in step order. */
function xmlBlock(ev) {
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

function xmlCall(ev) {
  callStarted(xmlStepLine(ev), ev);
  scrollChat();
}

/** A result fills in its own step's line, whatever order a parallel block's calls finish in. */
function xmlResult(ev) {
  callFinished(xmlStepLine(ev), ev);
  scrollChat();
}

// ---------------------------------------------------------------- planner

/** The turn's one status chip says what the agent does now (the top chip says it too). */
function agentState(ev) {
  if (!current.agentState || !current.agentState.isConnected) current.agentState = block(agentStateChip());
  showAgentState(current.agentState, ev);
  setChip(agentStateText(ev), "running");
  scrollChat();
}

/** The turn is over: its status chip stops saying the agent works. */
function settleState(outcome) {
  if (current.agentState && current.agentState.isConnected) settleAgentState(current.agentState, outcome);
  current.agentState = null;
}

/** A plan's card; plan_ready_for_review adds its request for the user's verdict to the card already shown. */
function showPlan(ev, forReview) {
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

function reviewPlan(ev) {
  const card = planCardOf(ev);
  setPlanStatus(card, ev.verdict);
  card.append(tag(verdictNote(ev)));
  scrollChat();
}

/** A step's line on its plan's card fills in as it starts and ends (a step not listed gets a line). */
function planStep(ev, started) {
  const card = planCardOf(ev);
  const line = planStepOf(card, ev.stepId) || addPlanStep(card, ev);
  if (started) planStepStarted(line, ev);
  else planStepFinished(line, ev);
  setPlanStatus(card, planProgress(card));
  scrollChat();
}

function budgetText(ev) {
  if (ev.protocol === "xml_contract") return xmlBudgetLine(ev);
  return inPlanner(ev) ? plannerBudgetLine(ev) : budgetLine(ev);
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
  const cards = els.chat.querySelectorAll('.approval[data-state="waiting"], .approval[data-state="answering"]');
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
  tool_call: (ev) => (inXmlBlock(ev) ? xmlCall(ev) : toolLine(ev.callId, ev.name, ev.args, ev.executionId)),
  tool_result: (ev) => (inXmlBlock(ev) ? xmlResult(ev) : toolResult(ev)),
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
