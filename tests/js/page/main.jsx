// The test page: the Chat component (the docs' useStream snippet), or with ?page=approvals the Agent Chat
// UI-style Approvals, plus what a test reads: the status, and every distinct text the last AI message
// showed while the run streamed (window.seenAnswers).
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";

import { Approvals } from "./Approvals.jsx";
import { Chat } from "./Chat.jsx";

const Page = new URLSearchParams(window.location.search).get("page") === "approvals" ? Approvals : Chat;

window.seenAnswers = [];
new MutationObserver(() => {
  const answers = [...document.querySelectorAll(".message.ai")].map((node) => node.firstChild?.textContent ?? "");
  const last = answers.at(-1) ?? "";
  if (last && window.seenAnswers.at(-1) !== last) window.seenAnswers.push(last);
  document.body.dataset.busy = String(document.querySelector("form button")?.disabled ?? false);
}).observe(document.getElementById("root"), { subtree: true, childList: true, characterData: true, attributes: true });

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <Page />
  </StrictMode>,
);
