// @ts-check
// The debugger's graph: the protocol's graph drawn (graph.js) with the run marked on it, the status line
// that says where the thread stands, and the breakpoints picked on its nodes for the next run.

import { api, enc } from "./api.js";
import { el } from "./dom.js";
import { drawGraph, graphNodes, loadGraph, markGraph } from "./graph.js";
import { pathTo, sinceTurn, treeOf, walked } from "./timeline.js";
import { dbg, live, say, ui } from "./debug_state.js";

// ---------------------------------------------------------------- the graph

export async function drawProtocol(protocol) {
  dbg.protocol = protocol;
  dbg.drawn = null;
  ui.graph.replaceChildren(el("p", "hint", `loading ${protocol}'s graph…`));
  try {
    const [collapsed, expanded, schemas] = await Promise.all([
      loadGraph(protocol, false),
      loadGraph(protocol, true),
      api("GET", `/assistants/${enc(protocol)}/schemas`),
    ]);
    if (dbg.protocol !== protocol) return;
    const nested = expanded.nodes.length !== collapsed.nodes.length;
    ui.expandLabel.hidden = !nested; // only a protocol with a subgraph (the planner's executor) expands
    dbg.drawn = nested && ui.expand.checked ? expanded : collapsed;
    dbg.schema = schemas.state_schema || null;
    drawGraph(ui.graph, dbg.drawn, { onNode: toggleBreakpoint });
    drawBreakpoints(graphNodes(collapsed)); // a run stops at the protocol's own nodes
    mark();
  } catch (err) {
    if (dbg.protocol !== protocol) return;
    dbg.protocol = null; // the next poll tries again (a token typed in since, a server back up)
    ui.graph.replaceChildren(el("p", "note error", `the graph could not be drawn: ${err.message}`));
  }
}

/** An edge of the drawing between two nodes; a subgraph's name stands for any node inside it. */
function drawnEdges([source, target]) {
  const within = (id, name) => id === name || id.startsWith(`${name}:`);
  return (dbg.drawn ? dbg.drawn.edges : [])
    .filter((edge) => within(edge.source, source) && within(edge.target, target))
    .map((edge) => [edge.source, edge.target]);
}

/** Light the graph for the selected checkpoint, or for the run while one goes on; say where the thread is. */
export function mark() {
  const tree = treeOf(dbg.rows);
  const at = tree.byId.get(dbg.selectedId);
  describe(at);
  if (!dbg.drawn) return;
  const marks = { breakBefore: [...dbg.breakBefore], breakAfter: [...dbg.breakAfter] };
  if (at) {
    const { visited, taken } = walked(sinceTurn(pathTo(tree, at.checkpointId)));
    marks.visited = visited;
    marks.taken = taken.flatMap(drawnEdges);
    const newest = at.checkpointId === dbg.newestId;
    if (newest && live()) {
      marks.active = at.next; // running now, reached through the edge from the node before
      const before = at.node ? at.node.split(",") : ["__start__"];
      marks.taken.push(...before.flatMap((source) => at.next.flatMap((target) => drawnEdges([source, target]))));
    } else if (newest && at.next.length && !ENDED.has(dbg.requestStatus)) {
      marks.waiting = at.next; // paused there: a breakpoint, a pause point or a question
    } else marks.active = at.node ? at.node.split(",") : []; // the node whose work this checkpoint saved
  }
  markGraph(ui.graph, marks);
}

// A run that stopped for good before its end: the thread does not wait there, it went no further.
const ENDED = new Set(["cancelled", "failed"]);

function describe(at) {
  if (!dbg.threadId) return say("No thread is open: send a message or open one to follow its run here.");
  if (!at) return say(dbg.rows.length ? "Select a checkpoint in the timeline." : "This thread has no checkpoints yet.");
  const newest = at.checkpointId === dbg.newestId;
  const next = at.next.join(", ");
  if (newest && live()) return say(`running: ${next || "finishing"}`);
  if (newest && at.next.length && dbg.requestStatus === "cancelled") return say(`cancelled before ${next}`);
  if (newest && at.next.length && dbg.requestStatus === "failed") return say(`the run failed before ${next}`);
  if (newest && at.interrupts && at.interrupts.length) return say(`waits for an answer at ${next}`);
  if (newest && at.next.length) return say(`paused before ${next}`);
  if (newest) return say("finished");
  return say(`checkpoint at step ${at.step} (${at.node || at.source}); the thread went on from here`);
}

// ---------------------------------------------------------------- breakpoints

function toggleBreakpoint(node) {
  if (node.includes(":")) node = node.slice(0, node.indexOf(":")); // a run stops at the subgraph's node
  const box = /** @type {HTMLInputElement} */ (
    ui.breakpoints.querySelector(`input[data-when="before"][data-node="${CSS.escape(node)}"]`)
  );
  if (!box) return;
  box.checked = !box.checked;
  box.dispatchEvent(new Event("change"));
}

function drawBreakpoints(nodes) {
  const known = new Set(nodes);
  for (const set of [dbg.breakBefore, dbg.breakAfter]) for (const node of [...set]) if (!known.has(node)) set.delete(node);
  const table = el("table", "breakpoint-table");
  const head = el("tr");
  head.append(el("th", "", "stop"), el("th", "", "before"), el("th", "", "after"));
  table.append(head);
  for (const node of nodes) {
    const row = el("tr");
    row.dataset.node = node;
    row.append(el("td", "breakpoint-node", node));
    /** @type {[string, Set<string>][]} */
    const sets = [["before", dbg.breakBefore], ["after", dbg.breakAfter]];
    for (const [when, set] of sets) {
      const box = el("input");
      box.type = "checkbox";
      box.dataset.testid = `break-${when}`;
      box.dataset.when = when;
      box.dataset.node = node;
      box.checked = set.has(node);
      box.setAttribute("aria-label", `stop ${when} ${node}`);
      box.addEventListener("change", () => {
        if (box.checked) set.add(node);
        else set.delete(node);
        mark();
      });
      const cell = el("td");
      cell.append(box);
      row.append(cell);
    }
    table.append(row);
  }
  const hint = "Pause the next run (a message sent in the chat, or a run from here) before or after these nodes:";
  ui.breakpoints.replaceChildren(el("p", "hint", hint), table);
}

