// @ts-check
// The offline graph debugger (the page's Debug tab): the chosen protocol's graph (graph.js), the open
// thread's checkpoints as a tree with its branches (timeline.js), the state at a checkpoint with what
// changed and an editor (inspect.js), breakpoints for the next run and runs from any checkpoint.
//
// While the tab is shown it asks the server every POLL_MS for the thread's newest checkpoint; when one
// is new it reads the timeline again. So a run started anywhere (this page's chat, the CLI, another
// client) is followed: while it runs the lit node is the one running (the newest checkpoint's next).

import { api, apiPage, enc, postStream, readError, sseFrames } from "./api.js";
import { el } from "./dom.js";
import { showEditor } from "./editor.js";
import { showState } from "./inspect.js";
import { drawTimeline, newestOf, treeOf } from "./timeline.js";
import { drawProtocol, mark } from "./debug_graph.js";
import {
  FIRST_PAGE,
  LIVE_RUN,
  NEW_PAGE,
  POLL_MS,
  QUIET_EVERY,
  dbg,
  hooks,
  live,
  notice,
  say,
  shown,
  ui,
} from "./debug_state.js";

// ---------------------------------------------------------------- tabs

function showTab(debug) {
  ui.debugView.hidden = !debug;
  ui.chatView.hidden = debug;
  ui.tabDebug.setAttribute("aria-selected", String(debug));
  ui.tabChat.setAttribute("aria-selected", String(!debug));
  ui.tabDebug.tabIndex = debug ? 0 : -1; // Tab reaches the selected tab only; arrows move between them
  ui.tabChat.tabIndex = debug ? -1 : 0;
  document.querySelector(".layout").classList.toggle("debugging", debug);
  const url = new URL(window.location.href); // a reload opens the same tab
  if (debug) url.searchParams.set("view", "debug");
  else url.searchParams.delete("view");
  window.history.replaceState(null, "", url);
  if (debug) poll();
  else if (dbg.chatStale) {
    dbg.chatStale = false;
    hooks.reopen();
  }
}


// ---------------------------------------------------------------- the thread

function resetThread(threadId) {
  Object.assign(dbg, { threadId, rows: [], older: null, newestId: null, selectedId: null, shownId: null });
  Object.assign(dbg, { runId: null, runStatus: null, requestStatus: null, follow: true, threadRan: false });
  ui.timelineThread.textContent = threadId ? `· ${threadId}` : "";
  ui.timeline.replaceChildren(el("p", "hint", threadId ? "loading…" : "Open a thread to see its checkpoints."));
  ui.stateView.replaceChildren(el("p", "hint", "Select a checkpoint in the timeline."));
  ui.editor.replaceChildren();
  ui.stateCheckpoint.textContent = "";
  mark();
  updateButtons();
}

/** The thread has no checkpoint yet (made, never run): say so instead of "loading…". */
function noCheckpoints() {
  if (dbg.rows.length || ui.timeline.dataset.empty === "true") return;
  ui.timeline.replaceChildren(el("p", "hint", "This thread has no checkpoints yet: send it a message."));
  ui.timeline.dataset.empty = "true";
  mark();
}

/** The native status of the thread's newest run (paused, cancelled, failed ...), for the status line. */
async function requestStatus(runId) {
  try {
    return (await api("GET", `/api/requests/${enc(runId)}`)).status;
  } catch (_) {
    return null;
  }
}

async function readThread() {
  const threadId = dbg.threadId;
  const path = `/api/threads/${enc(threadId)}/checkpoints`;
  let newest;
  try {
    [newest] = await api("GET", `${path}?limit=1`);
  } catch (err) {
    if (err.status !== 404) throw err;
    if (threadId === dbg.threadId) noCheckpoints(); // no run yet: nothing to show
    return;
  }
  const runs = await api("GET", `/threads/${enc(threadId)}/runs?limit=1`);
  if (threadId !== dbg.threadId) return;
  const run = runs.length ? runs[0] : null;
  const status = run ? run.status : null;
  dbg.threadRan = Boolean(run && run.assistant_id);
  // The graph is the one the thread ran on (a chat may have gone to another protocol's route).
  if (run && run.assistant_id && run.assistant_id !== dbg.protocol) await drawProtocol(run.assistant_id);
  // A run that starts (a new one, or a paused one going on) is followed, whatever was picked before.
  const starts = LIVE_RUN.has(status) && !LIVE_RUN.has(dbg.runStatus);
  if ((run && dbg.runId !== null && run.run_id !== dbg.runId) || starts) {
    dbg.follow = true;
  }
  const changed = newest.checkpointId !== dbg.newestId;
  const settled = status !== dbg.runStatus || (run && run.run_id !== dbg.runId);
  dbg.runId = run ? run.run_id : null;
  dbg.runStatus = status;
  if (settled) dbg.requestStatus = run ? await requestStatus(run.run_id) : null;
  if (threadId !== dbg.threadId) return;
  if (changed || settled) dbg.quiet = 0;
  if (changed) {
    if (!(await loadRows(path, threadId))) return;
    dbg.newestId = newestOf(dbg.rows).checkpointId;
    if (dbg.follow || !treeOf(dbg.rows).byId.has(dbg.selectedId)) dbg.selectedId = dbg.newestId;
    drawRows();
    await showCheckpoint(dbg.selectedId);
  } else if (settled) mark();
  updateButtons();
}

