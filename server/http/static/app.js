// phasegraph web client: native ES modules, no build step, no external resources.
// This module keeps the current request's state and wires the buttons: send, pause, resume,
// cancel and fork. Rendering lives in chat.js, the side panels in panels.js, HTTP/SSE in api.js.

import { api, enc, followStream, newId, postStream, readError, streamEvents, useProject, useToken } from "./api.js";
import {
  addUserMessage,
  chipFor,
  endText,
  errorLine,
  noteLine,
  relabelTurn,
  renderEvent,
  setChip,
  startTurn,
} from "./chat.js";
import { els } from "./dom.js";
import { enableForks, loadCheckpoints, loadTrace } from "./panels.js";
import { loadProtocols, protocolSettings, protocols, restore, save, showProtocol } from "./settings.js";

// Events after which the server closes the stream.
const TERMINAL = new Set(["final", "paused", "cancelled", "error"]);
// Works for every protocol and is not behind the two-stage flag.
const resumeRoute = (requestId) => `/api/requests/${encodeURIComponent(requestId)}/resume`;
// The one switch: triggered_phase chats go to the two-stage route until the server says it is off.
const TWO_STAGE_PROTOCOL = "triggered_phase";
const TWO_STAGE_ROUTE = "/api/chat/messages_two_stage";

// The request's status as an event moves it there (the server's view).
const STATUS_AFTER = {
  phase_start: "running",
  final: "completed",
  paused: "paused",
  resumed: "running",
  cancelled: "cancelled",
  error: "failed",
};
// Events that settle an outstanding pause request.
const SETTLES_PAUSE = new Set(["paused", "cancelled", "error"]);
// How long a broken stream is followed again (the server may be restarting) before giving up.
const RECONNECT_MS = 30_000;
const RECONNECT_EVERY_MS = 1_000;

const state = {
  requestId: null,
  threadId: null,
  status: null, // the server's view: running | paused | cancelled | completed | failed
  lastSeq: 0, // the last event of the current request shown (a reconnect continues after it)
  projectId: null, // the current request's project: its id (and thread id) are unique only there
  streaming: false,
  controller: null,
  pausing: false,
  twoStageFallback: null, // the fallback route, once the two-stage route answered that it is off
};

function updateControls() {
  const live = state.status === "running";
  els.send.disabled = state.streaming;
  els.pause.disabled = !(live && state.requestId) || state.pausing;
  els.resume.disabled = state.streaming || state.status !== "paused";
  els.cancel.disabled = !state.requestId || !(live || state.status === "paused");
  els.traceButton.disabled = !state.requestId;
  els.checkpointsButton.disabled = !state.threadId;
  enableForks(state.streaming);
  els.requestInfo.textContent = state.requestId
    ? `request ${state.requestId}${state.threadId && state.threadId !== state.requestId ? ` · thread ${state.threadId}` : ""}`
    : "";
}

function applyEvent(ev) {
  if (ev.requestId && ev.requestId !== state.requestId) state.requestId = ev.requestId; // a fork's new request
  if (typeof ev.seq === "number") state.lastSeq = ev.seq;
  if (Object.hasOwn(STATUS_AFTER, ev.type)) state.status = STATUS_AFTER[ev.type];
  if (SETTLES_PAUSE.has(ev.type)) state.pausing = false;
  renderEvent(ev);
  updateControls();
}

// ---------------------------------------------------------------- streams

/**
 * POST ``body`` to an SSE route and apply every event it sends. Returns the refusal
 * {status, message, body} when the server answered with an error instead of a stream (nothing
 * was started then; the caller reports it), otherwise null once the stream is over.
 */
async function openStream(path, body) {
  if (state.streaming) return null;
  const outcome = await readStream((signal) => postStream(path, body, signal));
  if (outcome.refusal) return outcome.refusal;
  if (!outcome.ended && state.requestId) await reconnect();
  return null;
}

/**
 * Open a stream with ``open(signal)`` and apply its events. Returns {refusal} when the server
 * answered with an error instead, {ended: true} after a terminal event, {ended: false} when the
 * stream broke or closed before one (the server went away, the network dropped).
 */
async function readStream(open) {
  const controller = new AbortController();
  state.streaming = true;
  state.controller = controller;
  updateControls();
  let ended = false;
  try {
    const response = await open(controller.signal);
    if (!response.ok) return { refusal: await readError(response) };
    for await (const event of streamEvents(response)) {
      applyEvent(event);
      if (TERMINAL.has(event.type)) ended = true;
    }
  } catch (err) {
    if (err.name === "AbortError") ended = true;
  } finally {
    state.streaming = false;
    state.controller = null;
    endText();
    updateControls();
  }
  return { ended };
}

/**
 * The stream broke before final/paused/cancelled/error. Follow the request again from the last
 * event shown, for a while: a restarted server (or another replica) takes a crashed run over and
 * its stream then says paused, or goes on (dropping what a re-run replaces).
 */
