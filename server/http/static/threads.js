// @ts-check
// The thread list: a project's conversations, through the server's LangGraph API (the project goes in
// the X-Phasegraph-Project header). A thread is made at its first Send with its protocol and a title in
// its metadata; rename is PATCH /threads/{id} with {"metadata": {"title"}}, delete is DELETE /threads/{id}.

import { api, enc } from "./api.js";
import { el, els } from "./dom.js";
import { contentText } from "./history.js";

// How many threads the list shows (the newest first).
const LIST_LIMIT = 100;
const TITLE_CHARS = 60;
// A delete asks for a second click within this time.
const CONFIRM_MS = 4000;

/** The project's threads, newest first; ``metadata`` keeps those whose metadata has these values. */
export const listThreads = (metadata = {}, limit = LIST_LIMIT) => api("POST", "/threads/search", { limit, metadata });
// Words are matched here, in the page: they look through this many of the newest threads.
export const SEARCH_LIMIT = 1000;

/**
 * What a search box says: ``key=value`` words filter on the threads' metadata (on the server, exact
 * values; ``true``/``false``/numbers as JSON), the other words must all be in a thread's title or id.
 */
export function parseSearch(text) {
  const metadata = {};
  const words = [];
  for (const word of text.trim().split(/\s+/).filter(Boolean)) {
    const at = word.indexOf("=");
    if (at > 0) {
      // true, false, null and plain numbers as JSON ("007" stays text); anything else as text
      const raw = word.slice(at + 1);
      const json = /^(true|false|null|-?(0|[1-9]\d*)(\.\d+)?)$/.test(raw);
      metadata[word.slice(0, at)] = json ? JSON.parse(raw) : raw;
    } else words.push(word.toLowerCase());
  }
  return { metadata, words };
}

/** Whether a thread's title (or id) holds every word. */
export function matches(thread, words) {
  const text = `${titleOf(thread)} ${thread.thread_id}`.toLowerCase();
  return words.every((word) => text.includes(word));
}
export const getThread = (threadId) => api("GET", `/threads/${enc(threadId)}`);
export const threadState = (threadId) => api("GET", `/threads/${enc(threadId)}/state`);
export const deleteThread = (threadId) => api("DELETE", `/threads/${enc(threadId)}`);
export const renameThread = (threadId, title) =>
  api("PATCH", `/threads/${enc(threadId)}`, { metadata: { title } });

/** The thread's newest run (its request), or null before its first. */
export async function latestRun(threadId) {
  const runs = await api("GET", `/threads/${enc(threadId)}/runs?limit=1`);
  return runs && runs.length ? runs[0] : null;
}

/** A title from the first message: one line, cut to TITLE_CHARS. */
export function titleFrom(message) {
  const line = message.replace(/\s+/g, " ").trim();
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line;
}

/** Record a new thread of ``protocol`` (graph_id/assistant_id, as the LangGraph API's runs name it). */
export function createThread(threadId, protocol, title) {
  const metadata = { graph_id: protocol, assistant_id: protocol, title };
  return api("POST", "/threads", { thread_id: threadId, metadata, if_exists: "raise" });
}

/** The thread's protocol, from its metadata (null when no run or client named one). */
export function protocolOf(thread) {
  const meta = (thread && thread.metadata) || {};
  return meta.graph_id || meta.assistant_id || null;
}

/** What the list calls a thread: its title, else its first user message, else its id. */
export function titleOf(thread) {
  const title = thread.metadata && thread.metadata.title;
  if (typeof title === "string" && title.trim()) return title.trim();
  const messages = (thread.values && thread.values.messages) || [];
  const first = messages.find((m) => m && (m.type === "human" || m.role === "user"));
  const text = first ? contentText(first.content) : "";
  return text.trim() ? titleFrom(text) : `thread ${thread.thread_id.slice(0, 8)}`;
}

function iconButton(className, text, label, onClick) {
  const button = el("button", `thread-action ${className}`, text);
  button.type = "button";
  button.title = label;
  button.setAttribute("aria-label", label);
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    onClick(button);
  });
  return button;
}

/** Swap the title for an input: Enter (or leaving it) saves, Escape cancels. */
function editTitle(item, thread, onRename) {
  const name = item.querySelector(".thread-title");
  const input = el("input", "thread-title-input");
  input.type = "text";
  input.value = titleOf(thread);
  input.dataset.testid = "thread-title-input";
  input.setAttribute("aria-label", "thread title");
  let done = false;
  const finish = (save) => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    input.replaceWith(name);
    if (save && title && title !== titleOf(thread)) onRename(thread.thread_id, title);
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      finish(true);
    } else if (event.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
  input.addEventListener("click", (event) => event.stopPropagation());
  name.replaceWith(input);
  input.focus();
  input.select();
}

/** The first click arms the button; a second one within CONFIRM_MS deletes. */
function confirmDelete(button, threadId, onDelete) {
  if (button.dataset.armed === "true") {
    onDelete(threadId);
    return;
  }
  button.dataset.armed = "true";
  button.textContent = "Delete?";
  setTimeout(() => {
    if (!button.isConnected) return;
    button.dataset.armed = "false";
    button.textContent = "✕";
  }, CONFIRM_MS);
}

function threadItem(thread, openId, on) {
  const item = el("li", "thread-item");
  item.dataset.testid = "thread-item";
  item.dataset.threadId = thread.thread_id;
  item.dataset.status = thread.status || "";
  if (thread.thread_id === openId) {
    item.classList.add("open");
    item.setAttribute("aria-current", "true");
  }
  const main = el("button", "thread-open");
  main.type = "button";
  main.title = `${thread.thread_id}${thread.created_at ? `\n${thread.created_at}` : ""}`;
  // Its protocol, and how it stands unless idle (busy, interrupted, error).
  const meta = [protocolOf(thread) || "no run yet", thread.status !== "idle" && thread.status];
  main.append(
    el("span", "thread-title", titleOf(thread)),
    el("span", "thread-meta", meta.filter(Boolean).join(" · ")),
  );
  main.addEventListener("click", () => on.open(thread.thread_id));
  const rename = iconButton("thread-rename", "✎", "Rename", () => editTitle(item, thread, on.rename));
  rename.dataset.testid = "thread-rename";
  const remove = iconButton("thread-delete danger", "✕", "Delete", (button) =>
    confirmDelete(button, thread.thread_id, on.remove),
  );
  remove.dataset.testid = "thread-delete";
  item.append(main, rename, remove);
  return item;
}

/** Draw the list; ``on`` = {open(id), rename(id, title), remove(id)}; ``searched``: a search made it. */
export function drawThreads(threads, openId, on, searched = false) {
  if (!threads.length) {
    const empty = searched ? "No thread of this project matches the search." : "No threads in this project yet.";
    els.threads.replaceChildren(el("li", "hint", empty));
    return;
  }
  els.threads.replaceChildren(...threads.map((thread) => threadItem(thread, openId, on)));
}

/** Say why the list could not be drawn. */
export function threadsFailed(message) {
  els.threads.replaceChildren(el("li", "note error", `threads failed: ${message}`));
}

/** Mark the open thread in the list (without asking the server again). */
export function markOpen(openId) {
  for (const item of /** @type {NodeListOf<HTMLElement>} */ (els.threads.querySelectorAll(".thread-item"))) {
    const open = item.dataset.threadId === openId;
    item.classList.toggle("open", open);
    if (open) item.setAttribute("aria-current", "true");
    else item.removeAttribute("aria-current");
  }
}
