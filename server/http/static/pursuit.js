// @ts-check
// goal_pursuit's events as short readable lines: its phase headers (iteration, context round, step),
// context updates, decisions, verdicts, prompt sizes, and the structured outcome of its answer.
// Only builders live here; chat.js puts what they make into the chat (and tags it for re-runs).

import { el } from "./dom.js";

const PHASE_NAMES = {
  action_phase: "action phase",
  tool_phase: "tool phase",
  complete: "complete",
  context_discovery: "context discovery",
  context_refinement: "context refinement",
  action_decision: "action decision",
  refinement_analysis: "refinement analysis",
  execution: "execution",
  agent_step: "agent step",
  tool_execution: "tool execution",
  agent_routing: "agent routing",
};

// Why a goal_pursuit run ended (Final.exit).
const EXIT_TEXT = {
  approved: "approved by the refinement analysis",
  max_iterations: "the iteration limit was reached",
  step_budget: "the step budget ran out",
};

// How many resources a context update names before it says "+N more".
const NAMES_SHOWN = 3;

export function phaseName(phase) {
  return PHASE_NAMES[phase] || phase;
}

/** The event comes from an iterating protocol (goal_pursuit): it carries iteration/round/step. */
export function iterates(ev) {
  return ev.iteration != null || ev.contextRound != null || ev.step != null;
}

