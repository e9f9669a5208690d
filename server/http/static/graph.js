// @ts-check
// One protocol's LangGraph graph as SVG, laid out by dagre (shipped in vendor/), and a run marked on it:
// the node running now, the nodes and edges already passed, where the run waits, and breakpoints.
// Subgraph nodes (`parent:child`, from `xray=1`) sit in a labelled cluster named after their parent.

import { api, enc } from "./api.js";
import dagre from "./vendor/dagre.esm.js";

const SVG = "http://www.w3.org/2000/svg";
const START = "__start__";
const END = "__end__";
const TERMINALS = new Set([START, END]);

// Sizes in SVG units (1 unit = 1 CSS pixel at the drawing's natural size). graph.css uses the same fonts.
const NODE_FONT = { size: 13, weight: 500 };
const LABEL_FONT = { size: 11, weight: 400 };
const NODE_HEIGHT = 34;
const NODE_PAD_X = 16;
const TERMINAL = { width: 58, height: 24 };
const LABEL_PAD = 6;
const MARGIN = 10;

let drawings = 0; // makes each svg's marker id unique in the page

/** The graph of a protocol as LangGraph draws it: `{nodes, edges}`; `expand` shows subgraphs' nodes. */
export async function loadGraph(protocol, expand) {
  const graph = await api("GET", `/assistants/${enc(protocol)}/graph?xray=${expand ? 1 : 0}`);
  // Remembered for drawGraph's data-protocol, without changing what the JSON says.
  Object.defineProperty(graph, "protocol", { value: protocol, enumerable: false });
  return graph;
}

/** The graph's node ids other than `__start__`/`__end__`, in the JSON's order. */
export function graphNodes(graph) {
  return (graph.nodes || []).map((node) => node.id).filter((id) => !TERMINALS.has(id));
}

// ---------------------------------------------------------------- measuring and laying out

let canvas = null;

function textWidth(text, font) {
  canvas = canvas || document.createElement("canvas");
  const context = canvas.getContext("2d");
  const family = getComputedStyle(document.documentElement).fontFamily || "sans-serif";
  context.font = `${font.weight} ${font.size}px ${family}`;
  return Math.ceil(context.measureText(text).width);
}

/** The cluster a node id belongs to (`a:b:c` → `a:b`), or "" for a top-level node. */
function parentOf(id) {
  const at = id.lastIndexOf(":");
  return at > 0 ? id.slice(0, at) : "";
}

function shortName(id) {
  if (id === START) return "start";
  if (id === END) return "end";
  return id.slice(id.lastIndexOf(":") + 1);
}

function edgeLabel(edge) {
  return typeof edge.data === "string" && edge.data ? edge.data : "";
}

