// @ts-check
// planner's events as readable blocks: the session header (context type, profile, intent, required
// behaviours), what a turn carries over, one status chip per turn that says what the agent does now,
// a plan card whose steps fill in as they run (with the reviewer's verdict, or a note asking for the
// user's), and the usage line under the answer. Only builders live here; chat.js puts them into the chat.

import { el, scroller } from "./dom.js";
import { spaced } from "./network.js";
import { callText, icon } from "./pursuit.js";

// What the agent does now, as the status chip says it.
const STATE_TEXT = {
  thinking: () => "Agent is thinking…",
  executing_tool: (details) => (details ? `Executing tool ${details}…` : "Executing a tool…"),
  executing_plan: () => "Executing plan…",
  waiting_on_user: (details) => (details ? `Waiting on you: ${details}` : "Waiting on you"),
};

// The chip once the turn is over (a turn that waits on the user keeps saying so).
const SETTLED_TEXT = {
  final: "Agent finished",
  error: "Agent stopped: the run failed",
  cancelled: "Agent stopped: cancelled",
  paused: "Agent paused",
};

// How each execution mode runs a drafted plan.
const MODE_TEXT = {
  auto_execute: "runs at once",
  draft_only: "waits for your review",
  agent_review: "a reviewer checks it first",
};

// What a step's status reads as; a step shows "waiting" until it starts.
const STEP_TEXT = { running: "running…", ok: "ok", error: "error", skipped: "skipped" };
const WAITING = "waiting";

// Budgets of a planner turn, and how the turn ends when one runs out.
const BUDGET_TEXT = {
  tool_calls: (ev) => `tool calls (${ev.used} of ${ev.limit})`,
  session_seconds: (ev) => `active time (${ev.used} of ${ev.limit} s)`,
};

// Longest argument value a plan step shows (the whole call is in the tooltip).
const ARG_CHARS = 48;

const REVIEW_PROMPT =
  "This plan waits for your review. Reply in your own words: “looks good, run it”, or say what to change.";