/** "iteration 2, round 1, step 1" (zeros left out, as in the terminal); "start" when all are. */
export function progressText(ev) {
  const parts = [];
  if (ev.iteration) parts.push(`iteration ${ev.iteration}`);
  if (ev.contextRound) parts.push(`round ${ev.contextRound}`);
  if (ev.step) parts.push(`step ${ev.step}`);
  return parts.join(", ") || "start";
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** A value for a person: strings as they are, lists joined, anything else compact. */
function valueText(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map(valueText).join(" · ");
  try {
    return JSON.stringify(value);
  } catch (_) {
    return String(value);
  }
}

/** Call arguments as name="value" pairs, the way the terminal writes them. */
export function callText(tool, params) {
  const args = Object.entries(params || {}).map(([key, value]) => {
    let shown;
    try {
      shown = JSON.stringify(value);
    } catch (_) {
      shown = String(value);
    }
    return `${key}=${shown}`;
  });
  return `${tool || "?"}(${args.join(", ")})`;
}

/** res://character/mira-voss -> mira-voss */
function shortName(uri) {
  const parts = String(uri).split("/");
  return parts[parts.length - 1] || String(uri);
}

function namesText(uris) {
  const shown = uris.slice(0, NAMES_SHOWN).map(shortName).join(", ");
  return uris.length > NAMES_SHOWN ? `${shown} +${uris.length - NAMES_SHOWN} more` : shown;
}

/** A decorative mark in front of a line (screen readers skip it). */
export function icon(mark, className = "pursuit-icon") {
  const span = el("span", className, mark);
  span.setAttribute("aria-hidden", "true");
  return span;
}

function fieldName(key) {
  return key.replaceAll("_", " ");
}

// ---------------------------------------------------------------- phases

/** The header a phase of an iterating protocol starts with; phaseEnd() fills its outcome in. */
export function phaseHeader(ev) {
  const head = el("div", "phase-head");
  head.dataset.testid = "phase-header";
  head.dataset.phase = ev.phase || "";
  head.dataset.phaseIndex = ev.phaseIndex != null ? String(ev.phaseIndex) : "";
  const name = ev.phaseIndex != null ? `${phaseName(ev.phase)} #${ev.phaseIndex}` : phaseName(ev.phase);
  head.append(
    icon("▶", "phase-icon"),
    el("span", "phase-name", name),
    el("span", "phase-progress", progressText(ev)),
  );
  return head;
}

/** How a phase ended: "answered · prompt 1776 chars, 412 tokens, 1 corrective retry". */
export function phaseEndText(ev) {
  let text = ev.reason || "ended";
  if (ev.promptChars != null) {
    text += ` · prompt ${ev.promptChars} chars`;
    if (ev.promptTokens != null) text += `, ${ev.promptTokens} tokens`;
    if (ev.retries) text += `, ${ev.retries} corrective ${ev.retries === 1 ? "retry" : "retries"}`;
  }
  return text;
}

// ---------------------------------------------------------------- context updates

function sizeText(ev) {
  if (!ev.chars) return "";
  return ` (${ev.chars > 0 ? "+" : ""}${ev.chars} chars → ${ev.contextChars})`;
}

/** The line's text and its muted detail (the names it touched). */
function contextText(ev) {
  const uris = ev.uris || [];
  const tools = ev.tools || [];
  switch (ev.action) {
    case "searched":
      return {
        text: `searched ${JSON.stringify(ev.query || "")}: ${uris.length ? plural(uris.length, "hit") : "no hits"}`,
        detail: namesText(uris),
      };
    case "expanded":
    case "collapsed":
      return { text: `${ev.action} ${tools.length ? tools.join(", ") : "no tools"}${sizeText(ev)}`, detail: "" };
    case "sorted":
      return { text: `sorted ${plural(uris.length, "resource")}`, detail: namesText(uris) };
    default: // loaded, excluded, filtered
      return { text: `${ev.action} ${plural(uris.length, "resource")}${sizeText(ev)}`, detail: namesText(uris) };
  }
}

/** One context update: "searched "Grey Fox": 2 hits", "loaded 4 resources (+3454 chars → 3454)". */
export function contextLine(ev) {
  const line = el("div", "pursuit-line context");
  line.dataset.testid = "context-update";
  line.dataset.action = ev.action || "";
  const { text, detail } = contextText(ev);
  line.append(icon(ev.action === "searched" ? "⌕" : "≡"), el("span", "pursuit-text", text));
  if (detail) line.append(el("span", "pursuit-detail", detail));
  const missing = ev.missing || [];
  if (missing.length) line.append(el("span", "pursuit-missing", `not found: ${missing.join(", ")}`));
  const named = [...(ev.tools || []), ...(ev.uris || [])];
  if (named.length) line.title = named.join("\n");
  return line;
}

// ---------------------------------------------------------------- decisions and verdicts

/** "decided: execute move_item(item_uri="…")" or "decided: finalize (success)". */
export function decisionLine(ev) {
  const line = el("div", "pursuit-line decision");
  line.dataset.testid = "decision";
  line.dataset.decision = ev.decisionType || "";
  const text =
    ev.decisionType === "execute"
      ? `decided: execute ${callText(ev.tool, ev.params)}`
      : `decided: finalize${ev.status ? ` (${ev.status})` : ""}`;
  line.append(icon("◆"), el("span", "pursuit-text", text));
  return line;
}

/** Approve (with its confidence, maybe deferred) or refine (with the assessment fields it changed). */
export function verdictLine(ev) {
  const line = el("div", `pursuit-line verdict ${ev.verdict === "approve" ? "approve" : "refine"}`);
  line.dataset.testid = "verdict";
  line.dataset.verdict = ev.verdict || "";
  if (ev.verdict === "approve") {
    let text = ev.confidence != null ? `approved (confidence ${ev.confidence})` : "approved";
    if (ev.deferred) text += " · deferred: too early to execute (min_iter)";
    line.append(icon("✔"), el("span", "pursuit-text", text));
    return line;
  }
  const delta = Object.entries(ev.assessmentDelta || {});
  const changed = delta.length ? delta.map(([key]) => fieldName(key)).join(", ") : "no assessment change";
  const head = el("div", "verdict-head");
  head.append(icon("↻"), el("span", "pursuit-text", `refine: ${changed}`));
  line.append(head);
  if (delta.length) {
    const list = el("ul", "verdict-delta");
    for (const [key, value] of delta) {
      const item = el("li");
      item.append(el("span", "delta-field", `${fieldName(key)}:`), document.createTextNode(` ${valueText(value)}`));
      list.append(item);
    }
    line.append(list);
  }
  return line;
}

// ---------------------------------------------------------------- the final answer's outcome

function row(list, name, value) {
  list.append(el("dt", "", name), el("dd", "", value));
}

/** The structured Resolution or OperationPlan behind a final answer, and why the run ended; null if none. */
export function outcomeBlock(ev) {
  const resolution = ev.resolution && typeof ev.resolution === "object" ? ev.resolution : null;
  const plan = ev.operationPlan && typeof ev.operationPlan === "object" ? ev.operationPlan : null;
  if (!resolution && !plan && !ev.exit) return null;
  const box = el("div", "outcome");
  box.dataset.testid = "outcome";
  const list = el("dl", "outcome-fields");
  if (plan) {
    box.dataset.kind = "operation_plan";
    box.append(el("div", "outcome-title", "Operation plan"));
    row(list, "tool", plan.tool || "?");
    for (const [key, value] of Object.entries(plan.params || {})) row(list, key, valueText(value));
    if (plan.reason) row(list, "reason", plan.reason);
  } else if (resolution) {
    box.dataset.kind = "resolution";
    box.append(el("div", "outcome-title", "Resolution"));
    if (resolution.status) row(list, "status", resolution.status);
    if (resolution.response && resolution.response !== ev.answer) row(list, "response", resolution.response);
  } else {
    box.append(el("div", "outcome-title", "Outcome"));
  }
  if (ev.exit) row(list, "ended", EXIT_TEXT[ev.exit] || ev.exit);
  box.append(list);
  return box;
}
