// @ts-check
// phasegraph web client: native ES modules, no build step, no external resources.
// This module wires the buttons: send (the open thread's next turn; the first makes the thread), pause,
// resume, cancel and fork. The state and the streams live in session.js, the thread list and opening a
// thread in conversation.js (threads.js, history.js), rendering in chat.js, the side panels in panels.js,
// HTTP/SSE in api.js.

import { api, enc, newId, useProject, useToken } from "./api.js";
import { onApprovalAnswer } from "./approval.js";
import { addUserMessage, chipFor, errorLine, noteLine, setChip, startTurn } from "./chat.js";
import {
  currentProject,
  leaveThread,
  makeThread,
  newThread,
  openThread,
  refreshThreads,
} from "./conversation.js";
import { breakpointsFor, debugRunOn, initDebugger } from "./debug.js";
import { els } from "./dom.js";
import { copyIds, loadTrace, togglePanel } from "./panels.js";
import { loadProtocols, protocolSettings, protocols, restore, save, showProtocol } from "./settings.js";
import { onFork, openStream, showCheckpoints, showRefusal, state, updateControls } from "./session.js";
import { deleteThread } from "./threads.js";

// Works for every protocol.
const resumeRoute = (requestId) => `/api/requests/${encodeURIComponent(requestId)}/resume`;

/**
 * Where a chat for this protocol goes: the protocol's own streaming route, as the server lists it, so the
 * protocol picked is the protocol that runs (whatever the server's two-stage switch, which only turns the
 * legacy /api/chat/messages_two_stage route on or off).
 */
function routeFor(protocol) {
  const spec = protocols.get(protocol);
  return spec ? spec.route : `/api/runs/${enc(protocol)}/stream`;
}

// ---------------------------------------------------------------- actions

function beginRequest(requestId) {
  state.requestId = requestId;
  state.lastSeq = 0;
  state.status = "running";
  state.pausing = false;
}

/**
 * Nothing was created on the server: forget the request (a thread made for it goes again). The request
 * the thread had before stays the page's (a message refused while an approval waits leaves its card
 * answerable).
 */
function forgetRequest(madeThread, previous) {
  state.requestId = previous.requestId;
  state.lastSeq = previous.lastSeq;
  state.status = previous.status;
  if (previous.requestId) setChip(chipFor(previous.status), previous.status);
  else setChip("error", "error");
  if (madeThread) {
    deleteThread(state.threadId).catch(() => {}); // it holds nothing: only the refused message made it
    leaveThread();
    refreshThreads();
  }
}

async function send() {
  if (state.streaming || state.starting) return;
  const message = els.message.value.trim();
  if (!message) {
    els.message.focus();
    return;
  }
  const protocol = els.protocol.value;
  if (!protocol) {
    setChip("error", "error");
    addUserMessage(message);
    errorLine("no protocol is selected (the protocol list could not be loaded)");
    return;
  }
  if (state.threadProtocol && state.threadProtocol !== protocol) newThread(); // a thread is one protocol's
  if (debugRunOn(state.threadId)) {
    errorLine("a run started in the Debug tab is going on on this thread: send once it has stopped");
    return;
  }
  state.starting = true;
  updateControls();
  try {
    await sendOnThread(message, protocol);
  } finally {
    state.starting = false;
    updateControls();
  }
  refreshThreads();
  showCheckpoints();
}

/** Send ``message`` as the open thread's next turn (its first makes the thread). */
async function sendOnThread(message, protocol) {
  const madeThread = !state.threadId;
  if (madeThread && !(await makeThread(protocol, message))) return;
  const requestId = newId();
  const previous = { requestId: state.requestId, lastSeq: state.lastSeq, status: state.status };
  beginRequest(requestId);
  els.message.value = "";
  addUserMessage(message);
  const route = routeFor(protocol);
  startTurn(`assistant · ${protocol}`);
  setChip("starting…", "running");
  const body = {
    message,
    projectId: state.projectId,
    requestId,
    threadId: state.threadId,
    showToolOutputs: els.showToolOutputs.checked,
  };
  const settings = protocolSettings(protocol); // only protocols with settings on the page send any
  if (settings) body.settings = settings;
  const stops = breakpointsFor(protocol); // the Debug tab's breakpoints: the run pauses there
  if (stops.before.length) body.interruptBefore = stops.before;
  if (stops.after.length) body.interruptAfter = stops.after;
  state.starting = false; // the stream's own flag takes over
  const refusal = await openStream(route, body);
  if (refusal) {
    showRefusal(refusal);
    forgetRequest(madeThread, previous);
  }
}

async function pause() {
  if (!state.requestId) return;
  state.pausing = true;
  updateControls();
  try {
    await api("POST", `/api/requests/${enc(state.requestId)}/pause`);
    if (state.status === "running") setChip("pausing…", "pausing");
  } catch (err) {
    state.pausing = false;
    errorLine(`pause failed: ${err.message}`);
  }
  updateControls();
}

