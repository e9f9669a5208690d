// @ts-check
// The chat column's turns: the current stream's assistant message, its text, its lines and notes, and the
// status chip. chat.js renders events into them; lines.js draws what the protocols' own events show.

import { el, els } from "./dom.js";

// Where the current stream's events are written.
export const current = {
  turn: null, // the assistant message body
  text: null, // the text block streamed text is appended to
  lastText: null, // the turn's latest text block (its final answer, when it streamed one, is shown once)
  tools: new Map(), // callId -> tool line element
  phase: null, // the header of the phase running now (iterating protocols: goal_pursuit)
  blocks: new Map(), // xml_contract: block group ("1.1") -> its box, which holds its calls' lines
  plans: new Map(), // planner: plan id -> its card, which holds its steps' lines
  stepCalls: new Map(), // planner: callId of a plan step's call -> the step's line (it shows the call)
  agentState: null, // planner: the turn's status chip
  event: null, // the event being rendered: what it adds is tagged with its request and seq
};

/** Tag a node with the run event that made it, so a replaced attempt can be taken out again. */
export function tag(node) {
  // Only events a graph step emitted are repeated by a re-run; the server's own (paused...) stay.
  if (current.event && current.event.seq != null && current.event.graphStep != null) {
    node.dataset.seq = String(current.event.seq);
    node.dataset.request = current.event.requestId || "";
  }
  return node;
}

export function scrollChat() {
  els.chat.scrollTop = els.chat.scrollHeight;
}

function clearPlaceholder() {
  const empty = els.chat.querySelector(".empty");
  if (empty) empty.remove();
}

/** Drop id="answer" from the older answer: #answer is always the latest request's answer. */
export function releaseAnswerId() {
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
  writeInto(body);
  scrollChat();
  return body;
}

/** The current stream writes into ``body`` from now on (``null``: into no turn), nothing of an earlier turn kept. */
function writeInto(body) {
  Object.assign(current, {
    turn: body, text: null, lastText: null, tools: new Map(), phase: null, blocks: new Map(), plans: new Map(),
    stepCalls: new Map(), agentState: null,
  });
}

/** The chat was redrawn (another thread opened): nothing of the old stream's turn is written to any more. */
export function forgetTurn() {
  endText();
  writeInto(null);
}

export function turn() {
  return current.turn || startTurn();
}

export function appendText(text) {
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

export function block(node) {
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

export function argsText(args) {
  try {
    return JSON.stringify(args || {});
  } catch (_) {
    return String(args);
  }
}


/**
 * A crashed attempt is being done again: take out what its events (``from`` up to the
 * ``resumed`` event) showed, so nothing appears twice. Returns how many were taken out.
 */
export function dropReplaced(ev) {
  const replaced = [.../** @type {NodeListOf<HTMLElement>} */ (els.chat.querySelectorAll("[data-seq]"))].filter(
    (node) => node.dataset.request === (ev.requestId || "") && Number(node.dataset.seq) >= ev.replacesFromSeq && Number(node.dataset.seq) < ev.seq,
  );
  for (const node of replaced) node.remove();
  for (const [callId, line] of current.tools) if (!line.isConnected) current.tools.delete(callId);
  for (const [group, box] of current.blocks) if (!box.isConnected) current.blocks.delete(group);
  for (const [planId, card] of current.plans) if (!card.isConnected) current.plans.delete(planId);
  for (const [callId, line] of current.stepCalls) if (!line.isConnected) current.stepCalls.delete(callId);
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
