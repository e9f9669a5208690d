// The debugger's view of one checkpoint: what the state held there, what changed since the checkpoint
// before it, and an editor that writes one state field as a new checkpoint. The snapshots are LangGraph
// API ThreadState objects (GET /threads/{id}/state/{checkpoint_id}); the schema is the protocol's
// state_schema (GET /assistants/{protocol}/schemas). Nothing protocol-specific is read.

import { Validator } from "./vendor/json-schema/index.js";
import { el } from "./dom.js";
import { contentText } from "./history.js";

const SHORT = 120; // a value in a diff row or a tool call's arguments
const LONG = 300; // a string in the fields tree, before "show all"
const DEPTH = 3; // the diff reports paths of at most this many parts; deeper changes as their subtree

// ---------------------------------------------------------------- small helpers

function tagged(node, testid) {
  node.dataset.testid = testid;
  return node;
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/** JSON text cut to ``limit`` characters. */
function shortJson(value, limit = SHORT) {
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
    const list = el("div", "insp-messages");
    list.append(...values.messages.map(messageRow));
    if (!values.messages.length) list.append(el("p", "insp-muted", "no messages yet"));
    box.append(list);
    parts.push(box);
  }
  parts.push(countersSection(values, previous), fieldsSection(values));
  container.replaceChildren(...parts);
}

// ---------------------------------------------------------------- the editor

/** The validator's draft: 2020-12 (what pydantic writes) unless the schema names another. */
function draftOf(schema) {
  const named = String(schema.$schema || "");
  if (/draft-0?7/.test(named)) return "7";
  if (/draft-0?4/.test(named)) return "4";
  if (/2019-09/.test(named)) return "2019-09";
  return "2020-12";
}

/** A field's own schema with the definitions its $refs point into. */
function fieldSchema(schema, field) {
  const sub = { ...schema.properties[field] };
  if (schema.$defs !== undefined) sub.$defs = schema.$defs;
  if (schema.definitions !== undefined) sub.definitions = schema.definitions;
  return sub;
}

/** The definition a local $ref names ("#/$defs/X" or "#/definitions/X"), or null. */
function resolve(schema, ref) {
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref || "");
  return match ? (schema[match[1]] || {})[match[2].replace(/~1/g, "/").replace(/~0/g, "~")] || null : null;
}

/**
 * A list of LangChain messages: pydantic writes it as ``items: {oneOf: [$ref AIMessage, $ref HumanMessage,
 * ...]}``, one class per message type told apart only by a ``type`` const. Checked whole, that oneOf refuses
 * the role-style dicts the server accepts ({"role": "user", "content": ...}: every class matches, "8
 * matches") and names every branch's failure for one bad message. So each message is checked against the
 * one class its type (or role) names instead. Returns {type const -> definition}, or null for other fields.
 */
function messageClasses(schema, field) {
  const sub = (schema.properties || {})[field] || {};
  const branches = sub.type === "array" && sub.items && (sub.items.oneOf || sub.items.anyOf);
  if (!Array.isArray(branches) || !branches.length) return null;
  const classes = {};
  for (const branch of branches) {
    const definition = resolve(schema, branch.$ref);
    const type = definition && definition.properties && definition.properties.type;
    if (!type || typeof type.const !== "string" || !("content" in definition.properties)) return null;
    classes[type.const] = definition;
  }
  return classes;
}

// role-style messages, as LangChain's convert_to_messages reads them
const ROLES = {
  user: "human",
  assistant: "ai",
  developer: "system",
  system: "system",
  tool: "tool",
  function: "function",
};
// Error keywords that only say "something inside failed": the errors below them say what.
const WRAPPERS = new Set(["$ref", "items", "prefixItems", "properties", "allOf", "unevaluatedProperties"]);

function readable(errors, where) {
  const useful = errors.filter((error) => !WRAPPERS.has(error.keyword));
  const picked = useful.length ? useful : errors;
  // anyOf/oneOf only say "no branch matched": the branches' own errors come first
  const vague = (error) => error.keyword === "anyOf" || error.keyword === "oneOf";
  const ordered = [...picked.filter((error) => !vague(error)), ...picked.filter(vague)];
  const line = (error) => `${where}${error.instanceLocation.replace(/^#/, "")}: ${error.error}`;
  const lines = [...new Set(ordered.map(line))];
  return lines.length > 3 ? [...lines.slice(0, 3), `(${lines.length - 3} more)`] : lines;
}

/** Checks edited values against the state's schema; check(field, value) answers a list of problems. */
class Checker {
  constructor(schema) {
    this.schema = isObject(schema) ? schema : {};
    this.properties = isObject(this.schema.properties) ? this.schema.properties : {};
    this.draft = draftOf(this.schema);
    this.validators = new Map();
  }

  validator(key, build) {
    if (!this.validators.has(key)) this.validators.set(key, new Validator(build(), this.draft, false));
    return this.validators.get(key);
  }

  describes(field) {
    return Object.prototype.hasOwnProperty.call(this.properties, field);
  }

