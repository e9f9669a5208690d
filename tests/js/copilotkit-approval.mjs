// CopilotKit's runtime (examples/copilotkit-runtime.mjs, pointed at a server whose model calls
// archive_everything, which waits for approval) answering that approval through both adapters, as
// CopilotKit's frontend does: the LangGraphAgent ("triggered_phase") ends the run with its on_interrupt
// event (or the interrupt outcome) and is answered with forwardedProps.command.resume, which it sends to
// the LangGraph API beside its state as input; the AG-UI HttpAgent ("triggered_phase-ag-ui") ends with the
// interrupt outcome and is answered with AG-UI's resume.
// Usage: node copilotkit-approval.mjs RUNTIME_URL   (prints one JSON report; see lib.mjs)
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

import { brief, done, step, url } from "./lib.mjs";

const ASK = "Archive everything, please.";
const ANSWERS = {
  approve: "approve",
  edit: { decision: "edit", args: { reason: "only the old drafts" } },
  reject: { decision: "reject", reason: "keep everything" },
};

/** One run through the runtime: how it finished, the interrupts it asked, the tool results it showed. */
async function run(agent, parameters = {}) {
  const seen = { outcome: null, interrupts: [], on_interrupt: [], tool_results: [], errors: [] };
  await agent.runAgent(parameters, {
    onCustomEvent({ event }) {
      if (event.name === "on_interrupt") seen.on_interrupt.push(JSON.parse(event.value));
    },
    onToolCallResultEvent({ event }) {
      seen.tool_results.push(event.content);
    },
    onRunFinishedEvent(params) {
      seen.outcome = params.outcome ?? null;
      if (params.outcome?.type === "interrupt" || params.outcome === "interrupt") {
        seen.interrupts = params.interrupts ?? params.outcome.interrupts ?? [];
      }
    },
    onRunErrorEvent({ event }) {
      seen.errors.push({ code: event.code ?? null, message: event.message });
    },
  });
  return { ...seen, thread_id: agent.threadId, messages: agent.messages.map(brief) };
}

for (const name of ["triggered_phase", "triggered_phase-ag-ui"]) {
  for (const [answer, payload] of Object.entries(ANSWERS)) {
    const agent = new HttpAgent({ url: `${url}/agent/${name}/run`, threadId: randomUUID() });
    agent.addMessage({ id: randomUUID(), role: "user", content: ASK });
    const asked = await step(`${name}.${answer}.asked`, () => run(agent));
    const interrupts = asked?.interrupts ?? [];
    const resume = interrupts.length
      ? { resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload })) }
      : { forwardedProps: { command: { resume: payload } } }; // CopilotKit's useLangGraphInterrupt
    await step(`${name}.${answer}.answered`, () => run(agent, resume));
  }
}
done();