async function resume() {
  if (!state.requestId || state.streaming) return;
  const before = state.status;
  state.status = "running";
  startTurn("assistant · resumed");
  setChip("resuming…", "running");
  const refusal = await openStream(resumeRoute(state.requestId), {});
  if (refusal) {
    showRefusal(refusal);
    await settleRefused(before);
  }
}

/**
 * After a refused resume or answer, show where the request stands now: a later request on its thread
 * may have gone on from it (``superseded``: no Resume any more), else it is as it was.
 */
async function settleRefused(before) {
  const record = await api("GET", `/api/requests/${enc(state.requestId)}`).catch(() => null);
  state.status = (record && record.status) || before;
  setChip(chipFor(state.status), state.status);
  updateControls();
}

/**
 * Answer the approval the request waits on: resume it with {"answer": ...} (its stream goes on in the
 * same turn). Returns the refusal's message (the card shows it and takes another answer) or null.
 */
async function answerApproval(answer) {
  if (!state.requestId) return "there is no request to answer";
  if (state.streaming) return "the request is still streaming; wait for it to stop";
  const before = state.status;
  state.status = "running";
  setChip("resuming…", "running");
  const refusal = await openStream(resumeRoute(state.requestId), { answer });
  if (refusal) {
    await settleRefused(before);
    return `${refusal.status}: ${refusal.message}`;
  }
  refreshThreads();
  showCheckpoints();
  return null;
}

async function cancel() {
  if (!state.requestId) return;
  try {
    await api("POST", `/api/requests/${enc(state.requestId)}/cancel`);
    if (!state.streaming) {
      // No open stream will report it.
      state.status = "cancelled";
      noteLine("cancelled", "error");
      setChip("cancelled", "cancelled");
    }
  } catch (err) {
    errorLine(`cancel failed: ${err.message}`);
  }
  updateControls();
}

async function fork(checkpointId) {
  const threadId = state.threadId;
  if (!threadId || state.streaming) return;
  state.requestId = null; // the server names the new request; its first event tells us
  state.lastSeq = 0;
  state.status = "running";
  state.pausing = false;
  startTurn(`assistant · fork of ${checkpointId.slice(0, 13)}…`);
  setChip("forking…", "running");
  const refusal = await openStream(`/api/threads/${enc(threadId)}/checkpoints/${enc(checkpointId)}/fork`, {});
  if (refusal) {
    showRefusal(refusal);
    state.status = null;
    setChip("error", "error");
  }
  refreshThreads();
  showCheckpoints();
}

// ---------------------------------------------------------------- wiring

let searching = null;
/** The thread list again for what the search box says, once typing pauses. */
function searchThreads() {
  clearTimeout(searching);
  searching = setTimeout(refreshThreads, 250);
}

function sendOnEnter(event) {
  // Shift+Enter makes a new line; Enter while an IME is composing belongs to the IME.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

/** A protocol belongs to its thread: picking another one starts a new thread. */
function protocolChanged() {
  showProtocol();
  save();
  if (state.threadProtocol && state.threadProtocol !== els.protocol.value) newThread();
}

function projectChanged() {
  save();
  newThread();
  refreshThreads();
}

async function init() {
  useToken(() => els.token.value.trim());
  useProject(() => state.projectId || currentProject());
  restore();
  const params = new URL(window.location.href).searchParams;
  if (params.get("project")) els.projectId.value = params.get("project");
  state.projectId = currentProject();
  els.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  els.message.addEventListener("keydown", sendOnEnter);
  els.protocol.addEventListener("change", protocolChanged);
  for (const fieldset of els.protocolSettings) fieldset.addEventListener("change", save);
  els.projectId.addEventListener("change", projectChanged);
  els.showToolOutputs.addEventListener("change", save);
  els.token.addEventListener("change", () => {
    loadProtocols(); // the token may change what the server lists
    refreshThreads();
  });
  els.pause.addEventListener("click", pause);
  els.resume.addEventListener("click", resume);
  els.cancel.addEventListener("click", cancel);
  els.traceButton.addEventListener("click", () => togglePanel(els.traceButton, () => loadTrace(state.requestId)));
  els.checkpointsButton.addEventListener("click", () => togglePanel(els.checkpointsButton, showCheckpoints));
  els.requestInfo.addEventListener("click", () => copyIds(els.requestInfo));
  els.newThread.addEventListener("click", newThread);
  onFork(fork);
  onApprovalAnswer(answerApproval);
  els.threadSearch.addEventListener("input", searchThreads);
  initDebugger({
    threadId: () => state.threadId,
    protocol: () => state.threadProtocol || els.protocol.value,
    streaming: () => state.streaming,
    reopen: () => state.threadId && !state.streaming && openThread(state.threadId),
  });
  updateControls();
  await loadProtocols(); // first: an opened thread puts its protocol in the picker
  const threadId = params.get("thread");
  if (threadId) openThread(threadId);
  else newThread();
  refreshThreads();
}

init();
