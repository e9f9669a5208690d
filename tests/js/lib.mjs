// Shared by the client scripts: each call is a named step whose outcome (a value, or the HTTP status and
// body of the failure) lands in one JSON report on stdout, so pytest can assert on every call separately
// and a failing call never hides the ones after it.

export const url = process.argv[2] ?? process.env.PHASEGRAPH_URL ?? "http://127.0.0.1:8000";
/** Protocols named after the URL, else all six. */
export const PROTOCOLS = process.argv.length > 3
  ? process.argv.slice(3)
  : ["triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner"];

/** The first message of each protocol's bundled demo script, and a follow-up for turn 2. */
export const FIRST = {
  triggered_phase: "Summarise the roadmap in the docs folder.",
  unified: "Summarise the roadmap in the docs folder.",
  goal_pursuit:
    "The Grey Fox found her compass at the lighthouse in chapter 3: give it back to her and note it in that chapter.",
  agent_network: "Who works on the streaming server, and which roadmap milestone covers streaming?",
  xml_contract: "Summarise the roadmap and say who is on the team.",
  planner: "Set up a project for our spring launch",
};
export const SECOND = "Thanks. Anything else I should know?";

const report = { url, steps: {} };

/** Run one call; record {ok, value} or {ok: false, status, error}; return the value or undefined. */
export async function step(name, fn) {
  const started = Date.now();
  try {
    const value = await fn();
    report.steps[name] = { ok: true, ms: Date.now() - started, value: value ?? null };
    return value;
  } catch (error) {
    report.steps[name] = { ok: false, ms: Date.now() - started, ...describe(error) };
    return undefined;
  }
}

/** Status and body of an HTTP failure as the clients raise it ("HTTP 422: {...}" and friends). */
export function describe(error) {
  const message = String(error?.message ?? error);
  const status = error?.status ?? error?.statusCode ?? Number(message.match(/\b(?:HTTP |status:? )(\d{3})\b/i)?.[1]);
  return { status: Number.isFinite(status) ? status : null, error: message.slice(0, 2000) };
}

/** Print the report; the exit code stays 0 so pytest reads every step. */
export function done() {
  process.stdout.write(JSON.stringify(report) + "\n");
}

/** A state message as a chat UI sees it: type, text, tool calls, tool name/status. */
export function brief(message) {
  const text = typeof message.content === "string"
    ? message.content
    : (message.content ?? []).map((part) => part.text ?? "").join("");
  return {
    type: message.type ?? message.role,
    id: message.id ?? null,
    text: text.slice(0, 300),
    tool_calls: (message.tool_calls ?? message.toolCalls ?? []).map((call) => call.name ?? call.function?.name),
    name: message.name ?? null,
    status: message.status ?? null,
  };
}

/** Abort after ms: a hung stream fails its step instead of the whole script. */
export function deadline(ms) {
  return AbortSignal.timeout(ms);
}
