// @ag-ui/client's HttpAgent against `phasegraph serve`: two runs on one agent per protocol (the second
// message after the first answer, as a chat UI sends it), then a run paused through the pause route and
// resumed with RunAgentInput.resume, then a follow-up on the same agent.
// Usage: node ag-ui.mjs URL [PROTOCOL ...]   (prints one JSON report; see lib.mjs)
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

import { FIRST, PROTOCOLS, SECOND, brief, done, step, url } from "./lib.mjs";

/** An HttpAgent subscriber that notes what a chat UI would see of one run. */
function recorder(onStarted) {
  const seen = { types: [], texts: [], tool_calls: [], tool_results: 0, outcome: null, interrupts: [], errors: [] };
  const subscriber = {
    onEvent({ event }) {
      if (seen.types.at(-1) !== event.type) seen.types.push(event.type);
    },
    onRunStartedEvent({ event }) {
      seen.run_id = event.runId;
      return onStarted?.(event);
    },
    onTextMessageEndEvent({ textMessageBuffer }) {
      seen.texts.push(textMessageBuffer.slice(0, 300));
    },
    onToolCallEndEvent({ toolCallName }) {
      seen.tool_calls.push(toolCallName);
    },
    onToolCallResultEvent() {
      seen.tool_results += 1;
    },
    onRunFinishedEvent(params) {
      seen.outcome = params.outcome;
      if (params.outcome === "interrupt") seen.interrupts = params.interrupts.map((i) => ({ id: i.id, reason: i.reason }));
    },
    onRunErrorEvent({ event }) {
      seen.errors.push({ code: event.code ?? null, message: event.message });
    },
  };
  return { seen, subscriber };
}

/** One runAgent call; the agent's messages and state afterwards as a chat UI holds them. */
async function run(agent, parameters = {}, onStarted) {
  const { seen, subscriber } = recorder(onStarted);
  await agent.runAgent(parameters, subscriber);
  const state = JSON.stringify(agent.state ?? {});
  return {
    ...seen,
    types: seen.types,
    messages: agent.messages.map(brief),
    state_keys: Object.keys(agent.state ?? {}).sort(),
    state_has_lc_messages: state.includes('"lc":1'),
    pending_interrupts: agent.pendingInterrupts.map((i) => i.id),
  };
}

function say(agent, content) {
  agent.addMessage({ id: randomUUID(), role: "user", content });
}

for (const protocol of PROTOCOLS) {
  const agent = new HttpAgent({ url: `${url}/ag-ui/${protocol}`, threadId: `agui-${protocol}-${randomUUID()}` });
  say(agent, FIRST[protocol]);
  await step(`${protocol}.run1`, () => run(agent));
  say(agent, SECOND);
  await step(`${protocol}.run2`, () => run(agent));
}

// Pause and resume: the run is paused through phasegraph's pause route as soon as it starts, finishes
// with the interrupt outcome; the next run answers that interrupt in `resume`, then the chat goes on.
const agent = new HttpAgent({ url: `${url}/ag-ui/triggered_phase`, threadId: `agui-pause-${randomUUID()}` });
say(agent, FIRST.triggered_phase);
await step("pause.run", () =>
  run(agent, {}, async (started) => {
    const response = await fetch(`${url}/api/requests/${started.runId}/pause`, { method: "POST" });
    if (response.status !== 202) throw new Error(`pause answered ${response.status}: ${await response.text()}`);
  }),
);
await step("pause.resume", () =>
  run(agent, { resume: agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved" })) }),
);
say(agent, SECOND);
await step("pause.followup", () => run(agent));
done();
