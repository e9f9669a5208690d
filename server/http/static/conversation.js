// @ts-check
// Threads: the list (new, switch, rename, delete), the open thread in the address, and opening a
// thread: its conversation drawn from its state, its protocol picked, its latest request made current.

import { api, enc, followStream, newId } from "./api.js";
import { pendingApproval } from "./approval.js";
import { addUserMessage, chipFor, errorLine, forgetTurn, noteLine, setChip, showApproval, startTurn } from "./chat.js";
import { els } from "./dom.js";
import { clearChat, contentText, showConversation } from "./history.js";
import { clearCheckpoints } from "./panels.js";
import { protocols, showProtocol } from "./settings.js";
import { readStream, reconnect, showCheckpoints, state, updateControls } from "./session.js";
import {
  createThread,
  deleteThread,
  drawThreads,
  getThread,
  latestRun,
  listThreads,
  markOpen,
  matches,
  parseSearch,
  protocolOf,
  SEARCH_LIMIT,
  renameThread,
  threadState,
  threadsFailed,
  titleFrom,
} from "./threads.js";

export function currentProject() {
  return els.projectId.value.trim() || "default";
}

/** The open thread (and its project) in the address, so a reload opens it again. */
function showThreadInUrl() {
  const url = new URL(window.location.href);
  if (state.threadId) {
    url.searchParams.set("project", state.projectId);
    url.searchParams.set("thread", state.threadId);
  } else {
    url.searchParams.delete("project");
    url.searchParams.delete("thread");
  }
  window.history.replaceState(null, "", url);
}

const threadActions = {
  open: (threadId) => switchTo(threadId),
  rename: (threadId, title) => rename(threadId, title),
  remove: (threadId) => remove(threadId),
};

export async function refreshThreads() {
  const project = currentProject();
  const search = els.threadSearch.value;
  const { metadata, words } = parseSearch(search);
  try {
    const found = await listThreads(metadata, words.length ? SEARCH_LIMIT : undefined);
    const threads = found.filter((thread) => matches(thread, words));
    if (project === currentProject() && search === els.threadSearch.value) {
      drawThreads(threads, state.threadId, threadActions, Boolean(search.trim()));
    }
  } catch (err) {
    threadsFailed(err.message);
  }
  updateControls();
}

export function threadNotice(text) {
  els.threadsNotice.textContent = text;
  els.threadsNotice.hidden = !text;
}

/** No thread is open any more: the next Send makes one (the chat stays as it is). */
export function leaveThread() {
  state.opening++; // an opening still under way draws nothing
  state.threadId = null;
  state.threadProtocol = null;
  state.projectId = currentProject();
  state.requestId = null;
  state.status = null;
  state.lastSeq = 0;
  state.pausing = false;
  markOpen(null);
  showThreadInUrl();
  updateControls();
}

/** Start a new conversation: an empty chat; the thread is made at its first Send. */
export function newThread() {
  if (state.streaming) return;
  leaveThread();
  forgetTurn();
  clearChat("A new thread. Type a message and press Send; later messages continue this thread.");
  clearCheckpoints();
  setChip("idle", "idle");
  threadNotice("");
}

/** A thread for the first message of a new conversation; false (and said why) when none could be made. */
export async function makeThread(protocol, message) {
  const threadId = newId();
  state.projectId = currentProject();
  try {
    await createThread(threadId, protocol, titleFrom(message));
  } catch (err) {
    addUserMessage(message);
    errorLine(`the thread could not be made: ${err.message}`);
    setChip("error", "error");
    return false;
  }
  state.threadId = threadId;
  state.threadProtocol = protocol;
  showThreadInUrl();
  refreshThreads();
  return true;
}

export async function switchTo(threadId) {
  if (state.streaming || state.starting || threadId === state.threadId) return;
  threadNotice("");
  await openThread(threadId);
}