function words(name) {
  return String(name ?? "").replaceAll("_", " ");
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function objectOr(value, fallback) {
  return value && typeof value === "object" && !Array.isArray(value) ? value : fallback;
}

function listOf(value) {
  return Array.isArray(value) ? value : [];
}

/** The event comes from planner: it names the request's context type. */
export function inPlanner(ev) {
  return ev != null && ev.contextType != null;
}

/** A call with long string arguments cut short: "publish_context_document(title="Brief", body="Goal: …")". */
function compactCall(tool, args) {
  const shown = Object.fromEntries(
    Object.entries(objectOr(args, {})).map(([key, value]) => [
      key,
      typeof value === "string" && value.length > ARG_CHARS ? `${value.slice(0, ARG_CHARS - 1).trimEnd()}…` : value,
    ]),
  );
  return callText(tool, shown);
}

// ---------------------------------------------------------------- the session

/** "◆ project create session · profile balanced · project p-7 · user ada", its intent and behaviours. */
export function sessionLine(ev) {
  const box = el("div", "planner-session");
  box.dataset.testid = "planner-session";
  const parts = [`${words(ev.contextType || "general")} session`, `profile ${ev.profile || "?"}`];
  if (ev.entityId) parts.push(`project ${ev.entityId}`);
  if (ev.userId) parts.push(`user ${ev.userId}`);
  const tools = listOf(ev.tools);
  const head = [icon("◆", "planner-icon"), el("span", "planner-title", parts.join(" · "))];
  if (tools.length) {
    const count = el("span", "planner-tools", `(${plural(tools.length, "tool")})`);
    count.title = tools.join("\n"); // the tools it may call, on hover
    head.push(count);
  }
  box.append(spaced(el("div", "planner-head"), ...head));
  if (ev.intent) box.append(el("div", "planner-intent", ev.intent));
  const behaviors = listOf(ev.requiredBehaviors);
  if (behaviors.length) {
    const list = el("ul", "planner-behaviors");
    for (const behavior of behaviors) list.append(el("li", "", String(behavior)));
    box.append(list);
  }
  return box;
}

/** "carried over: <the previous answer> · a plan waits for your review: … · waiting for your yes: …". */
export function lastTurnLine(ev) {
  const parts = [ev.summary || "nothing"];
  const plan = objectOr(ev.pendingPlan, null);
  if (plan) parts.push(`a plan waits for your review: ${plan.objective || plan.plan_id || "?"}`);
  const call = objectOr(ev.pendingConfirmation, null);
  if (call) parts.push(`waiting for your yes: ${compactCall(call.name, call.args)}`);
  const line = el("div", "note planner-carried", `carried over: ${parts.join(" · ")}`);
  line.dataset.testid = "last-turn";
  return line;
}

// ---------------------------------------------------------------- the status chip

/** "Agent is thinking…", "Executing tool list_templates…", "Waiting on you: confirm archive_project". */
export function agentStateText(ev) {
  const known = Object.hasOwn(STATE_TEXT, ev.state) ? STATE_TEXT[ev.state] : null;
  return known ? known(ev.details) : words(ev.state || "working");
}

/** The turn's one status chip; showAgentState() changes what it says. */
export function agentStateChip() {
  const chip = el("div", "agent-state");
  chip.dataset.testid = "agent-state";
  chip.setAttribute("role", "status");
  return spaced(chip, icon("●", "agent-state-icon"), el("span", "agent-state-text"));
}

export function showAgentState(chip, ev) {
  chip.dataset.state = ev.state || "";
  chip.querySelector(".agent-state-text").textContent = agentStateText(ev);
}

/** The turn is over (final, error, cancelled, paused): the chip says so, unless it waits on the user. */
export function settleAgentState(chip, outcome) {
  chip.classList.add("settled");
  if (chip.dataset.state === "waiting_on_user" && outcome === "final") return;
  chip.dataset.state = outcome;
  chip.querySelector(".agent-state-text").textContent = SETTLED_TEXT[outcome] || words(outcome);
}

// ---------------------------------------------------------------- the plan card

function stepLine(step) {
  const known = objectOr(step, {});
  const line = el("li", "plan-step");
  line.dataset.testid = "plan-step";
  line.dataset.stepId = known.id ?? "";
  line.dataset.status = WAITING;
  const call = el("code", "plan-call", compactCall(known.tool, known.args));
  call.title = callText(known.tool, objectOr(known.args, {}));
  line.append(
    spaced(
      el("div", "plan-step-head"),
      el("span", "plan-step-id", String(known.id ?? "?")),
      call,
      el("span", `plan-step-status ${WAITING}`, WAITING),
    ),
  );
  const after = listOf(known.depends_on);
  const why = [known.rationale, after.length ? `(after ${after.join(", ")})` : ""].filter(Boolean).join(" ");
  if (why) line.append(el("div", "plan-step-rationale", why));
  return line;
}

function metaText(mode, status) {
  const how = Object.hasOwn(MODE_TEXT, mode) ? ` (${MODE_TEXT[mode]})` : "";
  return `mode: ${words(mode || "?")}${how} · status: ${words(status || "?")}`;
}

/** "☰ Plan: <objective>", its mode and status, its reasoning, and its steps in order, each waiting. */
export function planCard(plan, planId) {
  const known = objectOr(plan, {});
  const card = el("div", "plan-card");
  card.dataset.testid = "plan-card";
  card.dataset.planId = known.plan_id ?? planId ?? "";
  card.dataset.mode = known.execution_mode || "";
  const title = known.objective ? `Plan: ${known.objective}` : `Plan ${card.dataset.planId}`.trim();
  card.append(spaced(el("div", "plan-head"), icon("☰", "plan-icon"), el("span", "plan-title", title)));
  const meta = el("div", "plan-meta", metaText(known.execution_mode, known.status));
  meta.dataset.testid = "plan-meta";
  card.append(meta);
  if (known.reasoning) card.append(el("div", "plan-reasoning", known.reasoning));
  const list = el("ol", "plan-steps");
  for (const step of listOf(known.steps)) list.append(stepLine(step));
  card.append(list);
  return card;
}

/** A new status on the card's meta line ("running", "approved", "finished: 2 ok · 1 skipped"). */
export function setPlanStatus(card, status) {
  card.querySelector(".plan-meta").textContent = metaText(card.dataset.mode, status);
}

/** The note under a plan that waits for the user's verdict (no buttons: they answer in the chat). */
export function reviewPrompt(ev) {
  const note = el("div", "plan-review-prompt");
  note.dataset.testid = "plan-review-prompt";
  if (ev.reasoning && ev.reasoning !== objectOr(ev.plan, {}).reasoning) {
    note.append(el("div", "plan-reasoning", ev.reasoning));
  }
  note.append(spaced(el("div", "plan-review-ask"), icon("✎", "plan-icon"), el("span", "", REVIEW_PROMPT)));
  return note;
}

/** The reviewer's verdict: a badge ("approved", "needs changes", "rejected") and its notes. */
export function verdictNote(ev) {
  const verdict = ev.verdict || "?";
  const note = el("div", `plan-verdict ${verdict}`);
  note.dataset.testid = "plan-verdict";
  note.dataset.verdict = verdict;
  const badge = el("span", `verdict-badge ${verdict}`, words(verdict));
  badge.dataset.testid = "verdict-badge";
  const parts = [el("span", "plan-verdict-label", "review:"), badge];
  if (ev.notes) parts.push(el("span", "plan-verdict-notes", ev.notes));
  return spaced(note, ...parts);
}

/** The line of step ``stepId`` on the card; null when the plan has no such step. */
export function planStepOf(card, stepId) {
  const steps = card ? card.querySelectorAll(":scope > .plan-steps > .plan-step") : [];
  return [...steps].find((line) => line.dataset.stepId === String(stepId)) || null;
}

/** A line for a step the card did not list (its plan was not seen: a stream followed mid-plan). */
export function addPlanStep(card, ev) {
  const line = stepLine({ id: ev.stepId, tool: ev.tool, args: ev.args, rationale: ev.rationale, depends_on: [] });
  card.querySelector(".plan-steps").append(line);
  return line;
}

function setStepStatus(line, status) {
  line.dataset.status = status;
  const shown = line.querySelector(".plan-step-status");
  shown.className = `plan-step-status ${status}`;
  shown.textContent = Object.hasOwn(STEP_TEXT, status) ? STEP_TEXT[status] : words(status);
}

/** The step starts: "running…", with the arguments it runs with (an earlier step's result filled in). */
export function planStepStarted(line, ev) {
  if (ev.args) {
    const call = line.querySelector(".plan-call");
    call.textContent = compactCall(ev.tool, ev.args);
    call.title = callText(ev.tool, objectOr(ev.args, {}));
  }
  setStepStatus(line, "running");
}

/** The step ended: ok, error or skipped, and what it returned (or why it was skipped). */
export function planStepFinished(line, ev) {
  setStepStatus(line, ev.status || "?");
  line.classList.toggle("skipped", ev.status === "skipped");
  let summary = line.querySelector(".plan-step-summary");
  if (!ev.summary) return;
  if (!summary) {
    summary = el("div", "plan-step-summary");
    line.append(summary);
  }
  summary.textContent = ev.summary;
}

/** A step call's output, opened on demand from the step's line. */
export function stepOutput(text) {
  const box = el("details", "plan-step-output");
  const output = scroller(el("pre", "tool-output", text));
  output.dataset.testid = "tool-output";
  box.append(el("summary", "", "output"), output);
  return box;
}

/** The card's status after a step: "running" until every step ended, then how they ended. */
export function planProgress(card) {
  const steps = [...card.querySelectorAll(":scope > .plan-steps > .plan-step")];
  const counts = {};
  for (const line of steps) counts[line.dataset.status] = (counts[line.dataset.status] || 0) + 1;
  if (counts[WAITING] || counts.running) return "running";
  const ended = ["ok", "error", "skipped"].filter((status) => counts[status]).map((status) => `${counts[status]} ${status}`);
  return `finished: ${ended.join(" · ")}`;
}

// ---------------------------------------------------------------- budget and usage

/** "budget exhausted: tool calls (8 of 8): the turn answers from what it did". */
export function plannerBudgetLine(ev) {
  const known = Object.hasOwn(BUDGET_TEXT, ev.budget) ? BUDGET_TEXT[ev.budget] : null;
  const what = known ? known(ev) : `${words(ev.budget)} (${ev.used} of ${ev.limit})`;
  return `budget exhausted: ${what}: the turn answers from what it did`;
}

function count(value) {
  return Number(value || 0).toLocaleString("en-US");
}

/** "3 model calls · 1,234 in / 210 out tokens · $0.000321" under a planner's answer. */
export function usageLine(usage) {
  const known = objectOr(usage, {});
  const parts = [
    `${count(known.calls)} model ${Number(known.calls) === 1 ? "call" : "calls"}`,
    `${count(known.inputTokens)} in / ${count(known.outputTokens)} out tokens`,
  ];
  if (typeof known.costUsd === "number") {
    parts.push(`$${known.costUsd.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`);
  }
  const line = el("div", "usage-line", parts.join(" · "));
  line.dataset.testid = "usage";
  return line;
}