function layoutWith(graph, ranker) {
  const g = new dagre.graphlib.Graph({ compound: true, multigraph: true });
  g.setGraph({ rankdir: "TB", ranker, nodesep: 28, ranksep: 40, edgesep: 14, marginx: MARGIN,
    marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set((graph.nodes || []).map((node) => node.id));
  const clusters = new Set();
  for (const id of ids) {
    for (let parent = parentOf(id); parent && !ids.has(parent); parent = parentOf(parent)) {
      clusters.add(parent);
    }
  }
  for (const cluster of clusters) g.setNode(cluster, { cluster: true, label: shortName(cluster) });
  for (const id of ids) {
    const terminal = TERMINALS.has(id);
    const width = terminal ? TERMINAL.width : textWidth(shortName(id), NODE_FONT) + 2 * NODE_PAD_X;
    g.setNode(id, { width, height: terminal ? TERMINAL.height : NODE_HEIGHT, label: shortName(id) });
  }
  for (const id of [...ids, ...clusters]) {
    const parent = parentOf(id);
    if (parent && clusters.has(parent)) g.setParent(id, parent);
  }
  (graph.edges || []).forEach((edge, index) => {
    if (!ids.has(edge.source) || !ids.has(edge.target)) return;
    const label = edgeLabel(edge);
    const width = label ? textWidth(label, LABEL_FONT) + 2 * LABEL_PAD : 0;
    const height = label ? LABEL_FONT.size + 6 : 0;
    // For a loop dagre keeps room right of its node (loopShape draws it there): a little more than its label.
    const loop = edge.source === edge.target;
    g.setEdge(edge.source, edge.target, {
      label,
      width: loop ? width + 10 : width,
      height: loop ? Math.max(height, 10) : height,
      labelpos: "c",
      index,
    }, `e${index}`);
  });
  dagre.layout(g);
  for (const e of g.edges()) placeLabel(g.edge(e), e.v === e.w);
  const view = extent(g);
  // Smaller is better; a cluster's area counts again, so a subgraph stays a compact box rather than a
  // band across the drawing (network-simplex routes an edge leaving a cluster through it).
  let score = view.width * view.height;
  for (const id of clusters) score += 2 * g.node(id).width * g.node(id).height;
  return { g, clusters, view, score };
}

/**
 * dagre places a label on its edge's middle rank, and gives none when that rank is not a whole one (a
 * long edge beside a cluster, under longest-path ranking): then it goes halfway along the edge.
 */
function placeLabel(route, loop) {
  if (!route.label || loop || Number.isFinite(route.x)) return;
  const points = route.points || [];
  const lengths = points.slice(1).map((point, i) => Math.hypot(point.x - points[i].x, point.y - points[i].y));
  let rest = lengths.reduce((sum, length) => sum + length, 0) / 2;
  for (let i = 0; i < lengths.length; i += 1) {
    if (rest <= lengths[i] && lengths[i] > 0) {
      const share = rest / lengths[i];
      route.x = points[i].x + share * (points[i + 1].x - points[i].x);
      route.y = points[i].y + share * (points[i + 1].y - points[i].y);
      return;
    }
    rest -= lengths[i];
  }
}

/**
 * dagre's default ranking (network-simplex) draws most graphs best; with subgraph clusters a
 * longest-path ranking often keeps them tighter, so both are tried there and the smaller drawing wins.
 */
function layout(graph) {
  const best = layoutWith(graph, "network-simplex");
  if (best.clusters.size === 0) return best;
  const other = layoutWith(graph, "longest-path");
  return other.score < best.score ? other : best;
}

// ---------------------------------------------------------------- drawing

function svgEl(tag, attributes = {}, className = "") {
  const node = document.createElementNS(SVG, tag);
  if (className) node.setAttribute("class", className);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

function svgText(x, y, text, className) {
  const node = svgEl("text", { x: round(x), y: round(y) }, className);
  node.textContent = text;
  return node;
}

function titled(node, text) {
  const title = svgEl("title");
  title.textContent = text;
  node.appendChild(title);
  return node;
}

const round = (value) => Math.round(value * 10) / 10;

/** d3's curveBasis: a smooth B-spline from the first to the last point, through dagre's bends. */
function curve(points) {
  const p = points.map(({ x, y }) => [round(x), round(y)]);
  if (p.length < 3) return `M${p[0]}L${p[p.length - 1]}`;
  const parts = [`M${p[0]}`, `L${(5 * p[0][0] + p[1][0]) / 6},${(5 * p[0][1] + p[1][1]) / 6}`];
  const bezier = (a, b, c) =>
    parts.push(
      `C${(2 * a[0] + b[0]) / 3},${(2 * a[1] + b[1]) / 3} ` +
        `${(a[0] + 2 * b[0]) / 3},${(a[1] + 2 * b[1]) / 3} ` +
        `${(a[0] + 4 * b[0] + c[0]) / 6},${(a[1] + 4 * b[1] + c[1]) / 6}`,
    );
  for (let i = 2; i < p.length; i += 1) bezier(p[i - 2], p[i - 1], p[i]);
  bezier(p[p.length - 2], p[p.length - 1], p[p.length - 1]);
  parts.push(`L${p[p.length - 1]}`);
  return parts.join("");
}

/** Breakpoint marks (graph.css shows them): a dot on the top edge (before), one on the bottom (after). */
function breakDots(group, x, y, height) {
  const dot = (cy, which) => svgEl("circle", { cx: round(x), cy: round(cy), r: 4.5 }, `gbreak ${which}`);
  group.append(dot(y - height / 2, "gbreak-before"), dot(y + height / 2, "gbreak-after"));
}

function drawCluster(id, box) {
  const group = titled(svgEl("g", { "data-testid": "graph-cluster", "data-subgraph": id }, "gcluster"), id);
  const left = box.x - box.width / 2;
  const top = box.y - box.height / 2;
  group.appendChild(svgEl("rect", { x: round(left), y: round(top), width: round(box.width),
    height: round(box.height), rx: 10 }));
  group.appendChild(svgText(left + 10, top + 13, box.label, "gcluster-label"));
  breakDots(group, box.x + box.width / 2 - 24, box.y, box.height);
  return group;
}

function drawNode(id, box, onNode) {
  const terminal = TERMINALS.has(id);
  const group = svgEl("g", { "data-testid": "graph-node", "data-node": id },
    terminal ? "gnode terminal" : "gnode");
  titled(group, id);
  group.appendChild(svgEl("rect", { x: round(box.x - box.width / 2), y: round(box.y - box.height / 2),
    width: round(box.width), height: round(box.height), rx: terminal ? box.height / 2 : 8 }));
  group.appendChild(svgText(box.x, box.y, box.label, "gnode-label"));
  if (!terminal) {
    breakDots(group, box.x - box.width / 2 + 12, box.y, box.height);
    group.setAttribute("tabindex", "0");
    group.setAttribute("role", "button");
    group.setAttribute("aria-label", id);
    if (onNode) {
      group.addEventListener("click", () => onNode(id));
      group.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" && event.key !== " ") return;
        event.preventDefault();
        onNode(id);
      });
    }
  }
  return group;
}

/**
 * A loop right of its node, turning where dagre kept room for it (and its label, which follows it).
 * dagre 3's own points for a loop zigzag around that room, so they are not drawn.
 */
function loopShape(node, route) {
  const right = node.x + node.width / 2;
  const room = Number.isFinite(route.x) ? route.x - route.width / 2 : right;
  const turn = Math.min(Math.max(right + 24, room), right + 56);
  const reach = (turn - right) / 0.75; // a cubic's farthest point is 3/4 of its control points' reach
  const dy = 7;
  const spread = node.height / 2 + 10;
  const path = `M${round(right)},${round(node.y - dy)}C${round(right + reach)},${round(node.y - spread)} ` +
    `${round(right + reach)},${round(node.y + spread)} ${round(right)},${round(node.y + dy)}`;
  const half = spread * 0.75; // how far the loop reaches above and below the node's middle
  return { path, turn, top: node.y - half, bottom: node.y + half, labelX: turn + 5, labelY: node.y };
}

function drawEdge(edge, route, markerId, source) {
  const label = edgeLabel(edge);
  const attributes = { "data-testid": "graph-edge", "data-source": edge.source, "data-target": edge.target };
  const group = svgEl("g", attributes, edge.conditional ? "gedge conditional" : "gedge");
  if (edge.conditional) group.dataset.conditional = "true";
  if (label) group.dataset.label = label;
  const loop = edge.source === edge.target ? loopShape(source, route) : null;
  const d = loop ? loop.path : curve(route.points);
  group.appendChild(svgEl("path", { d, "marker-end": `url(#${markerId})` }));
  if (label && loop) group.appendChild(svgText(loop.labelX, loop.labelY, label, "glabel loop"));
  else if (label && Number.isFinite(route.x)) group.appendChild(svgText(route.x, route.y, label, "glabel"));
  return group;
}

/** The drawn elements' extent, so nothing (a loop's label, a cluster's border) is cut off. */
function extent(g) {
  const box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
  const grow = (x, y, halfWidth = 0, halfHeight = 0) => {
    box.left = Math.min(box.left, x - halfWidth);
    box.right = Math.max(box.right, x + halfWidth);
    box.top = Math.min(box.top, y - halfHeight);
    box.bottom = Math.max(box.bottom, y + halfHeight);
  };
  for (const id of g.nodes()) {
    const node = g.node(id);
    if (node && Number.isFinite(node.x)) grow(node.x, node.y, node.width / 2, node.height / 2);
  }
  for (const e of g.edges()) {
    const route = g.edge(e);
    const half = route.label ? textWidth(route.label, LABEL_FONT) / 2 + LABEL_PAD : 0;
    if (e.v === e.w) {
      const loop = loopShape(g.node(e.v), route);
      grow(loop.turn, loop.top);
      grow(loop.turn, loop.bottom);
      if (half) grow(loop.labelX + half, loop.labelY, half, route.height / 2);
      continue;
    }
    for (const point of route.points || []) grow(point.x, point.y);
    if (half && Number.isFinite(route.x)) grow(route.x, route.y, half, route.height / 2);
  }
  if (!Number.isFinite(box.left)) return { x: 0, y: 0, width: 1, height: 1 };
  return {
    x: Math.floor(box.left - MARGIN),
    y: Math.floor(box.top - MARGIN),
    width: Math.ceil(box.right - box.left + 2 * MARGIN),
    height: Math.ceil(box.bottom - box.top + 2 * MARGIN),
  };
}

/**
 * Draw `graph` (`{nodes, edges}` from loadGraph) into `container`, replacing what it held. Clicking a
 * node (not start or end) calls `onNode(id)`. Returns the svg.
 */
export function drawGraph(container, graph, { onNode } = /** @type {{ onNode?: (id: string) => void }} */ ({})) {
  const { g, clusters, view } = layout(graph);
  drawings += 1;
  const markerId = `graph-${drawings}-arrow`;
  const svg = svgEl("svg", {
    viewBox: `${view.x} ${view.y} ${view.width} ${view.height}`,
    width: view.width,
    height: view.height,
    preserveAspectRatio: "xMidYMin meet",
    role: "group",
    "data-testid": "graph",
  }, "graph");
  svg.dataset.protocol = graph.protocol || "";
  svg.dataset.expanded = String(clusters.size > 0);
  svg.dataset.active = "";
  svg.dataset.waiting = "";
  svg.style.setProperty("--graph-width", `${view.width}px`);
  svg.style.setProperty("--graph-height", `${view.height}px`);
  svg.setAttribute("aria-label", `graph of ${graph.protocol || "the protocol"}`);

  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: markerId, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9,
    markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, "gmarker");
  marker.appendChild(svgEl("path", { d: "M0,1 L10,5 L0,9 z" }));
  defs.appendChild(marker);
  svg.appendChild(defs);

  // Edges first (under everything), then the clusters (a translucent box holding its own nodes, and
  // nested clusters), then the top-level nodes.
  const edges = svgEl("g", {}, "gedges");
  const nodes = svgEl("g", {}, "gnodes");
  for (const e of g.edges()) {
    const route = g.edge(e);
    edges.appendChild(drawEdge(graph.edges[route.index], route, markerId, g.node(e.v)));
  }
  const holders = new Map();
  const holderOf = (id) => holders.get(parentOf(id)) || nodes;
  const depth = (id) => id.split(":").length;
  for (const id of [...clusters].sort((a, b) => depth(a) - depth(b))) {
    holders.set(id, holderOf(id).appendChild(drawCluster(id, g.node(id))));
  }
  for (const node of graph.nodes || []) {
    if (g.hasNode(node.id)) holderOf(node.id).appendChild(drawNode(node.id, g.node(node.id), onNode));
  }
  svg.append(edges, nodes);
  container.replaceChildren(svg);
  return svg;
}

