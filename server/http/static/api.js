// @ts-check
// Talking to the server: JSON calls with the optional bearer token, readable error messages,
// and Server-Sent Event streams read from a POST response (EventSource can only GET).

let readToken = () => "";
let readProject = () => "";

/** Tell the helpers where the bearer token comes from (the token field). */
export function useToken(source) {
  readToken = source;
}

/** Tell the helpers which project the current request belongs to (ids are per project). */
export function useProject(source) {
  readProject = source;
}

/** A native request or thread route names its project, so the same id in another project is never meant. */
function scoped(path) {
  const project = readProject();
  if (!project || !/^\/api\/(requests|threads)\//.test(path)) return path;
  return `${path}${path.includes("?") ? "&" : "?"}projectId=${encodeURIComponent(project)}`;
}

export class HttpError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// The LangGraph API's routes (/threads/..., /assistants/...) take the project from a header instead.
const PROJECT_HEADER = "X-Phasegraph-Project";
const langgraphApi = (path) => /^\/(threads|assistants|runs)(\/|$)/.test(path);

function headers(json, path) {
  const result = {};
  if (json) result["Content-Type"] = "application/json";
  const token = readToken();
  if (token) result.Authorization = `Bearer ${token}`;
  const project = readProject();
  if (project && path && langgraphApi(path)) result[PROJECT_HEADER] = project;
  return result;
}

/** FastAPI's validation errors are a list of {loc, msg}: make them one line. */
function formatDetail(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item) => {
        const where = (item.loc || []).filter((part) => part !== "body").join(".");
        return where ? `${where}: ${item.msg}` : item.msg;
      })
      .join("; ");
  }
  return JSON.stringify(detail);
}

function messageOf(body, text, response) {
  if (body && typeof body.message === "string") return body.message;
  if (body && body.detail !== undefined) return formatDetail(body.detail);
  return text.trim() || `${response.status} ${response.statusText}`;
}

/**
 * A failed response as {status, message, body}: the message from {"error","message"}, FastAPI's
 * {"detail"} or the raw text; body is the parsed JSON (or null) for callers that need more fields.
 */
export async function readError(response) {
  let text = "";
  try {
    text = await response.text();
  } catch (_) {
    /* the body is gone: fall back to the status line */
  }
  let body = null;
  try {
    body = JSON.parse(text);
  } catch (_) {
    /* not JSON */
  }
  return { status: response.status, message: messageOf(body, text, response), body };
}

/** A JSON call answering {body, next}: next is the URL its Link header names as rel="next" (or null). */
export async function apiPage(method, path, body) {
  const response = await fetch(scoped(path), {
    method,
    headers: headers(body !== undefined, path),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await readError(response);
    throw new HttpError(error.status, error.message, error.body);
  }
  const text = await response.text();
  const link = /<([^>]*)>\s*;\s*rel="next"/.exec(response.headers.get("Link") || "");
  return { body: text ? JSON.parse(text) : null, next: link ? link[1] : null };
}

/** A JSON call; throws HttpError with the server's message when the answer is not 2xx. */
export async function api(method, path, body) {
  return (await apiPage(method, path, body)).body;
}

export function enc(value) {
  return encodeURIComponent(value);
}

/** A v4 UUID for a new request id. */
export function newId() {
  if (window.crypto && typeof window.crypto.randomUUID === "function") return window.crypto.randomUUID();
  // randomUUID needs a secure context; getRandomValues does not.
  const bytes = window.crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// ---------------------------------------------------------------- SSE

/** POST a JSON body to an SSE route; the caller checks response.ok. */
export function postStream(path, body, signal) {
  return fetch(scoped(path), {
    method: "POST",
    headers: { ...headers(true, path), Accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
}

/** Follow a request's stored and live events after ``afterSeq`` (a reconnect); the caller checks response.ok. */
export function followStream(requestId, afterSeq, signal) {
  const extra = afterSeq ? { "Last-Event-ID": String(afterSeq) } : {};
  return fetch(scoped(`/api/requests/${enc(requestId)}/stream`), {
    headers: { ...headers(false), ...extra, Accept: "text/event-stream" },
    signal,
  });
}

/** Collects the fields of one SSE frame; takeLine returns the frame when a blank line ends it. */
function frameCollector() {
  let frame = { event: "", id: "", data: [] };
  return function takeLine(line) {
    if (line === "") {
      const done = frame.data.length ? { event: frame.event, id: frame.id, data: frame.data.join("\n") } : null;
      frame = { event: "", id: "", data: [] };
      return done;
    }
    if (line.startsWith(":")) return null; // keep-alive comment
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") frame.data.push(value);
    else if (name === "event") frame.event = value;
    else if (name === "id") frame.id = value;
    return null;
  };
}

/** Split off the complete lines at the start of buffer: [lines, rest]. */
function completeLines(buffer, done) {
  const lines = [];
  for (;;) {
    const at = buffer.search(/\r\n|\r|\n/);
    if (at < 0) break;
    // A lone "\r" at the very end may be the first half of "\r\n": wait for more.
    if (!done && buffer[at] === "\r" && at === buffer.length - 1) break;
    const width = buffer[at] === "\r" && buffer[at + 1] === "\n" ? 2 : 1;
    lines.push(buffer.slice(0, at));
    buffer = buffer.slice(at + width);
  }
  return [lines, buffer];
}

/** Parse a text/event-stream body into frames {event, id, data}; comment lines are skipped. */
export async function* sseFrames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const takeLine = frameCollector();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const [lines, rest] = completeLines(buffer, done);
      buffer = rest;
      for (const line of lines) {
        const frame = takeLine(line);
        if (frame) yield frame;
      }
      if (done) {
        if (buffer) takeLine(buffer); // a last line without its newline
        const last = takeLine("");
        if (last) yield last;
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** The events of an SSE response; frames whose data is not JSON are skipped. */
export async function* streamEvents(response) {
  for await (const frame of sseFrames(response.body)) {
    let event;
    try {
      event = JSON.parse(frame.data);
    } catch (_) {
      continue;
    }
    if (!event.type && frame.event) event.type = frame.event;
    yield event;
  }
}
