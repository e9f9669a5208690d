// @ts-check
// What the debugger's modules share: its page elements, its state (the drawn graph, the open thread's
// checkpoints, the selection, the breakpoints), the page's hooks, and its status line.

export const POLL_MS = 400;
// With no run going on, the thread is read every QUIET_EVERY-th poll (2 s): a run started elsewhere
// still shows within that, and an idle tab costs the server little.
export const QUIET_EVERY = 5;
export const FIRST_PAGE = 500; // checkpoints read when a thread opens (older ones on "load older")
export const NEW_PAGE = 50; // read each time the thread moves, added to what is loaded
export const LIVE_RUN = new Set(["pending", "running"]);

export const $ = (id) => document.getElementById(id);
// Typed as the kind of element index.html gives each id (see dom.js).
export const ui = {
  tabChat: /** @type {HTMLButtonElement} */ ($("tab-chat")),
  tabDebug: /** @type {HTMLButtonElement} */ ($("tab-debug")),
  chatView: $("chat-view"),
  debugView: $("debug-view"),
  graph: $("graph"),
  expand: /** @type {HTMLInputElement} */ ($("expand-subgraphs")),
  expandLabel: $("expand-label"),
  status: $("debug-status"),
  timeline: $("timeline"),
  timelineThread: $("timeline-thread"),
  breakpoints: $("breakpoints"),
  continueRun: /** @type {HTMLButtonElement} */ ($("continue-run")),
  runNotice: $("run-notice"),
  stateView: $("state-view"),
  stateCheckpoint: $("state-checkpoint"),
  editor: $("state-editor"),
};

export const dbg = {
  protocol: null, // the protocol whose graph is drawn
  drawn: null, // its graph as drawn (collapsed or expanded)
  schema: null, // its state's JSON Schema (the editor checks edits against it)
  threadId: null,
  threadRan: false, // the thread has a run: its graph is that run's protocol, whatever the picker says
  rows: [], // the thread's checkpoints
  newestId: null,
  runStatus: null, // the thread's newest run, as the LangGraph API names its status
  selectedId: null,
  follow: true, // the selection follows the newest checkpoint (until a checkpoint is picked)
  runningOn: null, // the thread a run this tab started streams on
  older: null, // the page of older checkpoints not loaded yet (a Link the server gave), or null
  shownId: null, // the checkpoint whose state (and editor) is shown
  runId: null, // the thread's newest run
  requestStatus: null, // its native status (paused, cancelled, failed ...)
  breakBefore: new Set(),
  breakAfter: new Set(),
  busy: false, // a poll is under way
  quiet: 0, // polls skipped since the thread last moved (see QUIET_EVERY)
  chatStale: false, // the chat was drawn before a run this tab made: draw it again when shown
};

export const hooks = { threadId: () => null, protocol: () => null, streaming: () => false, reopen: () => {} };

export const shown = () => !ui.debugView.hidden;
export const live = () =>
  (dbg.runningOn !== null && dbg.runningOn === dbg.threadId) || hooks.streaming() || LIVE_RUN.has(dbg.runStatus);

export function say(text) {
  ui.status.textContent = text;
}

export function notice(text) {
  ui.runNotice.textContent = text;
  ui.runNotice.hidden = !text;
}
