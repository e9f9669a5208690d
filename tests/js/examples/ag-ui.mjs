// Two runs of one AG-UI agent: the second message goes after the first answer, on the same thread.
import { HttpAgent } from "@ag-ui/client";

const url = process.env.PHASEGRAPH_URL ?? "http://127.0.0.1:8000";
const agent = new HttpAgent({ url: `${url}/ag-ui/triggered_phase` });
const show = {
  onTextMessageContentEvent: ({ event }) => process.stdout.write(event.delta),
  onTextMessageEndEvent: () => console.log(),
  onToolCallEndEvent: ({ toolCallName, toolCallArgs }) => console.log(`${toolCallName}(${JSON.stringify(toolCallArgs)})`),
};
for (const content of ["Summarise the roadmap in the docs folder.", "Who is on the team?"]) {
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content });
  await agent.runAgent({}, show);
  // A run paused (POST /api/requests/{runId}/pause) or asking a question ends with the "interrupt"
  // outcome; the next run answers it, and the request goes on from where it stopped:
  while (agent.pendingInterrupts.length > 0) {
    const resume = agent.pendingInterrupts.map((interrupt) => ({ interruptId: interrupt.id, status: "resolved" }));
    await agent.runAgent({ resume }, show);
  }
}
console.log(agent.messages.map((message) => message.role).join(" "));
