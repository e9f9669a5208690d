import { useStream } from "@langchain/langgraph-sdk/react";
import { useState } from "react";

// The page's address carries the server, the protocol and the open thread, so a reload re-opens it:
// ?apiUrl=http://127.0.0.1:8000&assistantId=triggered_phase&threadId=...
const params = new URLSearchParams(window.location.search);

function text(message) {
  return typeof message.content === "string"
    ? message.content
    : message.content.map((part) => part.text ?? "").join("");
}

export function Chat() {
  const [threadId, setThreadId] = useState(params.get("threadId"));
  const thread = useStream({
    apiUrl: params.get("apiUrl") ?? "http://127.0.0.1:8000",
    assistantId: params.get("assistantId") ?? "triggered_phase",
    threadId,
    onThreadId(id) {
      setThreadId(id);
      params.set("threadId", id);
      window.history.replaceState(null, "", `?${params}`);
    },
  });
  const send = (event) => {
    event.preventDefault();
    const input = event.target.elements.message;
    thread.submit({ messages: [{ type: "human", content: input.value }] });
    input.value = "";
  };
  return (
    <main>
      {thread.messages.map((message) => (
        <div key={message.id} className={`message ${message.type}`}>
          {text(message)}
          {message.tool_calls?.map((call) => (
            <div key={call.id} className="tool-call">
              {call.name}({JSON.stringify(call.args)})
            </div>
          ))}
          {message.type === "tool" && <div className="tool-result">{message.name}: {message.status ?? "success"}</div>}
        </div>
      ))}
      {thread.error && <div className="error">{String(thread.error)}</div>}
      <form onSubmit={send}>
        <input name="message" placeholder="Ask something" />
        <button disabled={thread.isLoading}>Send</button>
      </form>
    </main>
  );
}
