// @ts-check
// The debugger's state editor: one state field of a checkpoint as JSON, checked against the protocol's
// state_schema (GET /assistants/{protocol}/schemas) while it is typed, and written as a new checkpoint.
// inspect.js shows the checkpoint itself.

import { Validator } from "./vendor/json-schema/index.js";
import { el } from "./dom.js";
import { isObject, shortJson, tagged } from "./inspect.js";

// ---------------------------------------------------------------- the editor

/** The validator's draft: 2020-12 (what pydantic writes) unless the schema names another. */
/** @returns {import("./vendor/json-schema/index.js").SchemaDraft} */
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
