// @ts-check
// An answer's text as the page shows it: Markdown rendered by marked, then cleaned by DOMPurify (both vendored
// in ./vendor, pinned by tests/js/package.json), so a model's answer can format text but never run script or
// load anything. Raw HTML in the answer is dropped; links open in a new tab.

import DOMPurify from "./vendor/purify.es.mjs";
import { marked } from "./vendor/marked.esm.js";
import { el, scroller } from "./dom.js";

const renderer = new marked.Renderer();
const link = renderer.link.bind(renderer);
renderer.link = (token) => link(token).replace("<a ", '<a target="_blank" rel="noopener noreferrer" ');
renderer.html = () => ""; // an answer's own HTML is not shown (the sanitizer would drop most of it anyway)

/** An element with ``className`` holding ``text`` rendered as Markdown (sanitized). */
export function markdownBlock(className, text) {
  const block = el("div", `${className} markdown`);
  const html = marked.parse(String(text ?? ""), { renderer, gfm: true, breaks: true, async: false });
  block.innerHTML = DOMPurify.sanitize(/** @type {string} */ (html), { ADD_ATTR: ["target"] });
  for (const code of block.querySelectorAll("pre")) scroller(code); // a wide code block scrolls sideways
  return block;
}