/**
 * Read the thread's newest checkpoints into what is loaded: FIRST_PAGE when it opens (older ones on
 * "load older"), then NEW_PAGE each time it moves (a whole FIRST_PAGE when it moved further than that).
 * False when another thread was opened meanwhile.
 */
async function loadRows(path, threadId) {
  const first = !dbg.rows.length;
  let page = await apiPage("GET", `${path}?limit=${first ? FIRST_PAGE : NEW_PAGE}`);
  const known = new Set(dbg.rows.map((row) => row.checkpointId));
  if (!first && page.next && !page.body.some((row) => known.has(row.checkpointId))) {
    page = await apiPage("GET", `${path}?limit=${FIRST_PAGE}`);
  }
  if (threadId !== dbg.threadId) return false;
  addRows(page.body);
  if (first) dbg.older = page.next;
  delete ui.timeline.dataset.empty;
  return true;
}

/** Put ``rows`` into what is loaded (a checkpoint read again replaces its old row). */
function addRows(rows) {
  const loaded = new Map(dbg.rows.map((row) => [row.checkpointId, row]));
  for (const row of rows) loaded.set(row.checkpointId, row);
  dbg.rows = [...loaded.values()];
}

/** The next page of older checkpoints, added to the timeline. */
async function loadOlder() {
  const threadId = dbg.threadId;
  if (!dbg.older) return;
  try {
    const page = await apiPage("GET", dbg.older);
    if (threadId !== dbg.threadId) return;
    addRows(page.body);
    dbg.older = page.next;
    drawRows();
    mark();
  } catch (err) {
    say(`older checkpoints could not be read: ${err.message}`);
  }
}

function drawRows() {
  drawTimeline(ui.timeline, dbg.rows, dbg.selectedId, {
    select: pick,
    newestId: dbg.newestId,
    older: dbg.older ? loadOlder : null,
  });
}

/** The user picked a checkpoint: show it, and stop following the run (until the next run starts). */
function pick(checkpointId) {
  dbg.follow = checkpointId === dbg.newestId;
  dbg.selectedId = checkpointId;
  drawRows();
  const chosen = /** @type {HTMLButtonElement} */ (ui.timeline.querySelector(".timeline-item.selected .timeline-open"));
  if (chosen) chosen.focus(); // the list was drawn again: keep the keyboard where it was
  showCheckpoint(checkpointId);
}

const stateAt = (threadId, checkpointId) => api("GET", `/threads/${enc(threadId)}/state/${enc(checkpointId)}`);

/** Show a checkpoint's state and the editor; a checkpoint never changes, so one already shown stays as it is. */
async function showCheckpoint(checkpointId) {
  const threadId = dbg.threadId;
  const row = treeOf(dbg.rows).byId.get(checkpointId);
  mark();
  updateButtons();
  if (!row || checkpointId === dbg.shownId) return; // (an edit being typed there is kept)
  try {
    const [snapshot, previous] = await Promise.all([
      stateAt(threadId, checkpointId),
      row.parentId ? stateAt(threadId, row.parentId) : null,
    ]);
    if (threadId !== dbg.threadId || checkpointId !== dbg.selectedId) return;
    snapshot.ran = row.node ? row.node.split(",") : [];
    ui.stateCheckpoint.textContent = `· step ${row.step} · ${checkpointId}`;
    showState(ui.stateView, snapshot, previous);
    showEditor(ui.editor, { snapshot, schema: dbg.schema, onSave: (field, value) => edit(checkpointId, field, value) });
    dbg.shownId = checkpointId;
  } catch (err) {
    ui.stateView.replaceChildren(el("p", "note error", `the state could not be read: ${err.message}`));
  }
}

// ---------------------------------------------------------------- edits and runs

/** Save an edited field as a new checkpoint on top of ``checkpointId`` (a branch when it is not the newest). */
async function edit(checkpointId, field, value) {
  const written = await api("POST", `/threads/${enc(dbg.threadId)}/state`, {
    values: { [field]: value },
    checkpoint_id: checkpointId,
  });
  notice("");
  dbg.follow = true; // the edit is the newest checkpoint: select it
  dbg.newestId = null; // read the timeline again, whatever a poll saw meanwhile
  await readThread();
  say(`saved as checkpoint ${written.checkpoint_id}: "Continue from here" runs the thread from it`);
}