  check(field, value) {
    if (!this.describes(field)) return []; // the schema does not describe it: the server checks it
    try {
      const classes = messageClasses(this.schema, field);
      if (classes && Array.isArray(value)) return this.checkMessages(field, value, classes);
      const result = this.validator(`field:${field}`, () => fieldSchema(this.schema, field)).validate(value);
      return result.valid ? [] : readable(result.errors, field);
    } catch (err) {
      // a schema the validator cannot read (e.g. a $ref it cannot resolve) checks nothing: the server will
      console.warn(`state editor: ${field}'s schema cannot be checked here`, err);
      return [];
    }
  }

  checkMessages(field, list, classes) {
    const problems = [];
    list.forEach((message, i) => {
      const where = `${field}/${i}`;
      if (!isObject(message)) {
        problems.push(`${where}: a message is an object, not ${shortJson(message, 40)}`);
        return;
      }
      const type = message.type ?? ROLES[message.role] ?? message.role;
      // a RemoveMessage ({"type": "remove", "id": ..., "content": ""}) is in no class: add_messages
      // deletes the message with its id, and the server refuses one it cannot read
      if (type === "remove") return;
      const definition = classes[type];
      if (!definition) {
        const known = Object.keys(classes).filter((name) => !name.endsWith("Chunk"));
        problems.push(`${where}: ${shortJson(type, 40)} is not a message type (${known.join(", ")})`);
        return;
      }
      const copy = message.type === undefined ? { ...message, type } : message;
      const build = () => {
        const sub = { ...definition };
        if (this.schema.$defs !== undefined) sub.$defs = this.schema.$defs;
        if (this.schema.definitions !== undefined) sub.definitions = this.schema.definitions;
        return sub;
      };
      const result = this.validator(`message:${type}`, build).validate(copy);
      if (!result.valid) problems.push(...readable(result.errors, where));
    });
    return problems.length > 3 ? [...problems.slice(0, 3), `(${problems.length - 3} more)`] : problems;
  }
}

/** A short description of a field's schema: "integer", "string or null", "list of messages", ... */
function describe(schema, field) {
  const sub = (schema.properties || {})[field];
  if (!sub) return "not in the state's schema: the server checks it";
  if (messageClasses(schema, field)) {
    return (
      "list of messages, merged by id: a known id replaces that message, a new one is appended, " +
      '{"type": "remove", "id": …, "content": ""} deletes one'
    );
  }
  const name = (part) => {
    if (part.$ref) return (part.$ref.split("/").pop() || "object").replace(/~1/g, "/");
    if (part.enum) return `one of ${part.enum.map((v) => JSON.stringify(v)).join(", ")}`;
    if (part.type === "array" && part.items) return `list of ${name(part.items)}`;
    if (part.anyOf || part.oneOf) return (part.anyOf || part.oneOf).map(name).join(" or ");
    return part.type || "any JSON";
  };
  const text = name(sub);
  return text.length > 140 ? `${text.slice(0, 139)}…` : text;
}

function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

/**
 * An editor for one state field: pick the field, edit its value as JSON, "Save as a new checkpoint".
 * The value is checked against the field's schema first; then ``await onSave(field, value)`` writes it
 * (its thrown message, e.g. the server's 422, shows under the editor).
 */
export function showEditor(container, { snapshot, schema, onSave }) {
  const values = isObject(snapshot && snapshot.values) ? snapshot.values : {};
  const checker = new Checker(schema);
  const extra = Object.keys(values).filter((key) => !checker.describes(key));
  const fields = [...Object.keys(checker.properties), ...extra];

  const select = tagged(el("select", "insp-edit-field"), "edit-field");
  select.setAttribute("aria-label", "state field");
  for (const field of fields) {
    const option = el("option", "", field in values ? field : `${field} (not set)`);
    option.value = field;
    select.append(option);
  }
  const hint = tagged(el("span", "insp-edit-hint hint"), "edit-hint");
  const area = tagged(el("textarea", "insp-edit-value"), "edit-value");
  area.spellcheck = false;
  area.setAttribute("aria-label", "the field's value as JSON");
  const error = tagged(el("p", "insp-edit-error"), "edit-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  const save = tagged(el("button", "primary insp-edit-save", "Save as a new checkpoint"), "edit-save");
  save.type = "button";

  const say = (text) => {
    error.textContent = text;
    error.hidden = !text;
  };
  const fill = () => {
    const field = select.value;
    area.value = pretty(values[field]);
    area.rows = Math.min(18, Math.max(4, area.value.split("\n").length + 1));
    hint.textContent = field ? describe(checker.schema, field) : "";
    say("");
  };
  select.addEventListener("change", fill);
  save.addEventListener("click", async () => {
    const field = select.value;
    if (!field) return;
    let value;
    try {
      value = JSON.parse(area.value);
    } catch (err) {
      say(`not JSON: ${err.message}`);
      return;
    }
    const problems = checker.check(field, value);
    if (problems.length) {
      say(problems.join("\n"));
      return;
    }
    say("");
    save.disabled = true;
    try {
      await onSave(field, value);
    } catch (err) {
      say((err && err.message) || String(err));
    } finally {
      save.disabled = false;
    }
  });

  const head = el("div", "insp-edit-head");
  head.append(el("span", "insp-edit-label", "Field"), select, hint);
  const actions = el("div", "insp-edit-actions");
  actions.append(save);
  if (!fields.length) {
    container.replaceChildren(el("p", "insp-muted", "This state has no fields to edit."));
    return;
  }
  container.replaceChildren(head, area, error, actions);
  fill();
}