// ---------------------------------------------------------------- marking a run

const NODE_MARKS = { active: "active", visited: "visited", waiting: "waiting", breakBefore: "break-before",
  breakAfter: "break-after" };

/**
 * The drawn element an id names: its node; the cluster of a subgraph's parent while expanded; or, for a
 * subgraph node's id while collapsed, the collapsed node it runs in. Null for an unknown id.
 */
function findMarked(svg, id) {
  for (let name = String(id); name; name = parentOf(name)) {
    const found = [...svg.querySelectorAll(".gnode, .gcluster")].find(
      (element) => (element.dataset.node ?? element.dataset.subgraph) === name,
    );
    if (found) return found;
  }
  return null;
}

/** Whether a drawn edge's end stands for `id`: that node, a node in its cluster, or its collapsed node. */
function endMatches(end, id) {
  return end === id || end.startsWith(`${id}:`) || id.startsWith(`${end}:`);
}

/**
 * Mark a run on the drawing in `container`: `{active, visited, waiting, breakBefore, breakAfter}` are
 * lists of node ids, `taken` a list of `[source, target]` edges. Replaces the previous marks.
 */
export function markGraph(container, marks = {}) {
  const svg = container.querySelector("svg.graph");
  if (!svg) return;
  const classes = Object.values(NODE_MARKS);
  for (const element of svg.querySelectorAll(".gnode, .gcluster")) element.classList.remove(...classes);
  for (const element of svg.querySelectorAll(".gedge")) element.classList.remove("taken");
  const marked = {};
  for (const [key, className] of Object.entries(NODE_MARKS)) {
    marked[key] = [];
    for (const id of marks[key] || []) {
      const element = findMarked(svg, id);
      if (!element) continue;
      element.classList.add(className);
      if (!marked[key].includes(id)) marked[key].push(id);
    }
  }
  const edges = [...svg.querySelectorAll(".gedge")];
  for (const [source, target] of marks.taken || []) {
    for (const edge of edges) {
      if (endMatches(edge.dataset.source, source) && endMatches(edge.dataset.target, target)) {
        edge.classList.add("taken");
      }
    }
  }
  svg.dataset.active = marked.active.join(",");
  svg.dataset.waiting = marked.waiting.join(",");
}
