// CopilotKit's runtime (examples/copilotkit-runtime.mjs, started by the test on its own port, pointed at
// `phasegraph serve`) driven as CopilotKit's frontend drives it: an AG-UI HttpAgent posting to the
// runtime's /agent/{name}/run, two turns on one thread, for each protocol through the runtime's
// LangGraphAgent (agent "<protocol>") and its AG-UI HttpAgent (agent "<protocol>-ag-ui").
// Usage: node copilotkit.mjs RUNTIME_URL [PROTOCOL ...]   (prints one JSON report; see lib.mjs)
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

import { FIRST, PROTOCOLS, SECOND, brief, done, step, url } from "./lib.mjs";

/** One turn through the runtime, as the frontend's agent sees it. */
async function turn(agent, content) {
  agent.addMessage({ id: randomUUID(), role: "user", content });
  const seen = { types: [], texts: [], tool_calls: [], outcome: null, errors: [] };
  await agent.runAgent({}, {
    onEvent({ event }) {
      if (seen.types.at(-1) !== event.type) seen.types.push(event.type);
    },
    onTextMessageEndEvent({ textMessageBuffer }) {
      seen.texts.push(textMessageBuffer.slice(0, 300));
    },
    onToolCallEndEvent({ toolCallName }) {
      seen.tool_calls.push(toolCallName);
    },
    onRunFinishedEvent({ outcome }) {
      seen.outcome = outcome;
    },
    onRunErrorEvent({ event }) {
      seen.errors.push({ code: event.code ?? null, message: event.message });
    },
  });
  return { ...seen, messages: agent.messages.map(brief) };
}

for (const protocol of PROTOCOLS) {
  for (const name of [protocol, `${protocol}-ag-ui`]) {
    const frontend = new HttpAgent({ url: `${url}/agent/${name}/run`, threadId: randomUUID() });
    await step(`${name}.turn1`, () => turn(frontend, FIRST[protocol]));
    await step(`${name}.turn2`, () => turn(frontend, SECOND));
  }
}
done();
