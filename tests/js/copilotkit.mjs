// @copilotkit/runtime in-process: a CopilotRuntime (v2) with two agents for one protocol, its
// LangGraphAgent pointed at phasegraph's LangGraph API and an AG-UI HttpAgent pointed at /ag-ui/...,
// served by the runtime's own fetch handler. Each is driven as CopilotKit's frontend drives it: an AG-UI
// HttpAgent posting to the runtime's /agent/{name}/run (its fetch calls the handler directly, no socket),
// two turns each.
// Usage: node copilotkit.mjs URL [PROTOCOL ...]   (prints one JSON report; see lib.mjs)
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";
import { LangGraphAgent } from "@copilotkit/runtime/langgraph";
import { CopilotRuntime, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";

import { FIRST, PROTOCOLS, SECOND, brief, done, step, url } from "./lib.mjs";

const agents = {};
for (const protocol of PROTOCOLS) {
  agents[`langgraph-${protocol}`] = new LangGraphAgent({ deploymentUrl: url, graphId: protocol });
  agents[`ag-ui-${protocol}`] = new HttpAgent({ url: `${url}/ag-ui/${protocol}` });
}
const runtime = new CopilotRuntime({ agents });
const handler = createCopilotRuntimeHandler({ runtime, basePath: "/api/copilotkit", activateChannels: false });
const inProcess = (input, init) => handler(new Request(input, init));

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

for (const name of Object.keys(agents)) {
  const frontend = new HttpAgent({
    url: `http://copilotkit.invalid/api/copilotkit/agent/${name}/run`,
    threadId: randomUUID(),
    fetch: inProcess,
  });
  const protocol = name.replace(/^(langgraph|ag-ui)-/, "");
  await step(`${name}.turn1`, () => turn(frontend, FIRST[protocol]));
  await step(`${name}.turn2`, () => turn(frontend, SECOND));
}
done();
