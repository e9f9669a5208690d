// @ts-check
// agent_network's events as short readable lines: an agent's step (what it decided, why, and a
// refusal), the handoffs between agents, the short execution id of a tool call, and the transcript an
// error carries. Only builders live here; chat.js puts what they make into the chat.

import { el } from "./dom.js";
import { callText, icon } from "./pursuit.js";

// What a decision's action reads as after "decides to".
const ACTIONS = {
  USE_TOOL: (details) => `use ${details.tool || "?"}`,
  ROUTE_TO_AGENT: (details) => `route to ${details.target_agent || "?"}`,
  RESPOND: () => "respond",
};

// Budgets whose name alone says too little.
const BUDGET_TEXT = {
  tool_errors: "tool errors (failed tool calls and refused decisions)",
};

// How many characters of an execution id are shown (the whole id is in the tooltip).
const SHORT_ID = 8;

/** The event comes from agent_network: it names the agent in control and its control epoch. */
export function inNetwork(ev) {
  return ev != null && ev.agent != null && ev.epoch != null;
}

/** "step 2 · researcher (epoch 2)" ("step" left out before the first step). */
export function networkProgress(ev) {
  const who = `${ev.agent} (epoch ${ev.epoch})`;
  return ev.step ? `step ${ev.step} · ${who}` : who;
}

/** Append ``nodes`` with a space between them, so the line's text reads (and copies) as words. */
export function spaced(parent, ...nodes) {
  nodes.forEach((node, index) => {
    if (index) parent.append(document.createTextNode(" "));
    parent.append(node);
  });
  return parent;
}

function objectOr(value, fallback) {
  return value && typeof value === "object" && !Array.isArray(value) ? value : fallback;
}

/** "use read_file", "route to writer", "respond"; an unknown action in lower case. */
function actionText(action, details) {
  const known = Object.hasOwn(ACTIONS, action) ? ACTIONS[action] : null;
  return known ? known(details) : String(action || "decide").toLowerCase().replaceAll("_", " ");
}

function budgetText(budget) {
  return Object.hasOwn(BUDGET_TEXT, budget) ? BUDGET_TEXT[budget] : budget;
}

/** "budget exhausted: tool errors (failed tool calls and refused decisions) (3 of 3)". */
export function budgetLine(ev) {
  return `budget exhausted: ${budgetText(ev.budget)} (${ev.used} of ${ev.limit})`;
}

/** "prompt 1128 chars, 300 tokens, 1 corrective retry"; "" without a prompt size. */
function promptText(ev) {
  if (ev.promptChars == null) return "";
  let text = `prompt ${ev.promptChars} chars`;
  if (ev.promptTokens != null) text += `, ${ev.promptTokens} tokens`;
  if (ev.retries) text += `, ${ev.retries} corrective ${ev.retries === 1 ? "retry" : "retries"}`;
  return text;
}

/** What a refused decision wanted (it never runs, so no tool or route line shows it). */
function refusedDetail(action, details) {
  if (action === "USE_TOOL") return `wanted: ${callText(details.tool, details.params)}`;
  if (action === "ROUTE_TO_AGENT" && details.message) return `note: ${details.message}`;
  if (action === "RESPOND" && details.message) return `answer: ${details.message}`;
  return "";
}

// ---------------------------------------------------------------- agent steps and handoffs

/** "▶ step 1 · triage (epoch 1) decides to route to researcher", its reasoning dimmed, any refusal. */
export function agentStepLine(ev) {
  const decision = objectOr(ev.decision, {});
  const details = objectOr(decision.action_details, {});
  const line = el("div", `network-line agent-step${ev.refused ? " refused" : ""}`);
  line.dataset.testid = "agent-step";
  line.dataset.agent = ev.agent || "";
  line.dataset.action = decision.action || "";
  const size = promptText(ev);
  const head = spaced(
    el("div", "network-head"),
    icon("▶", "network-icon"),
    el("span", "network-where", networkProgress(ev)),
    el("span", "network-text", `decides to ${actionText(decision.action, details)}`),
    ...(size ? [el("span", "network-size", `(${size})`)] : []),
  );
  line.append(head);
  if (decision.action_reasoning) {
    const reasoning = el("div", "network-reasoning", String(decision.action_reasoning));
    reasoning.dataset.testid = "agent-reasoning";
    line.append(reasoning);
  }
  if (ev.refused) {
    const wanted = refusedDetail(decision.action, details);
    const refused = spaced(
      el("div", "network-refused"),
      icon("✗", "network-refused-icon"),
      el("span", "", `refused: ${ev.refused}`),
      ...(wanted ? [el("span", "network-wanted", wanted)] : []),
    );
    refused.dataset.testid = "agent-refused";
    line.append(refused);
  }
  return line;
}