const ASKS =
  "This checkpoint waits for an answer (an approval): answer it in the Chat tab. To run this point again " +
  "without it, replay from the checkpoint before it.";

function updateButtons() {
  const row = treeOf(dbg.rows).byId.get(dbg.selectedId);
  const asks = Boolean(row && row.interrupts && row.interrupts.length);
  ui.continueRun.disabled = !row || !row.next.length || asks || live();
  ui.continueRun.textContent = row && row.checkpointId !== dbg.newestId ? "Replay from here" : "Continue from here";
  if (asks) notice(ASKS);
  else if (ui.runNotice.textContent === ASKS) notice("");
}

/** Run the thread from the selected checkpoint (a fork when it is not the newest), with the breakpoints. */
async function runFromHere() {
  const checkpointId = dbg.selectedId;
  if (!checkpointId || live()) return;
  const threadId = dbg.threadId;
  notice("");
  dbg.runningOn = threadId;
  dbg.follow = true;
  updateButtons();
  const body = {
    assistant_id: dbg.protocol,
    input: null,
    checkpoint_id: checkpointId,
    stream_mode: ["updates"],
    interrupt_before: [...dbg.breakBefore],
    interrupt_after: [...dbg.breakAfter],
  };
  try {
    const response = await postStream(`/threads/${enc(threadId)}/runs/stream`, body);
    if (!response.ok) {
      const refusal = await readError(response);
      notice(`the run was refused (${refusal.status}): ${refusal.message}`);
    } else {
      for await (const frame of sseFrames(response.body)) {
        if (frame.event === "error") notice(`the run failed: ${frame.data}`);
      }
    }
  } catch (err) {
    notice(`the run failed: ${err.message}`);
  } finally {
    dbg.runningOn = null;
    if (shown()) dbg.chatStale = true;
    else hooks.reopen(); // the chat is shown: draw the thread's conversation again now
    if (threadId === dbg.threadId) dbg.newestId = null; // read the timeline again, whatever the poll saw
    await poll();
  }
}

// ---------------------------------------------------------------- the loop

async function poll() {
  if (!shown() || dbg.busy) return;
  dbg.busy = true;
  try {
    const threadId = hooks.threadId();
    if (threadId !== dbg.threadId) resetThread(threadId);
    const protocol = hooks.protocol();
    if (!dbg.threadRan && protocol && protocol !== dbg.protocol) await drawProtocol(protocol);
    if (threadId) await readThread();
    else mark();
  } catch (err) {
    say(`could not read the thread: ${err.message}`);
  } finally {
    dbg.busy = false;
  }
}

/** Whether a run this tab started streams on ``threadId`` (the chat waits for it). */
export function debugRunOn(threadId) {
  return dbg.runningOn !== null && dbg.runningOn === threadId;
}

/** The breakpoints picked for ``protocol`` (none when its graph is not the one drawn): {before, after}. */
export function breakpointsFor(protocol) {
  if (protocol !== dbg.protocol) return { before: [], after: [] };
  return { before: [...dbg.breakBefore], after: [...dbg.breakAfter] };
}

/**
 * Start the debugger. ``given`` tells it the open thread, the chosen protocol (the open thread's, else the
 * picker's), whether the chat is streaming, and how to draw the chat again after a run made here.
 */
export function initDebugger(given) {
  Object.assign(hooks, given);
  ui.tabChat.addEventListener("click", () => showTab(false));
  ui.tabDebug.addEventListener("click", () => showTab(true));
  for (const tab of [ui.tabChat, ui.tabDebug]) {
    tab.addEventListener("keydown", (event) => {
      // two tabs: either arrow goes to the other one, Home to the first, End to the last
      const moves = { ArrowLeft: tab === ui.tabChat, ArrowRight: tab === ui.tabChat, Home: false, End: true };
      if (!Object.hasOwn(moves, event.key)) return;
      event.preventDefault();
      const debug = moves[event.key];
      showTab(debug);
      (debug ? ui.tabDebug : ui.tabChat).focus();
    });
  }
  ui.expand.addEventListener("change", () => {
    dbg.protocol = null; // draw it again, the other way
    poll();
  });
  ui.continueRun.addEventListener("click", runFromHere);
  setInterval(() => {
    const moved = dbg.threadId !== hooks.threadId() || (!dbg.threadRan && hooks.protocol() !== dbg.protocol);
    if (live() || moved || ++dbg.quiet % QUIET_EVERY === 0) poll();
  }, POLL_MS);
  if (new URL(window.location.href).searchParams.get("view") === "debug") showTab(true);
}
