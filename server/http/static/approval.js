// @ts-check
// Approval before a tool runs: a run paused at an approval (approval_requested, then paused with reason
// interrupt) shows the call (tool, arguments as editable JSON, why it waits) with Approve, Run edited and
// Reject. An answer resumes the request through the native resume route with {"answer": ...}: "approve",
// {"decision": "edit", "args": {...}} or {"decision": "reject", "reason": "..."} (nodes/approval.py).

import { el } from "./dom.js";

/** @type {(answer: "approve" | object) => Promise<string | null>} */
let answerWith = async () => null;

/** What answering does (app.js resumes the request with the answer; it returns a refusal message or null). */
export function onApprovalAnswer(handler) {
  answerWith = handler;
}

function pretty(args) {
  try {
    return JSON.stringify(args ?? {}, null, 2);
  } catch (_) {
    return "{}";
  }
}

/** The edited arguments: a JSON object, else the reason they are not one (thrown). */
function editedArgs(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`the arguments are not JSON: ${err.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("the arguments must be a JSON object ({\"name\": value, …})");
  }
  return value;
}

function button(label, testid, className) {
  const made = el("button", className || "", label);
  made.type = "button";
  made.dataset.testid = testid;
  return made;
}

/**
 * The card of one call waiting for approval: {callId, name, args, reason, problem} (an approval_requested
 * event, or a thread's pending interrupt read back as the same fields).
 */
export function approvalCard(ask) {
  const card = el("div", "approval");
  card.dataset.testid = "approval";
  card.dataset.callId = ask.callId || "";
  card.dataset.state = "waiting";
  const head = el("div", "approval-head");
  head.append(el("span", "approval-icon", "⚠"), el("span", "tool-name", ask.name), el("span", "", " waits for your approval"));
  card.append(head);
  if (ask.reason) card.append(el("div", "approval-reason hint", ask.reason));
  if (ask.problem) {
    const problem = el("div", "approval-problem note error", `the last answer was not taken: ${ask.problem}`);
    problem.dataset.testid = "approval-problem";
    card.append(problem);
  }
  const args = el("textarea", "approval-args");
  args.dataset.testid = "approval-args";
  args.rows = Math.min(12, pretty(ask.args).split("\n").length + 1);
  args.spellcheck = false;
  args.value = pretty(ask.args);
  args.setAttribute("aria-label", `arguments of ${ask.name} (JSON)`);
  const why = el("input", "approval-why");
  why.type = "text";
  why.dataset.testid = "approval-why";
  why.placeholder = "why you reject it (the model reads this)";
  why.setAttribute("aria-label", "reason for rejecting");
  const approve = button("Approve", "approve", "primary");
  const edit = button("Run with these arguments", "approve-edited");
  const reject = button("Reject", "reject", "danger");
  const buttons = el("div", "buttons");
  buttons.append(approve, edit, reject);
  const error = el("div", "approval-error note error");
  error.dataset.testid = "approval-error";
  error.hidden = true;
  card.append(el("label", "approval-label", "Arguments (JSON; edit them to run the call with others)"), args, why, buttons, error);

  const controls = [approve, edit, reject, args, why];
  async function send(answer) {
    error.hidden = true;
    for (const control of controls) control.disabled = true;
    card.dataset.state = "answering";
    const refusal = await answerWith(answer);
    if (refusal) {
      error.textContent = refusal;
      error.hidden = false;
      for (const control of controls) control.disabled = false;
      card.dataset.state = "waiting";
    }
  }
  approve.addEventListener("click", () => send("approve"));
  reject.addEventListener("click", () => send({ decision: "reject", reason: why.value.trim() }));
  edit.addEventListener("click", () => {
    try {
      send({ decision: "edit", args: editedArgs(args.value) });
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    }
  });
  return card;
}

/** The answer was taken (approval_answered): the card says how, and takes no other answer. */
export function settleCard(card, ev) {
  card.dataset.state = "answered";
  card.dataset.decision = ev.decision;
  for (const control of card.querySelectorAll("button, textarea, input")) control.disabled = true;
  const said = { approve: "approved", edit: "approved with edited arguments", reject: "rejected" }[ev.decision] || ev.decision;
  const line = el("div", "approval-answer", `${said}${ev.reason ? `: ${ev.reason}` : ""}`);
  line.dataset.testid = "approval-answer";
  card.append(line);
}

/** The call was asked again (its answer was not taken): this card takes no answer any more. */
export function retireCard(card) {
  card.dataset.state = "retired";
  for (const control of card.querySelectorAll("button, textarea, input")) control.disabled = true;
}

/** The line an answer gets when its card is not on the page (the chat was redrawn). */
export function answeredText(ev) {
  const said = { approve: "approved", edit: "approved with edited arguments", reject: "rejected" }[ev.decision] || ev.decision;
  const args = ev.decision === "edit" ? ` ${JSON.stringify(ev.args ?? {})}` : "";
  return `${ev.name}${args} ${said}${ev.reason ? `: ${ev.reason}` : ""}`;
}

/** A thread's pending interrupt as the card's fields, when it is an approval (else null). */
export function pendingApproval(interrupt) {
  const value = interrupt && interrupt.value;
  if (!value || value.type !== "approval" || !value.call || typeof value.call !== "object") return null;
  return { callId: value.call.id, name: value.call.name, args: value.call.args, reason: value.reason, problem: value.problem };
}
