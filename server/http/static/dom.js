// Element lookups and a tiny element factory shared by the other modules.
// Module scripts run after the document is parsed, so the lookups below find their elements.

const $ = (id) => document.getElementById(id);

export const els = {
  protocol: $("protocol"),
  protocolSummary: $("protocol-summary"),
  protocolSettings: [...document.querySelectorAll(".protocol-settings")], // one fieldset per protocol that has some
  projectId: $("project-id"),
  token: $("token"),
  showToolOutputs: $("show-tool-outputs"),
  status: $("status"),
  requestInfo: $("request-info"),
  chat: $("chat"),
  composer: $("composer"),
  message: $("message"),
  send: $("send"),
  pause: $("pause"),
  resume: $("resume"),
  cancel: $("cancel"),
  traceButton: $("trace-button"),
  trace: $("trace"),
  traceRequest: $("trace-request"),
  checkpointsButton: $("checkpoints-button"),
  checkpoints: $("checkpoints"),
  checkpointsThread: $("checkpoints-thread"),
  threads: $("threads"),
  threadSearch: $("thread-search"),
  newThread: $("new-thread"),
  threadsNotice: $("threads-notice"),
};

/** A new element; text goes in as textContent, never as HTML. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
