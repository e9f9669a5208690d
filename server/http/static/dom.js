// @ts-check
// Element lookups and a tiny element factory shared by the other modules.
// Module scripts run after the document is parsed, so the lookups below find their elements.

const $ = (id) => document.getElementById(id);

// Each lookup is typed as the kind of element index.html gives that id, so a module reads an input's
// .value or a button's .disabled with the checker's knowledge.
export const els = {
  protocol: /** @type {HTMLSelectElement} */ ($("protocol")),
  protocolSummary: $("protocol-summary"),
  // one fieldset per protocol that has some
  protocolSettings: [.../** @type {NodeListOf<HTMLFieldSetElement>} */ (document.querySelectorAll(".protocol-settings"))],
  projectId: /** @type {HTMLInputElement} */ ($("project-id")),
  token: /** @type {HTMLInputElement} */ ($("token")),
  showToolOutputs: /** @type {HTMLInputElement} */ ($("show-tool-outputs")),
  status: $("status"),
  requestInfo: /** @type {HTMLButtonElement} */ ($("request-info")),
  chat: $("chat"),
  composer: /** @type {HTMLFormElement} */ ($("composer")),
  message: /** @type {HTMLTextAreaElement} */ ($("message")),
  send: /** @type {HTMLButtonElement} */ ($("send")),
  pause: /** @type {HTMLButtonElement} */ ($("pause")),
  resume: /** @type {HTMLButtonElement} */ ($("resume")),
  cancel: /** @type {HTMLButtonElement} */ ($("cancel")),
  traceButton: /** @type {HTMLButtonElement} */ ($("trace-button")),
  trace: $("trace"),
  traceRequest: $("trace-request"),
  checkpointsButton: /** @type {HTMLButtonElement} */ ($("checkpoints-button")),
  checkpoints: $("checkpoints"),
  checkpointsThread: $("checkpoints-thread"),
  threads: $("threads"),
  threadSearch: /** @type {HTMLInputElement} */ ($("thread-search")),
  newThread: /** @type {HTMLButtonElement} */ ($("new-thread")),
  threadsNotice: $("threads-notice"),
};

/**
 * A new element; text goes in as textContent, never as HTML.
 * @template {keyof HTMLElementTagNameMap} Tag
 * @param {Tag} tag
 * @param {string} [className]
 * @param {string} [text]
 * @returns {HTMLElementTagNameMap[Tag]}
 */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** ``node``, a box that may scroll, reachable by Tab: a keyboard scrolls it once focused. */
export function scroller(node) {
  node.tabIndex = 0;
  return node;
}
