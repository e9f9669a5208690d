// @ts-check
// The open thread's and the current request's state, and the streams that move it: every event of a
// request's stream is applied here (state, chat, status chip, buttons). app.js starts the streams,
// conversation.js opens threads.

import { api, enc, followStream, postStream, readError, streamEvents } from "./api.js";
import { chipFor, endText, errorLine, noteLine, renderEvent, setChip } from "./chat.js";
import { els } from "./dom.js";
import { enableForks, loadCheckpoints } from "./panels.js";

// Events after which the server closes the stream.
const TERMINAL = new Set(["final", "paused", "cancelled", "error"]);
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

export const state = {
  requestId: null,
  threadId: null, // the open thread; null: a new one, made at its first Send
  threadProtocol: null, // the open thread's protocol (a thread holds one protocol's conversation)
  status: null, // the server's view: running | paused | cancelled | completed | failed
  lastSeq: 0, // the last event of the current request shown (a reconnect continues after it)
  projectId: null, // the open thread's project: its id (and its requests' ids) are unique only there
  opening: 0, // which thread opening is the latest (a slower, older one draws nothing)
  starting: false, // a Send is making its thread or starting its request
  streaming: false,
  controller: null,
  pausing: false,
};

export function updateControls() {
  const live = state.status === "running";
  els.send.disabled = state.streaming || state.starting;
  els.newThread.disabled = state.streaming;
  // Leaving a thread mid-stream would drop its stream (which pauses the run): switch once it is over.
  const buttons = /** @type {NodeListOf<HTMLButtonElement>} */ (els.threads.querySelectorAll(".thread-open, .thread-delete"));
  for (const button of buttons) button.disabled = state.streaming;
  els.pause.disabled = !(live && state.requestId) || state.pausing;
  // A run waiting for an approval goes on with the answer its card sends, not with Resume.
  const approving = els.chat.querySelector('.approval[data-state="waiting"], .approval[data-state="answering"]');
  els.resume.disabled = state.streaming || state.status !== "paused" || Boolean(approving);
  els.cancel.disabled = !state.requestId || !(live || state.status === "paused");
  els.traceButton.disabled = !state.requestId;
  els.checkpointsButton.disabled = !state.threadId;
  enableForks(state.streaming);
  // The ids are no headline: a button copies them (its title shows them), its data attributes hold them.
  const ids = [state.requestId && `request ${state.requestId}`, state.threadId && `thread ${state.threadId}`];
  els.requestInfo.hidden = !ids.some(Boolean);
  els.requestInfo.title = ids.filter(Boolean).join(" · ");
  els.requestInfo.dataset.requestId = state.requestId || "";
  els.requestInfo.dataset.threadId = state.threadId || "";
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
export async function openStream(path, body) {
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
export async function readStream(open) {
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
export async function reconnect() {
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

export function showRefusal(refusal) {
  errorLine(`${refusal.status}: ${refusal.message}`);
}

// ---------------------------------------------------------------- checkpoints

let forkFrom = () => {};

/** What a checkpoint's Fork button does (app.js forks). */
export function onFork(handler) {
  forkFrom = handler;
}

/** The open thread's timeline in its panel (every turn), with a Fork per checkpoint. */
export async function showCheckpoints() {
  if (await loadCheckpoints(state.threadId, forkFrom)) updateControls(); // the new Fork buttons
}