/** "⇢ triage → researcher (epoch 2)" and the note the deciding agent left for the next one. */
export function routeLine(ev) {
  const line = el("div", "network-line route");
  line.dataset.testid = "route";
  line.dataset.from = ev.from || "";
  line.dataset.to = ev.to || "";
  const epoch = ev.epoch != null ? ` (epoch ${ev.epoch})` : "";
  const handoff = `${ev.from || "?"} → ${ev.to || "?"}${epoch}`;
  line.setAttribute("role", "group");
  line.setAttribute("aria-label", `hand-off from ${ev.from || "?"} to ${ev.to || "?"}`);
  line.append(spaced(el("div", "network-head"), icon("⇢", "network-icon"), el("span", "network-text", handoff)));
  if (ev.message) {
    const note = el("div", "network-note", ev.message);
    note.dataset.testid = "route-note";
    line.append(note);
  }
  return line;
}

/** "#6cd12107" for a tool line: the key of the call's full payload in the tool execution log. */
export function executionTag(executionId) {
  const id = String(executionId);
  const tag = el("span", "tool-exec", `#${id.slice(0, SHORT_ID)}`);
  tag.dataset.testid = "execution-id";
  tag.title = `execution ${id}`;
  return tag;
}

// ---------------------------------------------------------------- the transcript of an error

/** A preview that was JSON before it was cut: the object when it still parses, else null. */
function parsedPreview(text) {
  if (typeof text !== "string") return objectOr(text, null);
  try {
    return objectOr(JSON.parse(text), null);
  } catch (_) {
    return null;
  }
}

/** The tool or target agent of a cut preview: '"tool": "read_file"' still names it. */
function previewField(text, name) {
  const found = new RegExp(`"${name}": ?"([^"]*)"`).exec(typeof text === "string" ? text : "");
  return found ? found[1] : null;
}

function detailsOf(preview) {
  const parsed = parsedPreview(preview);
  if (parsed) return parsed;
  return { tool: previewField(preview, "tool"), target_agent: previewField(preview, "target_agent") };
}

/** "step 4 · researcher (epoch 3):" */
function entryWhere(entry) {
  const who = `${entry.agent_key ?? "?"}${entry.epoch != null ? ` (epoch ${entry.epoch})` : ""}`;
  return `${entry.step != null ? `step ${entry.step} · ${who}` : who}:`;
}

/** An agent entry: what it decided and why, and a refusal. */
function agentEntryParts(entry) {
  const decision = objectOr(entry.decision, {});
  const what = actionText(decision.action, detailsOf(decision.action_details));
  const parts = [el("span", "transcript-text", `decided to ${what}`)];
  if (decision.action_reasoning) parts.push(el("span", "transcript-detail", `— ${decision.action_reasoning}`));
  if (entry.refused) parts.push(el("span", "transcript-refused", `refused: ${entry.refused}`));
  return parts;
}

/** A tool entry: the call, its status and a preview of its response. */
function toolEntryParts(entry) {
  const params = parsedPreview(entry.request_preview);
  const call = params
    ? callText(entry.tool_key, params)
    : `${entry.tool_key || "?"} ${entry.request_preview || ""}`.trim(); // cut: as it was previewed
  const ok = entry.status === "ok";
  const parts = [
    el("span", "transcript-text", call),
    el("span", `transcript-status ${ok ? "ok" : "failed"}`, entry.status || "?"),
  ];
  if (entry.response_preview) parts.push(el("span", "transcript-detail", `— ${entry.response_preview}`));
  const figures = [];
  if (typeof entry.duration_ms === "number") figures.push(`${entry.duration_ms} ms`);
  if (entry.execution_id) figures.push(`#${String(entry.execution_id).slice(0, SHORT_ID)}`);
  if (figures.length) parts.push(el("span", "transcript-figures", `(${figures.join(" · ")})`));
  return parts;
}

/** One line of the transcript: "⚙ step 4 · researcher (epoch 3): read_file(path="…") error — …". */
function transcriptEntry(entry) {
  const item = el("li", "transcript-entry");
  item.dataset.testid = "transcript-entry";
  const known = objectOr(entry, null);
  if (!known) {
    item.append(el("span", "transcript-text", String(entry)));
    return item;
  }
  item.dataset.type = known.type || "";
  const isTool = known.type === "tool";
  spaced(
    item,
    icon(isTool ? "⚙" : "▶", "transcript-icon"),
    el("span", "transcript-where", entryWhere(known)),
    ...(isTool ? toolEntryParts(known) : agentEntryParts(known)),
  );
  if (isTool && known.status !== "ok") item.classList.add("failed");
  if (known.refused) item.classList.add("refused");
  return item;
}

/** The execution log an error carries, one line per entry (open, and folds away). */
export function transcriptBlock(entries) {
  const box = el("details", "transcript");
  box.dataset.testid = "transcript";
  box.open = true;
  const count = `${entries.length} log ${entries.length === 1 ? "entry" : "entries"}`;
  box.append(el("summary", "transcript-title", `Transcript · ${count}`));
  const list = el("ul", "transcript-list");
  for (const entry of entries) list.append(transcriptEntry(entry));
  box.append(list);
  return box;
}