async function rename(threadId, title) {
  try {
    await renameThread(threadId, title);
    threadNotice("");
  } catch (err) {
    threadNotice(`rename failed: ${err.message}`);
  }
  refreshThreads();
}

async function remove(threadId) {
  if (state.streaming) return;
  try {
    await deleteThread(threadId);
    threadNotice("");
  } catch (err) {
    threadNotice(`delete failed: ${err.message}`);
    return;
  }
  if (threadId === state.threadId) newThread();
  refreshThreads();
}

/** The index of the last user message (the start of the last turn); -1 when there is none. */
function lastUserMessage(messages) {
  for (let at = messages.length - 1; at >= 0; at--) if (messages[at] && messages[at].type === "human") return at;
  return -1;
}

/**
 * Open a thread: its conversation from its state, its protocol in the picker, its timeline, and its
 * latest request as the current one (a paused one can be resumed, a running one is followed live).
 */
export async function openThread(threadId) {
  const opening = ++state.opening;
  Object.assign(state, { threadId, threadProtocol: null, projectId: currentProject() });
  Object.assign(state, { requestId: null, status: null, lastSeq: 0, pausing: false });
  markOpen(threadId);
  showThreadInUrl();
  forgetTurn();
  clearChat("loading the conversation…");
  setChip("idle", "idle");
  updateControls();
  let thread, snapshot, run;
  try {
    [thread, snapshot, run] = await Promise.all([getThread(threadId), threadState(threadId), latestRun(threadId)]);
  } catch (err) {
    if (opening !== state.opening) return;
    newThread();
    const gone = err.status === 404;
    threadNotice(gone ? `thread ${threadId} is not in project ${state.projectId}` : `opening failed: ${err.message}`);
    return;
  }
  if (opening !== state.opening) return;
  const protocol = protocolOf(thread);
  state.threadProtocol = protocol;
  if (protocol && protocols.has(protocol) && els.protocol.value !== protocol) {
    els.protocol.value = protocol;
    showProtocol();
  }
  const record = run ? await api("GET", `/api/requests/${enc(run.run_id)}`).catch(() => null) : null;
  if (opening !== state.opening) return;
  showCheckpoints();
  const messages = (snapshot.values && Array.isArray(snapshot.values.messages) && snapshot.values.messages) || [];
  const approvals = (snapshot.interrupts || []).map(pendingApproval).filter(Boolean);
  await showThread(messages, protocol || "?", record, approvals);
}

/**
 * Draw the opened thread's conversation; its latest request becomes the current one (a paused one that
 * waits for an approval shows the call's card, whose answer resumes it).
 */
async function showThread(messages, protocol, record, approvals) {
  const label = `assistant · ${protocol}`;
  const live = record && record.status === "running";
  // A running request's turn is shown by following its events, not from the state it has so far.
  const cut = live ? lastUserMessage(messages) : -1;
  showConversation(cut >= 0 ? messages.slice(0, cut) : messages, label, els.showToolOutputs.checked);
  if (!record) {
    updateControls();
    return;
  }
  state.requestId = record.requestId;
  state.status = record.status;
  setChip(chipFor(record.status), record.status);
  updateControls();
  if (record.status === "paused" && approvals.length) {
    startTurn(label);
    for (const ask of approvals) showApproval(ask);
    const wait = noteLine("the last request waits for your approval: approve, edit or reject the call above", "pause");
    wait.dataset.testid = "approval-wait";
    setChip("paused", "paused");
    updateControls();
  } else if (record.status === "paused") {
    startTurn(label);
    noteLine("the last request is paused; press Resume to continue", "pause");
  } else if (live) {
    if (cut >= 0) addUserMessage(contentText(messages[cut].content));
    startTurn(label);
    setChip("running", "running");
    const outcome = await readStream((signal) => followStream(state.requestId, 0, signal));
    if (!outcome.ended && !outcome.refusal) await reconnect();
    refreshThreads();
    showCheckpoints();
  }
}
