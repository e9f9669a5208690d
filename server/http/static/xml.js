// @ts-check
// xml_contract's events as readable blocks: an xml_block becomes a group header with one line per
// call in step order (each line fills in as its call starts and finishes, whatever order parallel
// calls finish in), a validation_error a red box listing why a block did not run, and the step budget
// a line that says what happens next. Only builders live here; chat.js puts them into the chat.

import { el, scroller } from "./dom.js";
import { spaced } from "./network.js";
import { callText, icon } from "./pursuit.js";

// What each kind of block means, after its header.
const KIND_TEXT = {
  parallel: "run at the same time",
  sequential: "run in order; a step may use an earlier step's result",
  single: "",
};

// Status of a step line before its call starts, while it runs, and when it never ran.
const WAITING = "waiting";
const RUNNING = "running…";
const NOT_RUN = "not run";

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function objectOr(value, fallback) {
  return value && typeof value === "object" && !Array.isArray(value) ? value : fallback;
}

/** The event is one of xml_contract's calls: it names its block and its step in it. */
export function inXmlBlock(ev) {
  return ev != null && ev.group != null && ev.stepIndex != null;
}

/** "demo.read_file(path="docs/roadmap.md")" for a step of a block. */
function stepCall(step) {
  const known = objectOr(step, {});
  const name = known.service ? `${known.service}.${known.tool || "?"}` : known.tool;
  return callText(name, objectOr(known.args, {}));
}

function setStatus(line, text, kind) {
  const status = line.querySelector(".tool-status");
  status.className = `tool-status ${kind}`;
  status.textContent = text;
}

/** One call of a block: "1. demo.read_file(path="docs/roadmap.md") waiting". */
function stepLine(step, index) {
  const line = el("li", "tool xml-step");
  line.dataset.testid = "xml-step";
  line.dataset.step = String(index);
  line.append(
    spaced(
      el("div", "tool-head"),
      el("span", "xml-step-index", `${index}.`),
      el("code", "xml-call", stepCall(step)),
      el("span", `tool-status ${WAITING}`, WAITING),
    ),
  );
  return line;
}

// ---------------------------------------------------------------- blocks

/** "parallel block 1.1 · 2 calls" and its calls in step order, each still waiting to run. */
export function xmlBlockBox(ev) {
  const steps = Array.isArray(ev.steps) ? ev.steps : [];
  const kind = ev.kind || "single";
  const box = el("div", "xml-block");
  box.dataset.testid = "xml-block";
  box.dataset.kind = kind;
  box.dataset.group = ev.group || "";
  const meaning = Object.hasOwn(KIND_TEXT, kind) ? KIND_TEXT[kind] : "";
  box.append(
    spaced(
      el("div", "xml-block-head"),
      icon(kind === "parallel" ? "∥" : kind === "sequential" ? "↓" : "⚙", "xml-block-icon"),
      el("span", "xml-block-title", `${kind} block ${ev.group || "?"} · ${plural(steps.length, "call")}`),
      ...(meaning ? [el("span", "xml-block-kind", `(${meaning})`)] : []),
    ),
  );
  const list = el("ol", "xml-steps");
  steps.forEach((step, position) => list.append(stepLine(step, position + 1)));
  box.append(list);
  return box;
}

/** The line of step ``index`` of a block box; null when the block has no such step. */
export function stepOf(box, index) {
  return box ? box.querySelector(`:scope > .xml-steps > [data-step="${Number(index)}"]`) : null;
}

/** A box for calls whose block header was not seen (a stream followed from mid-block): "block 1.1". */
export function orphanBox(ev) {
  const box = xmlBlockBox({ kind: "single", group: ev.group, steps: [] });
  box.dataset.kind = "";
  box.querySelector(".xml-block-title").textContent = `block ${ev.group}`;
  return box;
}

/** Add a line for a step the block header did not list (kept in step order). */
export function addStep(box, ev) {
  const line = stepLine({ tool: ev.name, args: ev.args }, ev.stepIndex);
  const list = box.querySelector(".xml-steps");
  const after = [...list.children].find((item) => Number(item.dataset.step) > Number(ev.stepIndex));
  list.insertBefore(line, after || null);
  return line;
}

/**
 * The call starts: its line shows the arguments it runs with (a sequential step's
 * ``$result_of_step_N`` replaced by that step's output) and, when those differ, what was written.
 */
export function callStarted(line, ev) {
  line.dataset.callId = ev.callId || "";
  const call = line.querySelector(".xml-call");
  const written = call.textContent;
  const running = callText(ev.name, objectOr(ev.args, {}));
  if (running !== written) {
    call.textContent = running;
    if (written && !line.querySelector(".xml-written")) {
      line.append(el("div", "xml-written", `as written: ${written}`));
    }
  }
  setStatus(line, RUNNING, "pending");
}

/** The call finished: "ok · 14 ms" (or the error), and its output when the client asked for it. */
export function callFinished(line, ev) {
  const ms = typeof ev.durationMs === "number" ? ` · ${Math.round(ev.durationMs)} ms` : "";
  setStatus(line, `${ev.status}${ms}`, ev.status === "ok" ? "ok" : "failed");
  if (ev.error) line.append(el("div", "tool-error", ev.error));
  if (typeof ev.output === "string") {
    const output = scroller(el("pre", "tool-output", ev.output));
    output.dataset.testid = "tool-output";
    line.append(output);
  }
}

/** The tool phase ended: a step still waiting never ran (a sequential block stops at a failed step). */
export function closeBlock(box) {
  for (const line of box.querySelectorAll(":scope > .xml-steps > .xml-step")) {
    const status = line.querySelector(".tool-status");
    if (status && status.textContent === WAITING) {
      setStatus(line, NOT_RUN, "skipped");
      line.classList.add("skipped");
    }
  }
}

// ---------------------------------------------------------------- refusals and the budget

/** "block 2.1 was not run:" and its problems, one per line, in a red box. */
export function validationBox(ev) {
  const box = el("div", "xml-invalid");
  box.dataset.testid = "validation-error";
  box.dataset.group = ev.group || "";
  box.setAttribute("role", "alert");
  const title = ev.group != null ? `block ${ev.group} was not run:` : "the answer was refused; nothing was run:";
  box.append(spaced(el("div", "xml-invalid-head"), icon("✗", "xml-invalid-icon"), el("span", "xml-invalid-title", title)));
  const problems = Array.isArray(ev.problems) ? ev.problems : [];
  const list = el("ul", "xml-problems");
  for (const problem of problems) {
    const item = el("li", "", String(problem));
    item.dataset.testid = "validation-problem";
    list.append(item);
  }
  box.append(list);
  box.append(el("div", "xml-invalid-hint", "The model reads these problems and may write the block again."));
  return box;
}

/** "budget exhausted: tool steps (8 of 8): one last call answers without tools". */
export function xmlBudgetLine(ev) {
  const what = ev.budget === "steps" ? "tool steps" : ev.budget;
  return `budget exhausted: ${what} (${ev.used} of ${ev.limit}): one last call answers without tools`;
}
