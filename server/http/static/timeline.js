// @ts-check
// A thread's checkpoints as a tree (GET /api/threads/{id}/checkpoints: each row names its parent), drawn as
// its main line with every fork (a run from an older checkpoint, a state edit) as a branch under the
// checkpoint it starts from; and the path from the thread's start to a checkpoint, for the graph's marks.

import { el } from "./dom.js";

/** The rows by id, and each row's children oldest first. */
export function treeOf(rows) {
  const byId = new Map(rows.map((row) => [row.checkpointId, row]));
  const children = new Map();
  const roots = [];
  for (const row of rows) {
    if (row.parentId && byId.has(row.parentId)) {
      if (!children.has(row.parentId)) children.set(row.parentId, []);
      children.get(row.parentId).push(row);
    } else roots.push(row);
  }
  const byTime = (a, b) => String(a.createdAt).localeCompare(String(b.createdAt));
  for (const list of children.values()) list.sort(byTime);
  roots.sort(byTime);
  return { byId, children, roots };
}

/** The newest checkpoint of the thread: where a run goes on (or went on) last. */
export function newestOf(rows) {
  let newest = null;
  for (const row of rows) if (!newest || String(row.createdAt) > String(newest.createdAt)) newest = row;
  return newest;
}

/** The rows from the thread's first checkpoint to ``id``, oldest first (following parents). */
export function pathTo(tree, id) {
  const path = [];
  for (let row = tree.byId.get(id); row; row = row.parentId ? tree.byId.get(row.parentId) : null) {
    path.push(row);
    if (path.length > tree.byId.size) break; // a cycle cannot happen; never loop on bad data
  }
  return path.reverse();
}

/** The part of ``path`` since its last turn input: the run that led to the path's end. */
export function sinceTurn(path) {
  let start = 0;
  path.forEach((row, at) => {
    if (row.source === "input") start = at;
  });
  return path.slice(start);
}

const nodesOf = (row) => (row.node ? row.node.split(",") : []);

/** What the graph marks for a run's path: the nodes that ran and the edges between them. */
export function walked(path) {
  const visited = new Set();
  const taken = [];
  let before = ["__start__"];
  for (const row of path) {
    const ran = nodesOf(row).filter((node) => node !== "__start__");
    if (!ran.length) continue;
    for (const node of ran) visited.add(node);
    for (const source of before) for (const target of ran) taken.push([source, target]);
    before = ran;
  }
  const last = path[path.length - 1];
  if (last && !last.next.length && visited.size) for (const source of before) taken.push([source, "__end__"]);
  return { visited: [...visited], taken };
}

function label(row) {
  if (row.source === "input") return "input (a new message)";
  if (row.source === "update") return "state edited";
  if (row.source === "fork") return "fork";
  return row.node || "(start)";
}

function rowItem(row, branch, on) {
  const item = el("li", "timeline-item");
  item.dataset.testid = "timeline-item";
  item.dataset.checkpointId = row.checkpointId;
  item.dataset.branch = String(branch);
  item.dataset.source = row.source || "";
  item.dataset.node = row.node || "";
  item.title = `${row.checkpointId}${row.createdAt ? `\n${row.createdAt}` : ""}`;
  const button = el("button", "timeline-open");
  button.type = "button";
  const next = row.next.length ? `→ ${row.next.join(", ")}` : "→ end";
  button.append(
    el("span", "timeline-step", row.step == null ? "" : String(row.step)),
    el("span", `timeline-node source-${row.source || "loop"}`, label(row)),
    el("span", "timeline-next", next),
  );
  if (row.interrupts && row.interrupts.length) {
    const kind = row.interrupts[0] && row.interrupts[0].type ? row.interrupts[0].type : "an answer";
    // the newest checkpoint still waits; an older one asked, and the thread went on from it
    const verb = row.checkpointId === on.newestId ? "waits" : "asked";
    button.append(el("span", "timeline-waits", `${verb}: ${kind}`));
  }
  button.addEventListener("click", () => on.select(row.checkpointId));
  item.append(button);
  return item;
}

/**
 * Draw the tree into ``container``: the main line, and under a checkpoint every branch that starts at it
 * (numbered in the order they were made). ``on.select(id)`` opens a checkpoint; ``on.newestId`` is the thread's
 * newest checkpoint; ``on.older``, when set, loads older checkpoints (a button says some are not shown).
 */
export function drawTimeline(container, rows, selectedId, on) {
  const tree = treeOf(rows);
  let branches = 0;
  const line = (first, branch) => {
    const list = el("ol", branch ? "timeline-branch" : "timeline-line");
    list.dataset.branch = String(branch);
    for (let row = first; row; ) {
      const item = rowItem(row, branch, on);
      if (row.checkpointId === selectedId) item.classList.add("selected");
      list.append(item);
      const [next, ...forks] = tree.children.get(row.checkpointId) || [];
      for (const fork of forks) list.append(branchFrom("li", fork, `from step ${row.step ?? "?"}`));
      row = next;
    }
    return list;
  };
  /** A numbered branch starting at ``first``, headed by where it comes from. */
  const branchFrom = (tag, first, from) => {
    const number = ++branches;
    const holder = el(tag, "timeline-fork");
    holder.dataset.testid = "timeline-branch";
    holder.dataset.branch = String(number);
    holder.append(el("div", "timeline-fork-head", `branch ${number} · ${from}`), line(first, number));
    return holder;
  };
  // The oldest loaded checkpoint starts the main line; another one whose parent is not loaded (only with
  // older checkpoints not shown) is a branch from one of those.
  const [main, ...others] = tree.roots;
  /** @type {HTMLElement[]} */
  const drawn = main ? [line(main, 0)] : [];
  for (const root of others) drawn.push(branchFrom("div", root, "from an older checkpoint (not loaded)"));
  if (on.older) {
    const more = el("button", "timeline-older", "Older checkpoints are not shown: load more");
    more.type = "button";
    more.dataset.testid = "timeline-older";
    more.addEventListener("click", on.older);
    drawn.unshift(more);
  }
  container.replaceChildren(...drawn);
  if (!rows.length) container.replaceChildren(el("p", "hint", "This thread has no checkpoints yet."));
}
