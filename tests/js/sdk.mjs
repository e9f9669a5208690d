// @langchain/langgraph-sdk's JS Client against `phasegraph serve`: every call a LangGraph client or Studio
// makes, two turns on one thread for each protocol.
// Usage: node sdk.mjs URL [PROTOCOL ...]   (prints one JSON report; see lib.mjs)
import { Client } from "@langchain/langgraph-sdk";

import { FIRST, PROTOCOLS, SECOND, brief, deadline, done, step, url } from "./lib.mjs";

// No retries: a refused call shows as it is, at once.
const client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
const TAG = `js-${Date.now()}`; // this run's threads, for threads.search
const MODES = ["values", "messages", "custom"];

/** Read a stream to its end: how many chunks of each event, what the client would render. */
async function drain(stream) {
  const seen = { counts: {}, order: [], custom: [], complete: [], errors: [] };
  const partial = new Map(); // message id -> its text as the last partial chunk showed it
  let values = null;
  for await (const chunk of stream) {
    seen.counts[chunk.event] = (seen.counts[chunk.event] ?? 0) + 1;
    if (seen.order.at(-1) !== chunk.event) seen.order.push(chunk.event);
    if (chunk.event === "values") values = chunk.data;
    if (chunk.event === "custom" && chunk.data?.phasegraph_event) seen.custom.push(chunk.data.phasegraph_event.type);
    if (chunk.event === "messages/partial") for (const m of chunk.data) partial.set(m.id, brief(m).text);
    if (chunk.event === "messages/complete") seen.complete.push(...chunk.data.map(brief));
    if (chunk.event === "error") seen.errors.push(chunk.data);
  }
  seen.partial = [...partial.values()];
  seen.custom = seen.custom.filter((type, i) => type !== seen.custom[i - 1]);
  seen.messages = (values?.messages ?? []).map(brief);
  seen.answer = values?.answer ?? null;
  return seen;
}

function ask(content) {
  return { messages: [{ role: "user", content }] };
}

async function conversation(protocol) {
  const thread = await step(`${protocol}.threads.create`, () =>
    client.threads.create({ metadata: { suite: TAG, protocol } }),
  );
  if (!thread) return null;
  const id = thread.thread_id;
  for (const [turn, message] of [["turn1", FIRST[protocol]], ["turn2", SECOND]]) {
    await step(`${protocol}.runs.stream.${turn}`, () =>
      drain(client.runs.stream(id, protocol, { input: ask(message), streamMode: MODES, signal: deadline(120_000) })),
    );
  }
  await step(`${protocol}.threads.getState`, async () => {
    const state = await client.threads.getState(id);
    return { next: state.next, checkpoint_id: state.checkpoint?.checkpoint_id, messages: state.values.messages.map(brief) };
  });
  await step(`${protocol}.threads.getHistory`, async () => {
    const history = await client.threads.getHistory(id, { limit: 5 });
    return { count: history.length, messages: history.map((state) => state.values?.messages?.length ?? 0) };
  });
  await step(`${protocol}.assistants.getSubgraphs`, async () => Object.keys(await client.assistants.getSubgraphs(protocol)));
  return id;
}

/** The calls a thread list and Studio's state editor make, on the triggered_phase thread. */
async function threadCalls(id) {
  await step("threads.search.sorted", async () => {
    const query = { metadata: { suite: TAG }, limit: 20, select: ["thread_id", "created_at", "metadata"] };
    const asc = await client.threads.search({ ...query, sortBy: "created_at", sortOrder: "asc" });
    const desc = await client.threads.search({ ...query, sortBy: "created_at", sortOrder: "desc" });
    return {
      asc: asc.map((t) => t.metadata?.protocol ?? null),
      desc: desc.map((t) => t.metadata?.protocol ?? null),
      keys: [...new Set(asc.flatMap((t) => Object.keys(t)))].sort(),
    };
  });
  await step("threads.update", async () => {
    await client.threads.update(id, { metadata: { title: "Roadmap chat" } });
    const thread = await client.threads.get(id);
    return { title: thread.metadata?.title ?? null, suite: thread.metadata?.suite ?? null };
  });
  await step("threads.updateState", async () => {
    // What Studio's editor does: change the last AI message's text, keeping its id.
    const before = await client.threads.getState(id);
    const last = before.values.messages.findLast((m) => m.type === "ai");
    const edited = { ...last, content: "An edited answer." };
    const written = await client.threads.updateState(id, { values: { messages: [edited] } });
    const after = await client.threads.getState(id);
    return {
      written_checkpoint: written?.checkpoint?.checkpoint_id ?? null,
      before: { checkpoint_id: before.checkpoint?.checkpoint_id, count: before.values.messages.length },
      after: {
        checkpoint_id: after.checkpoint?.checkpoint_id,
        count: after.values.messages.length,
        last_ai: brief(after.values.messages.findLast((m) => m.type === "ai")).text,
      },
    };
  });
  await step("threads.copy", async () => {
    const copy = await client.threads.copy(id);
    const [original, copied] = await Promise.all([client.threads.getState(id), client.threads.getState(copy.thread_id)]);
    return {
      thread_id: copy.thread_id,
      same_id: copy.thread_id === id,
      original: original.values.messages.map(brief).map((m) => m.text),
      copied: copied.values.messages.map(brief).map((m) => m.text),
    };
  });
}

/** A background run joined with several stream modes, and a stateless wait that leaves no thread behind. */
async function runCalls() {
  await step("runs.joinStream", async () => {
    const thread = await client.threads.create({ metadata: { suite: `${TAG}-join` } });
    const run = await client.runs.create(thread.thread_id, "triggered_phase", {
      input: ask(FIRST.triggered_phase),
      streamMode: MODES,
    });
    return drain(
      client.runs.joinStream(thread.thread_id, run.run_id, { streamMode: ["values", "custom"], signal: deadline(120_000) }),
    );
  });
  await step("runs.wait.stateless", async () => {
    const before = new Set((await client.threads.search({ limit: 1000 })).map((t) => t.thread_id));
    let created = null;
    const output = await client.runs.wait(null, "triggered_phase", {
      input: ask(FIRST.triggered_phase),
      onRunCreated: (meta) => { created = meta; },
    });
    const after = (await client.threads.search({ limit: 1000 })).map((t) => t.thread_id);
    return {
      answer: output?.answer ?? null,
      messages: (output?.messages ?? []).length,
      run: created,
      new_threads: after.filter((tid) => !before.has(tid)),
    };
  });
}

await step("assistants.search", async () => (await client.assistants.search({ limit: 50 })).map((a) => a.assistant_id));
const threads = {};
for (const protocol of PROTOCOLS) threads[protocol] = await conversation(protocol);
const first = threads.triggered_phase ?? Object.values(threads).find(Boolean);
if (first) await threadCalls(first);
await runCalls();
done();
