// @ts-check
// The side panels: a request's trace and the open thread's checkpoint timeline, every turn of it
// (with a Fork per row; older pages on demand).

import { api, apiPage, enc } from "./api.js";
import { el, els, scroller } from "./dom.js";

function shortJson(value, max) {
  const text = JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

// ---------------------------------------------------------------- trace

function traceItem(entry) {
  const item = el("li", "trace-entry");
  item.dataset.type = entry.type;
  item.dataset.testid = "trace-entry";
  // Collapsed to one line; the full details open on click.
  const details = el("details");
  const summary = el("summary");
  summary.append(el("span", "trace-type", entry.type), el("span", "trace-preview", shortJson(entry.details || {}, 90)));
  details.append(summary, scroller(el("pre", "trace-details", JSON.stringify(entry.details || {}, null, 2))));
  if (entry.ts) item.title = entry.ts;
  item.append(details);
  return item;
}

/** Load the request's trace into the trace panel. */
export async function loadTrace(requestId) {
  if (!requestId) return;
  els.traceRequest.textContent = `· ${requestId}`;
  els.trace.replaceChildren(el("p", "hint", "loading…"));
  let entries;
  try {
    entries = await api("GET", `/api/requests/${enc(requestId)}/trace`);
  } catch (err) {
    els.trace.replaceChildren(el("p", "note error", `trace failed: ${err.message}`));
    return;
  }
  if (!entries.length) {
    els.trace.replaceChildren(el("p", "hint", "no trace entries yet"));
    return;
  }
  const list = el("ol", "trace-list");
  list.append(...entries.map(traceItem));
  els.trace.replaceChildren(list);
}

// ---------------------------------------------------------------- checkpoints

function forkButton(row, onFork) {
  const button = el("button", "fork", "Fork");
  button.type = "button";
  // A checkpoint with nothing next is the end of the run: forking it would do nothing.
  button.dataset.ended = String(!(row.next && row.next.length));
  button.title = button.dataset.ended === "true" ? "the run finished here: nothing to fork" : "continue a new request from here";
  button.addEventListener("click", () => onFork(row.checkpointId));
  return button;
}

function checkpointRow(row, onFork) {
  const tr = el("tr", "checkpoint-row");
  if (row.source === "input") tr.classList.add("turn-start"); // the input of a turn starts a run
  tr.dataset.checkpointId = row.checkpointId;
  tr.dataset.testid = "checkpoint-row";
  tr.title = `${row.checkpointId}${row.createdAt ? `\n${row.createdAt}` : ""}`;
  const phase = row.phaseIndex == null ? "" : `#${row.phaseIndex}${row.cycleIndex == null ? "" : ` (c${row.cycleIndex})`}`;
  tr.append(
    el("td", "num", row.step == null ? "" : String(row.step)),
    el("td", "node", row.node || { update: "(edit)", fork: "(fork)" }[row.source] || "(input)"),
    el("td", "", phase),
    el("td", "next", row.next && row.next.length ? row.next.join(", ") : "(end)"),
  );
  const cell = el("td");
  cell.append(forkButton(row, onFork));
  tr.append(cell);
  return tr;
}

function checkpointTable(rows, onFork) {
  const table = el("table", "checkpoint-table");
  const head = el("tr");
  for (const title of ["step", "node", "phase", "next", "fork"]) head.append(el("th", `col-${title}`, title));
  table.append(el("thead"));
  table.tHead.append(head);
  const tbody = el("tbody");
  tbody.append(...rows.map((row) => checkpointRow(row, onFork)));
  table.append(tbody);
  return table;
}

// Checkpoints per page of the timeline (the server's default is 50, its most 500).
const PAGE = 200;
// Which load is the latest: an older one that answers late draws nothing.
let loads = 0;

/** A button that puts the next, older page of the timeline above the rows shown. */
function olderButton(next, onFork, table) {
  const button = el("button", "older", "Older checkpoints…");
  button.type = "button";
  button.dataset.testid = "older-checkpoints";
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const page = await apiPage("GET", next);
      table.tBodies[0].prepend(...page.body.map((row) => checkpointRow(row, onFork)));
      if (page.next) button.replaceWith(olderButton(page.next, onFork, table));
      else button.remove();
    } catch (err) {
      button.replaceWith(el("p", "note error", `older checkpoints failed: ${err.message}`));
    }
  });
  return button;
}

/**
 * Load the thread's checkpoint timeline (all its turns, newest page) into its panel; a row's Fork
 * button calls onFork(checkpointId). Returns true when the table was drawn.
 */
export async function loadCheckpoints(threadId, onFork) {
  if (!threadId) {
    clearCheckpoints();
    return false;
  }
  const load = ++loads;
  els.checkpointsThread.textContent = `· ${threadId}`;
  els.checkpoints.replaceChildren(el("p", "hint", "loading…"));
  let page;
  try {
    page = await apiPage("GET", `/api/threads/${enc(threadId)}/checkpoints?limit=${PAGE}`);
  } catch (err) {
    if (load !== loads) return false;
    const none = err.status === 404; // no run on the thread yet
    els.checkpoints.replaceChildren(
      none ? el("p", "hint", "no checkpoints yet") : el("p", "note error", `checkpoints failed: ${err.message}`),
    );
    return false;
  }
  if (load !== loads) return false;
  const table = checkpointTable(page.body, onFork);
  els.checkpoints.replaceChildren(table);
  if (page.next) els.checkpoints.prepend(olderButton(page.next, onFork, table));
  return true;
}

/** Empty the timeline (no thread is open). */
export function clearCheckpoints() {
  loads++;
  els.checkpointsThread.textContent = "";
  els.checkpoints.replaceChildren(el("p", "hint", "A new thread: its checkpoints show here after its first message."));
}

/** Fork buttons work only while nothing streams, and never on a checkpoint that ended the run. */
export function enableForks(streaming) {
  for (const button of /** @type {NodeListOf<HTMLButtonElement>} */ (els.checkpoints.querySelectorAll("button.fork"))) {
    button.disabled = streaming || button.dataset.ended === "true";
  }
}

/** Open or close the side panel a button controls (``aria-controls``); ``load`` fills it as it opens. */
export function togglePanel(button, load) {
  const panel = document.getElementById(button.getAttribute("aria-controls") || "");
  if (!panel) return;
  const opening = panel.hidden;
  panel.hidden = !opening;
  button.setAttribute("aria-expanded", String(opening));
  if (opening) load();
}

/** Copy the ids the header's button holds (its title), and say so on it for a moment. */
export async function copyIds(button) {
  try {
    await navigator.clipboard.writeText(button.title);
    button.textContent = "copied";
  } catch (_) {
    button.textContent = "copy failed: see the title";
  }
  setTimeout(() => (button.textContent = "copy ids"), 1500);
}
