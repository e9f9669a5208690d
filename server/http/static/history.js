// @ts-check
// A thread's conversation as its state holds it (GET /threads/{id}/state, values.messages), drawn as
// chat: the user's bubbles, the assistant's text, and each tool that ran as the chat's tool row
// ("⚙ read_file {"path":"a.md"} ok", its arguments and output opened from it). The messages are LangChain message dicts; nothing protocol-specific is read.

import { el, els } from "./dom.js";
import { markdownBlock } from "./markdown.js";
import { finishToolRow, toolRow } from "./toolrow.js";

/** The text of a message's content: a string, or a list of content blocks (their text parts). */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (typeof part === "string" ? part : part && part.type === "text" ? part.text || "" : ""))
    .join("");
}

/** One tool call of an AI message, as the chat's tool row: waiting until its ToolMessage says how it ended. */
function callLine(call) {
  const row = toolRow(call.id, call.name, call.args ?? {});
  row.classList.add("history-tool");
  row.dataset.testid = "history-tool";
  row.querySelector(".tool-status").textContent = "no result";
  return row;
}

/** Fill a call's row from its ToolMessage (status success/error); what it returned shows with tool outputs on. */
function endCall(row, message, showOutputs) {
  const failed = message.status === "error";
  const text = contentText(message.content);
  row.dataset.status = failed ? "error" : "ok";
  finishToolRow(row, {
    status: failed ? "error" : "ok",
    error: failed ? text : undefined,
    output: !failed && showOutputs && text ? text : undefined,
  });
}

/** Draws messages in order; an assistant bubble holds everything between two user messages. */
class Drawing {
  constructor(label, showOutputs) {
    this.label = label;
    this.showOutputs = showOutputs;
    this.body = null; // the open assistant bubble's body
    this.calls = new Map(); // tool_call_id -> its line
    this.last = null; // the turn's latest text that asked for no tool: its answer, once the turn ends
  }

  /** The turn is over: its last text without tool calls is its answer. */
  endTurn() {
    if (this.last && this.last === this.body.lastElementChild) {
      const box = el("div", "answer history-answer");
      box.dataset.testid = "history-answer";
      box.append(el("div", "answer-label", "Answer"), markdownBlock("answer-text", this.last.textContent));
      this.last.replaceWith(box);
    }
    this.last = null;
  }

  user(message) {
    this.endTurn();
    const msg = el("div", "msg user history");
    msg.append(el("div", "who", "you"), el("div", "body", contentText(message.content)));
    els.chat.append(msg);
    this.body = null;
  }

  assistant() {
    if (!this.body) {
      const msg = el("div", "msg assistant history");
      this.body = el("div", "body");
      msg.append(el("div", "who", this.label), this.body);
      els.chat.append(msg);
    }
    return this.body;
  }

  ai(message) {
    const text = contentText(message.content).trim();
    const calls = message.tool_calls || [];
    if (text) {
      const block = el("div", "text history-text", text);
      this.assistant().append(block);
      this.last = calls.length ? null : block;
    }
    for (const call of calls) {
      const line = callLine(call);
      this.assistant().append(line);
      if (call.id) this.calls.set(call.id, line);
    }
  }

  tool(message) {
    let line = this.calls.get(message.tool_call_id);
    if (!line) {
      // A result whose call is not in the conversation still says what ran.
      line = callLine({ id: message.tool_call_id, name: message.name || "tool", args: undefined });
      this.assistant().append(line);
    }
    endCall(line, message, this.showOutputs);
  }

  draw(message) {
    if (!message || typeof message !== "object") return;
    const kind = message.type || message.role;
    if (kind === "human" || kind === "user") this.user(message);
    else if (kind === "ai" || kind === "assistant" || kind === "AIMessageChunk") this.ai(message);
    else if (kind === "tool") this.tool(message);
    // system and other messages are the protocol's, not the conversation's
  }
}

/**
 * Replace the chat with a thread's conversation. Returns how many user messages it held.
 * ``label`` names the assistant (e.g. "assistant · triggered_phase").
 */
export function showConversation(messages, label, showOutputs) {
  els.chat.replaceChildren();
  const list = Array.isArray(messages) ? messages : [];
  const drawing = new Drawing(label, showOutputs);
  for (const message of list) drawing.draw(message);
  drawing.endTurn();
  if (!els.chat.hasChildNodes()) {
    els.chat.append(el("p", "empty", "This thread holds no messages yet. Type a message and press Send."));
  }
  els.chat.scrollTop = els.chat.scrollHeight;
  return list.filter((m) => m && (m.type === "human" || m.role === "user")).length;
}

/** An empty chat for a new thread. */
export function clearChat(text) {
  els.chat.replaceChildren(el("p", "empty", text));
}
