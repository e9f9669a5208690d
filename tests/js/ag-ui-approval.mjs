// @ag-ui/client's HttpAgent answering a tool call's approval: a triggered_phase run whose model calls
// archive_everything (confirm = true in the project file) finishes with the interrupt outcome; the next
// runAgent carries resume [{interruptId, status, payload}] that approves, edits or rejects the call.
// Usage: node ag-ui-approval.mjs URL   (prints one JSON report; see lib.mjs)
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

import { brief, done, step, url } from "./lib.mjs";

export const ASK = "Archive everything, please.";

/** What a chat UI sees of one run: event types, tool calls and results, how it finished. */
async function run(agent, parameters = {}) {
  const seen = { types: [], tool_calls: [], tool_results: [], custom: [], outcome: null, interrupts: [], errors: [] };
  await agent.runAgent(parameters, {
    onEvent({ event }) {
      if (seen.types.at(-1) !== event.type) seen.types.push(event.type);
    },
    onRunStartedEvent({ event }) {
      seen.run_id = event.runId;
    },
    onToolCallEndEvent({ toolCallName, toolCallArgs }) {
      seen.tool_calls.push({ name: toolCallName, args: toolCallArgs });
    },
    onToolCallResultEvent({ event }) {
      seen.tool_results.push(JSON.parse(event.content));
    },
    onCustomEvent({ event }) {
      seen.custom.push({ name: event.name, value: event.value });
    },
    onRunFinishedEvent(params) {
      seen.outcome = params.outcome;
      if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
    },
    onRunErrorEvent({ event }) {
      seen.errors.push({ code: event.code ?? null, message: event.message });
    },
  });
  return { ...seen, messages: agent.messages.map(brief), pending: agent.pendingInterrupts.map((i) => i.id) };
}

const ANSWERS = {
  approve: "approve",
  edit: { decision: "edit", args: { reason: "only the old drafts" } },
  reject: { decision: "reject", reason: "keep everything" },
};

for (const [name, payload] of Object.entries(ANSWERS)) {
  const agent = new HttpAgent({ url: `${url}/ag-ui/triggered_phase`, threadId: `agui-approval-${name}-${randomUUID()}` });
  agent.addMessage({ id: randomUUID(), role: "user", content: ASK });
  const asked = await step(`${name}.asked`, () => run(agent));
  const interrupts = asked?.interrupts ?? [];
  await step(`${name}.answered`, () =>
    run(agent, { resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload })) }),
  );
}
done();
