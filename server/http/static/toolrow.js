// @ts-check
// A tool call as one compact row of the chat: its name, its arguments cut short, how it ended and, on demand
// (the row opens), its whole arguments, its error and its output. chat.js puts the rows into the turn.

import { el, scroller } from "./dom.js";
import { executionTag } from "./network.js";
import { argsText } from "./turn.js";

// How many characters of the arguments the closed row shows (the whole of them are one click away).
const SHORT_ARGS = 72;

/** The arguments as indented JSON, for the opened row. */
function argsBlock(args) {
  try {
    return JSON.stringify(args || {}, null, 2);
  } catch (_) {
    return String(args);
  }
}

/** ``text`` cut to ``limit`` characters, an ellipsis marking the cut. */
export function shortText(text, limit = SHORT_ARGS) {
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

/**
 * A closed row for a call that runs now: "⚙ read_file {"path":"docs/a.md"} running…". Opening it shows the
 * whole arguments; the result adds the error and the output (``args`` undefined: the call was not seen).
 */
export function toolRow(callId, name, args, executionId) {
  const row = el("details", "tool");
  row.dataset.callId = callId || "";
  row.dataset.testid = "tool-line";
  const head = el("summary", "tool-head");
  const line = args === undefined ? "" : argsText(args);
  const shown = el("code", "tool-args", shortText(line));
  if (shown.textContent !== line) shown.title = line;
  head.append(
    el("span", "tool-icon", "⚙"),
    el("span", "tool-name", name),
    shown,
    el("span", "tool-status pending", "running…"),
  );
  if (executionId) {
    // agent_network: the call runs for the agent in control; its id keys the tool execution log.
    row.classList.add("in-network");
    head.append(executionTag(executionId));
  }
  const detail = el("div", "tool-detail");
  if (args !== undefined) {
    const full = scroller(el("pre", "tool-args-full", argsBlock(args)));
    detail.append(el("div", "tool-detail-label", "arguments"), full);
  }
  row.append(head, detail);
  return row;
}

/**
 * The call ended: its status and time on the row, or that it never ran (``notRun``: a person rejected it, or
 * it was refused); its error and output inside it (a row whose call failed or never ran opens).
 */
export function finishToolRow(row, ev) {
  const status = row.querySelector(".tool-status");
  const ms = typeof ev.durationMs === "number" ? ` · ${Math.round(ev.durationMs)} ms` : "";
  if (ev.notRun) {
    status.className = "tool-status skipped";
    status.textContent = `${ev.notRun}, not run`;
  } else {
    status.className = `tool-status ${ev.status === "ok" ? "ok" : "failed"}`;
    status.textContent = `${ev.status}${ms}`;
  }
  const detail = row.querySelector(".tool-detail");
  if (ev.error) {
    detail.append(el("div", "tool-error", ev.error));
    row.open = true; // what went wrong is read without a click
  }
  if (typeof ev.output === "string") {
    detail.append(el("div", "tool-detail-label", "output"));
    const output = scroller(el("pre", "tool-output", ev.output));
    output.dataset.testid = "tool-output";
    detail.append(output);
    row.querySelector(".tool-head").append(el("span", "tool-more", "output"));
  }
}
