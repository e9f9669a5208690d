// @ts-check
// The debugger's view of one checkpoint: what the state held there and what changed since the checkpoint
// before it (editor.js edits a field of it). The snapshots are LangGraph API ThreadState objects
// (GET /threads/{id}/state/{checkpoint_id}). Nothing protocol-specific is read.

import { el, scroller } from "./dom.js";
import { contentText } from "./history.js";

const SHORT = 120; // a value in a diff row or a tool call's arguments
const LONG = 300; // a string in the fields tree, before "show all"
const DEPTH = 3; // the diff reports paths of at most this many parts; deeper changes as their subtree

// ---------------------------------------------------------------- small helpers

export function tagged(node, testid) {
  node.dataset.testid = testid;
  return node;
}

export const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/** JSON text cut to ``limit`` characters. */
export function shortJson(value, limit = SHORT) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (_) {
    text = undefined;
  }
  if (text === undefined) text = String(value);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function equal(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => equal(item, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.prototype.hasOwnProperty.call(b, key) && equal(a[key], b[key]));
}

/** A JSON pointer (RFC 6901) to a path of keys. */
function pointer(parts) {
  return parts.map((part) => `/${String(part).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** A string shown cut to ``LONG`` characters, with a "show all" toggle when it is longer. */
function longText(text, className) {
  const box = el("span", className);
  if (text.length <= LONG) {
    box.textContent = text;
    return box;
  }
  const shown = el("span", "insp-long-text", `${text.slice(0, LONG)}…`);
  const toggle = el("button", "insp-toggle", "show all");
  toggle.type = "button";
  toggle.addEventListener("click", () => {
    const open = toggle.textContent === "show all";
    shown.textContent = open ? text : `${text.slice(0, LONG)}…`;
    toggle.textContent = open ? "show less" : "show all";
  });
  box.append(shown, " ", toggle);
  return box;
}

function section(title, testid) {
  const box = tagged(el("section", "insp-section"), testid);
  box.append(el("h4", "insp-title", title));
  return box;
}

// ---------------------------------------------------------------- messages

// A LangChain message's type (or an OpenAI-style role) as one of human / ai / tool / system.
const KINDS = {
  human: "human",
  user: "human",
  HumanMessageChunk: "human",
  ai: "ai",
  assistant: "ai",
  AIMessageChunk: "ai",
  tool: "tool",
  ToolMessageChunk: "tool",
  system: "system",
  developer: "system",
  SystemMessageChunk: "system",
};
const WHO = { human: "user", ai: "assistant", tool: "tool", system: "system" };

function kindOf(message) {
  const kind = message.type || message.role;
  return KINDS[kind] || String(kind || "message");
}

function isMessage(value) {
  return isObject(value) && typeof (value.type ?? value.role) === "string" && "content" in value;
}

function isMessageList(value) {
  return Array.isArray(value) && value.length > 0 && value.every(isMessage);
}

function callText(call) {
  return `${call.name || "tool"}(${shortJson(call.args ?? {})})`;
}

function messageRow(message) {
  const kind = isMessage(message) ? kindOf(message) : "unknown";
  const row = tagged(el("div", "insp-message"), "state-message");
  row.dataset.type = kind;
  row.append(el("span", "insp-who", WHO[kind] || kind));
  const body = el("div", "insp-message-body");
  row.append(body);
  if (kind === "unknown") {
    body.append(el("code", "insp-json", shortJson(message)));
    return row;
  }
  if (kind === "tool") {
    const failed = message.status === "error";
    const head = el("div", "insp-tool-head");
    const status = el("span", `insp-status ${failed ? "failed" : "ok"}`, failed ? "error" : "ok");
    head.append(el("code", "insp-call", message.name || "tool"), el("span", "insp-arrow", "→"), status);
    row.dataset.status = failed ? "error" : "success";
    body.append(head);
  }
  const text = contentText(message.content).trim();
  if (text) body.append(longText(text, "insp-message-text"));
  for (const call of message.tool_calls || []) {
    body.append(tagged(el("code", "insp-call insp-tool-call", callText(call)), "state-tool-call"));
  }
  if (!text && !(message.tool_calls || []).length && kind !== "tool") {
    body.append(el("span", "insp-muted", "(no text)"));
  }
  return row;
}

// ---------------------------------------------------------------- the summary line

const SOURCES = { input: "input", loop: "loop", update: "update (an edit)", fork: "fork" };

/** What the checkpoint's pending tasks wait for: each interrupt value's type, or a short JSON of it. */
function waitsFor(snapshot) {
  const values = [];
  for (const task of snapshot.tasks || []) {
    for (const interrupt of task.interrupts || []) values.push(interrupt.value);
  }
  if (!values.length) for (const interrupt of snapshot.interrupts || []) values.push(interrupt.value);
  return values.map((value) =>
    isObject(value) && typeof value.type === "string" ? value.type : shortJson(value, 80),
  );
}

function summaryLine(snapshot) {
  const metadata = snapshot.metadata || {};
  const line = tagged(el("div", "insp-summary"), "state-summary");
  const part = (testid, className, text) =>
    line.append(tagged(el("span", `insp-chip ${className}`, text), testid));
  part("state-step", "step", `step ${metadata.step ?? "?"}`);
  const source = metadata.source || "";
  part("state-source", `source source-${source || "unknown"}`, SOURCES[source] || source || "unknown source");
  const ran = Array.isArray(snapshot.ran) ? snapshot.ran : [];
  let ranText = "input";
  if (ran.length) ranText = `ran: ${ran.join(", ")}`;
  else if (source === "update" || source === "fork") ranText = "no node ran (an edit)";
  part("state-ran", "ran", ranText);
  const next = snapshot.next || [];
  if (next.length) part("state-next", "next", `next: ${next.join(", ")}`);
  else part("state-next", "next finished", "finished");
  const waits = waitsFor(snapshot);
  if (waits.length) part("state-waits", "waits", `waits: ${waits.join(", ")}`);
  return line;
}

// ---------------------------------------------------------------- the diff

/** Messages keyed by id (or by position when they have none). */
function keyed(list) {
  const key = (message, i) => (isObject(message) && message.id ? `id:${message.id}` : `at:${i}`);
  return new Map(list.map((message, i) => [key(message, i), message]));
}

function typesOf(list) {
  return list.map((message) => (isMessage(message) ? kindOf(message) : "?")).join(", ");
}

/** A message list's change as "+2 messages (ai, tool)", "−1 message (human)", "1 message changed (ai)". */
function messagesRow(path, before, after) {
  const old = keyed(before);
  const now = keyed(after);
  const added = [...now].filter(([key]) => !old.has(key)).map(([, m]) => m);
  const removed = [...old].filter(([key]) => !now.has(key)).map(([, m]) => m);
  const changed = [...now].filter(([key, m]) => old.has(key) && !equal(old.get(key), m)).map(([, m]) => m);
  const parts = [];
  if (added.length) parts.push(`+${plural(added.length, "message")} (${typesOf(added)})`);
  if (removed.length) parts.push(`−${plural(removed.length, "message")} (${typesOf(removed)})`);
  if (changed.length) parts.push(`${plural(changed.length, "message")} changed (${typesOf(changed)})`);
  let kind = "changed";
  if (added.length && !removed.length && !changed.length) kind = "added";
  else if (removed.length && !added.length && !changed.length) kind = "removed";
  return { path, kind, text: parts.join(", ") || "reordered" };
}

/** A list that grew or shrank at its end says so; any other change shows before → after. */
function arrayRow(path, before, after) {
  const prefix = (short, long) => short.every((item, i) => equal(item, long[i]));
  if (after.length > before.length && prefix(before, after)) {
    const extra = after.slice(before.length);
    return { path, kind: "added", text: `+${plural(extra.length, "item")}: ${shortJson(extra)}` };
  }
  if (before.length > after.length && prefix(after, before)) {
    const gone = before.slice(after.length);
    return { path, kind: "removed", text: `−${plural(gone.length, "item")}: ${shortJson(gone)}` };
  }
  return { path, kind: "changed", before, after };
}

function walk(before, after, parts, rows) {
  if (equal(before, after)) return;
  const path = pointer(parts);
  if (before === undefined) rows.push({ path, kind: "added", after });
  else if (after === undefined) rows.push({ path, kind: "removed", before });
  else if (Array.isArray(before) && Array.isArray(after)) {
    if (isMessageList(before) || isMessageList(after)) rows.push(messagesRow(path, before, after));
    else rows.push(arrayRow(path, before, after));
  } else if (isObject(before) && isObject(after) && parts.length < DEPTH) {
    const keys = [...Object.keys(before), ...Object.keys(after).filter((key) => !(key in before))];
    for (const key of keys) walk(before[key], after[key], [...parts, key], rows);
  } else rows.push({ path, kind: "changed", before, after });
}

/** The changed paths between two states' values: [{path, kind, before?, after?, text?}]. */
function diffValues(before, after) {
  const rows = [];
  const old = isObject(before) ? before : {};
  const now = isObject(after) ? after : {};
  const keys = [...Object.keys(old), ...Object.keys(now).filter((key) => !(key in old))];
  for (const key of keys) walk(old[key], now[key], [key], rows);
  return rows;
}

function diffItem(row) {
  const item = tagged(el("li", `insp-diff-item ${row.kind}`), "diff-item");
  item.dataset.path = row.path;
  item.dataset.kind = row.kind;
  item.append(el("code", "insp-diff-path", row.path), el("span", "insp-diff-kind", row.kind));
  const change = el("span", "insp-diff-change");
  if (row.text !== undefined) change.append(el("span", "insp-diff-text", row.text));
  else {
    const side = (value, className) =>
      value === undefined
        ? el("span", `${className} insp-muted`, "unset")
        : el("code", className, shortJson(value));
    const arrow = el("span", "insp-arrow", " → ");
    change.append(side(row.before, "insp-before"), arrow, side(row.after, "insp-after"));
  }
  item.append(change);
  return item;
}

function diffSection(snapshot, previous) {
  const box = section("Changed since the previous checkpoint", "state-diff");
  if (!previous) {
    box.append(el("p", "insp-muted", "the thread's first checkpoint"));
    return box;
  }
  const rows = diffValues(previous.values, snapshot.values);
  if (!rows.length) {
    box.append(el("p", "insp-muted", "nothing changed"));
    return box;
  }
  const list = el("ul", "insp-diff");
  list.append(...rows.map(diffItem));
  box.append(list);
  return box;
}

// ---------------------------------------------------------------- counters and the fields tree

const isCounter = (value) => typeof value === "number" || typeof value === "boolean";

function countersSection(values, previous) {
  const box = section("Counters", "state-counters");
  const grid = el("div", "insp-counters");
  const before = previous && isObject(previous.values) ? previous.values : null;
  for (const [field, value] of Object.entries(values)) {
    if (!isCounter(value)) continue;
    const row = tagged(el("div", `insp-counter ${typeof value}`), "state-counter");
    row.dataset.field = field;
    row.append(el("span", "insp-counter-key", field), el("span", "insp-counter-value", String(value)));
    if (before && field in before && !equal(before[field], value)) {
      row.classList.add("changed");
      row.append(el("span", "insp-counter-was", `was ${shortJson(before[field], 20)}`));
    }
    grid.append(row);
  }
  if (!grid.hasChildNodes()) grid.append(el("p", "insp-muted", "no numbers or flags in this state"));
  box.append(grid);
  return box;
}

function leafValue(value) {
  if (value === "") return el("span", "insp-value empty", '""');
  if (typeof value === "string") return longText(value, "insp-value string");
  if (value === null) return el("span", "insp-value null", "null");
  if (Array.isArray(value)) return el("span", "insp-value empty", "[]");
  if (isObject(value)) return el("span", "insp-value empty", "{}");
  return el("span", `insp-value ${typeof value}`, String(value));
}

/** One key of the tree: objects and lists fold out, everything else shows inline. */
function treeNode(key, value, depth) {
  let entries = [];
  if (Array.isArray(value)) entries = value.map((item, i) => [i, item]);
  else if (isObject(value)) entries = Object.entries(value);
  if (!entries.length) {
    const leaf = el("div", "insp-leaf");
    leaf.append(el("span", "insp-key", String(key)), el("span", "insp-colon", ": "), leafValue(value));
    return leaf;
  }
  const node = el("details", "insp-node");
  node.open = depth === 0 && entries.length <= 12;
  const size = Array.isArray(value) ? plural(entries.length, "item") : plural(entries.length, "key");
  const head = el("summary", "insp-node-head");
  const shape = Array.isArray(value) ? `[${size}]` : `{${size}}`;
  head.append(el("span", "insp-key", String(key)), el("span", "insp-size", shape));
  node.append(head);
  const children = el("div", "insp-children");
  for (const [childKey, child] of entries) children.append(treeNode(childKey, child, depth + 1));
  node.append(children);
  return node;
}

function fieldsSection(values) {
  const box = section("Fields", "state-fields");
  const tree = el("div", "insp-tree");
  for (const [field, value] of Object.entries(values)) {
    if (field === "messages" || isCounter(value)) continue;
    const row = tagged(treeNode(field, value, 0), "state-field");
    row.dataset.field = field;
    row.classList.add("insp-field");
    tree.append(row);
  }
  if (!tree.hasChildNodes()) tree.append(el("p", "insp-muted", "no other fields"));
  box.append(tree);
  return box;
}

/**
 * Show the state saved at one checkpoint: a summary line, the change since ``previous`` (the parent
 * checkpoint's state, or null), the messages as chat, the counters and the other fields as a tree.
 * ``snapshot.ran`` (added by the caller) names the nodes that ran to make it.
 */
export function showState(container, snapshot, previous) {
  const values = isObject(snapshot && snapshot.values) ? snapshot.values : {};
  const parts = [summaryLine(snapshot || {}), diffSection(snapshot || {}, previous || null)];
  if (Array.isArray(values.messages)) {
    const box = section(`Messages (${values.messages.length})`, "state-messages");
    const list = scroller(el("div", "insp-messages"));
    list.append(...values.messages.map(messageRow));
    if (!values.messages.length) list.append(el("p", "insp-muted", "no messages yet"));
    box.append(list);
    parts.push(box);
  }
  parts.push(countersSection(values, previous), fieldsSection(values));
  container.replaceChildren(...parts);
}
