// @langchain/langgraph-sdk's double-texting: a second run sent while the thread's first one streams, with
// multitaskStrategy "interrupt" and "rollback", then a run cancelled with action "rollback".
// Usage: node multitask.mjs URL LONG_MODEL QUICK_MODEL   (prints one JSON report; see lib.mjs)
// The server takes the token of tests/server/test_langgraph_api.py (PHASEGRAPH_TOKEN).
import { Client } from "@langchain/langgraph-sdk";

import { done, step, url } from "./lib.mjs";

const [long, quick] = process.argv.slice(3);
const client = new Client({ apiUrl: url, defaultHeaders: { Authorization: `Bearer ${process.env.PHASEGRAPH_TOKEN}` } });
const ask = (content) => ({ messages: [{ type: "human", content }] });

/** A run that streams for about 20 s, once its model streams. */
async function longRun(threadId) {
  const run = await client.runs.create(threadId, "triggered_phase", { input: ask("A long one."), context: { model: long } });
  for await (const part of client.runs.joinStream(threadId, run.run_id, { streamMode: ["messages-tuple"] })) {
    if (part.event === "messages" && part.data[0]?.content) return run.run_id;
  }
  throw new Error("the long run ended before its model streamed");
}

/** The runs, statuses and human messages of a thread, after a second run of ``strategy``. */
async function doubleText(strategy) {
  const { thread_id: threadId } = await client.threads.create();
  const first = await longRun(threadId);
  const second = await client.runs.wait(threadId, "triggered_phase", {
    input: ask("Second."), context: { model: quick }, multitaskStrategy: strategy,
  });
  const runs = await client.runs.list(threadId);
  const state = await client.threads.getState(threadId);
  const history = await client.threads.getHistory(threadId, { limit: 1000 });
  return {
    answer: second.answer,
    runs: runs.map((r) => ({ first: r.run_id === first, status: r.status })),
    humans: state.values.messages.filter((m) => m.type === "human").map((m) => m.content),
    first_checkpoints: history.filter((s) => s.metadata?.run_id === first).length,
  };
}

await step("interrupt", () => doubleText("interrupt"));
await step("rollback", () => doubleText("rollback"));
await step("cancel_rollback", async () => {
  const { thread_id: threadId } = await client.threads.create();
  const runId = await longRun(threadId);
  await client.runs.cancel(threadId, runId, false, "rollback");
  return {
    runs: (await client.runs.list(threadId)).length,
    history: (await client.threads.getHistory(threadId)).length,
    status: (await client.threads.get(threadId)).status,
  };
});
done();