async function reconnect() {
  const notice = noteLine("the connection was lost; reconnecting…", "warn");
  const deadline = Date.now() + RECONNECT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_EVERY_MS));
    const outcome = await readStream((signal) => followStream(state.requestId, state.lastSeq, signal));
    if (outcome.ended) {
      notice.textContent = "the connection was lost; reconnected";
      return;
    }
    if (outcome.refusal && outcome.refusal.status < 500) break; // the server answers, but not with the request
  }
  await streamLost();
}

/** Following again did not work: ask the server where the request is. */
async function streamLost() {
  try {
    const record = await api("GET", `/api/requests/${enc(state.requestId)}`);
    state.status = record.status;
    noteLine(`the stream ended early; the request is ${record.status}`, "warn");
    setChip(chipFor(record.status), record.status);
  } catch (err) {
    errorLine(`the stream ended early and the request could not be read: ${err.message}`);
    setChip("error", "error");
  }
  updateControls();
}

function showRefusal(refusal) {
  errorLine(`${refusal.status}: ${refusal.message}`);
}

// ---------------------------------------------------------------- the one switch

/** Where a chat for this protocol goes. */
function routeFor(protocol) {
  if (protocol === TWO_STAGE_PROTOCOL) return state.twoStageFallback || TWO_STAGE_ROUTE;
  const spec = protocols.get(protocol);
  return spec ? spec.route : `/api/runs/${enc(protocol)}/stream`;
}

function turnLabel(protocol, route) {
  return route === state.twoStageFallback ? `assistant · ${protocol} → ${route}` : `assistant · ${protocol}`;
}

/** The route the server names when the two-stage route is switched off (404 + "fallback"), else null. */
function fallbackFrom(refusal, route) {
  const target = refusal && refusal.body && refusal.body.fallback;
  const named = typeof target === "string" && target.startsWith("/api/");
  return route === TWO_STAGE_ROUTE && refusal.status === 404 && named ? target : null;
}

/** Use the fallback route for this and every later triggered_phase chat; say so once. */
function switchToFallback(route, protocol) {
  state.twoStageFallback = route;
  const notice = noteLine(`two-stage route is off; using the fallback ${route}`, "warn");
  notice.dataset.testid = "route-notice";
  relabelTurn(turnLabel(protocol, route));
}

// ---------------------------------------------------------------- actions

function beginRequest(requestId, projectId) {
  state.requestId = requestId;
  state.projectId = projectId;
  state.lastSeq = 0;
  state.threadId = requestId;
  state.status = "running";
  state.pausing = false;
}

/** Nothing was created on the server: forget the request. */
function forgetRequest() {
  state.requestId = null;
  state.threadId = null;
  state.status = null;
  setChip("error", "error");
}

async function send() {
  if (state.streaming) return;
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
  const requestId = newId();
  const projectId = els.projectId.value.trim() || "default";
  beginRequest(requestId, projectId);
  els.message.value = "";
  addUserMessage(message);
  const route = routeFor(protocol);
  startTurn(turnLabel(protocol, route));
  setChip("starting…", "running");
  const body = {
    message,
    projectId,
    requestId,
    showToolOutputs: els.showToolOutputs.checked,
  };
  const settings = protocolSettings(protocol); // only protocols with settings on the page send any
  if (settings) body.settings = settings;
  let refusal = await openStream(route, body);
  const fallback = refusal && fallbackFrom(refusal, route);
  if (fallback) {
    // The refused request was never created, so the same request id is free for the retry.
    switchToFallback(fallback, protocol);
    refusal = await openStream(fallback, body);
  }
  if (refusal) {
    showRefusal(refusal);
    forgetRequest();
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
    state.status = before;
    setChip(chipFor(before), before);
  }
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
}

async function showCheckpoints() {
  if (await loadCheckpoints(state.threadId, fork)) updateControls(); // the new Fork buttons
}

// ---------------------------------------------------------------- wiring

function sendOnEnter(event) {
  // Shift+Enter makes a new line; Enter while an IME is composing belongs to the IME.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

function init() {
  useToken(() => els.token.value.trim());
  useProject(() => state.projectId);
  restore();
  els.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  els.message.addEventListener("keydown", sendOnEnter);
  els.protocol.addEventListener("change", () => {
    showProtocol();
    save();
  });
  for (const fieldset of els.protocolSettings) fieldset.addEventListener("change", save);
  els.projectId.addEventListener("change", save);
  els.showToolOutputs.addEventListener("change", save);
  els.token.addEventListener("change", loadProtocols); // the token may change what the server lists
  els.pause.addEventListener("click", pause);
  els.resume.addEventListener("click", resume);
  els.cancel.addEventListener("click", cancel);
  els.traceButton.addEventListener("click", () => loadTrace(state.requestId));
  els.checkpointsButton.addEventListener("click", showCheckpoints);
  updateControls();
  loadProtocols();
}

init();
