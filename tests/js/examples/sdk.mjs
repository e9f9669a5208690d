// Two turns on one thread through phasegraph's LangGraph API, each answer streamed as it is written.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.PHASEGRAPH_URL ?? "http://127.0.0.1:8000" });
const thread = await client.threads.create();
for (const content of ["Summarise the roadmap in the docs folder.", "Who is on the team?"]) {
  const stream = client.runs.stream(thread.thread_id, "triggered_phase", {
    input: { messages: [{ role: "user", content }] },
    streamMode: ["messages", "custom"], // custom: phasegraph's own events
  });
  for await (const { event, data } of stream) {
    if (event === "messages/partial") process.stdout.write("."); // the reply so far, each time it grows
    const phasegraph = event === "custom" ? data.phasegraph_event : null;
    if (phasegraph?.type === "final") console.log(`\n${phasegraph.answer}`);
  }
}
// The thread as a chat UI renders it: user messages, AI messages (with tool_calls), tool messages.
const { values } = await client.threads.getState(thread.thread_id);
for (const message of values.messages) {
  const calls = (message.tool_calls ?? []).map((call) => `${call.name}(${JSON.stringify(call.args)})`);
  const text = message.type === "tool" ? `${message.name} ${message.status}` : message.content;
  console.log(`${message.type}: ${[text, ...calls].join(" ")}`);
}
