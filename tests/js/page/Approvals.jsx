import { useStream } from "@langchain/langgraph-sdk/react";
import { useState } from "react";

// An Agent Chat UI-style page: its interrupt card answers an approval as Agent Chat UI does, with
// `submit({}, { command: { resume } })` (so `input: {}` beside the command) and LangChain's
// human-in-the-loop decisions. ?history=1 turns on `fetchStateHistory` (as Agent Chat UI does);
// without it the page streams the modes docs/clients.md sets (values, messages-tuple, custom).
const params = new URLSearchParams(window.location.search);
const withHistory = params.get("history") === "1";
const STREAM_MODE = ["values", "messages-tuple", "custom"];

function text(message) {
  return typeof message.content === "string"
    ? message.content
    : message.content.map((part) => part.text ?? "").join("");
}

function Approval({ interrupt, answer }) {
  const call = interrupt.value?.call ?? {};
  const [args, setArgs] = useState(JSON.stringify(call.args ?? {}));
  return (
    <div className="interrupt">
      <div className="interrupt-call">
        {call.name}({JSON.stringify(call.args)})
      </div>
      <input name="args" value={args} onChange={(event) => setArgs(event.target.value)} />
      <button className="approve" onClick={() => answer({ type: "approve" })}>
        Approve
      </button>
      <button
        className="edit"
        onClick={() => answer({ type: "edit", edited_action: { name: call.name, args: JSON.parse(args) } })}
      >
        Run with these arguments
      </button>
      <button className="reject" onClick={() => answer({ type: "reject", message: "Not today." })}>
        Reject
      </button>
    </div>
  );
}

export function Approvals() {
  const [threadId, setThreadId] = useState(null);
  const thread = useStream({
    apiUrl: params.get("apiUrl") ?? "http://127.0.0.1:8000",
    assistantId: params.get("assistantId") ?? "triggered_phase",
    threadId,
    fetchStateHistory: withHistory,
    onThreadId: setThreadId,
  });
  // show_tool_outputs: the tool's output is in its message, where the test reads what ran
  const options = { context: { show_tool_outputs: true }, ...(withHistory ? {} : { streamMode: STREAM_MODE }) };
  const send = (event) => {
    event.preventDefault();
    const input = event.target.elements.message;
    thread.submit({ messages: [{ type: "human", content: input.value }] }, options);
    input.value = "";
  };
  const answer = (decision) => thread.submit({}, { ...options, command: { resume: { decisions: [decision] } } });
  const waiting = thread.interrupt && !Array.isArray(thread.interrupt) ? thread.interrupt : null;
  return (
    <main>
      {thread.messages.map((message) => (
        <div key={message.id} className={`message ${message.type}`}>
          {text(message)}
        </div>
      ))}
      {waiting?.value?.type === "approval" && <Approval interrupt={waiting} answer={answer} />}
      {thread.error && <div className="error">{String(thread.error)}</div>}
      <div className="thread-id">{threadId}</div>
      <form onSubmit={send}>
        <input name="message" placeholder="Ask something" />
        <button disabled={thread.isLoading}>Send</button>
      </form>
    </main>
  );
}
