"""The page's graph drawing (static/graph.js) in a real headless Chromium against a real server: every
protocol's LangGraph graph is drawn with all its nodes and edges (labels, loops, conditional routes),
boxes that do not overlap, the planner's subgraph as a cluster when expanded and one node when not, a
run's marks that replace each other, and clicks that name the node. A screenshot per protocol is saved
(into $PHASEGRAPH_SCREENSHOTS when set) for a person to look at."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page

from phasegraph.graphs.registry import PROTOCOLS
from tests.browser import needs_chromium, open_page
from tests.server.conftest import Server, demo_server

pytestmark = needs_chromium

TERMINALS = {"__start__", "__end__"}
#: Some routes each protocol's drawing must show as labels (the loops among them).
ROUTES = {
    "triggered_phase": {"duplicate", "cycles_spent", "retry"},
    "goal_pursuit": {"refine", "next_round", "deferred"},
    "agent_network": {"refused", "handoff"},
    "xml_contract": {"refused_twice", "next_step"},
    "planner": {"approved", "next_step", "auto_execute"},
}
SUBGRAPH = {"execute_plan:start_plan", "execute_plan:run_step", "execute_plan:finish_plan"}

# Draws a protocol's graph into a fresh div and reports what the drawing holds, as the browser sees it.
DRAW = """async ([protocol, expand]) => {
  const m = await import("/static/graph.js");
  document.querySelectorAll(".test-graph").forEach((old) => old.remove());
  const div = document.createElement("div");
  div.className = "graph-view test-graph";
  div.style.cssText = "position:absolute;left:0;top:0;width:820px;z-index:50";
  document.body.appendChild(div);
  const graph = await m.loadGraph(protocol, expand);
  window.clicked = [];
  const svg = m.drawGraph(div, graph, { onNode: (id) => window.clicked.push(id) });
  const box = (element) => {
    const r = element.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const markers = new Set([...svg.querySelectorAll("defs marker")].map((marker) => marker.id));
  return {
    json: JSON.parse(JSON.stringify(graph)),
    picker: m.graphNodes(graph),
    svg: { testid: svg.dataset.testid, protocol: svg.dataset.protocol, viewBox: svg.getAttribute("viewBox"),
      inContainer: div.firstElementChild === svg && div.children.length === 1 },
    nodes: [...svg.querySelectorAll("[data-testid=graph-node]")].map((node) => ({
      id: node.dataset.node,
      terminal: node.classList.contains("terminal"),
      text: node.querySelector("text").textContent,
      title: node.querySelector(":scope > title")?.textContent,
      cluster: node.closest(".gcluster")?.dataset.subgraph ?? null,
      box: box(node.querySelector("rect")),
    })),
    edges: [...svg.querySelectorAll("[data-testid=graph-edge]")].map((edge) => {
      const path = edge.querySelector("path");
      const marker = /^url\\(["']?#([^"')]+)/.exec(path.getAttribute("marker-end") || "");
      return {
        source: edge.dataset.source,
        target: edge.dataset.target,
        label: edge.dataset.label ?? null,
        conditional: edge.dataset.conditional === "true",
        shown: edge.querySelector(".glabel")?.textContent ?? null,
        labelBox: edge.querySelector(".glabel") ? box(edge.querySelector(".glabel")) : null,
        dashed: getComputedStyle(path).strokeDasharray !== "none",
        length: path.getTotalLength(),
        marker: marker !== null && markers.has(marker[1]),
      };
    }),
    clusters: [...svg.querySelectorAll("[data-testid=graph-cluster]")].map((cluster) => ({
      id: cluster.dataset.subgraph,
      label: cluster.querySelector(".gcluster-label").textContent,
      box: box(cluster.querySelector(":scope > rect")),
    })),
  };
}"""

# Marks a run on the drawn graph and reads back the classes and the svg's data attributes.
MARK = """(marks) => {
  return import("/static/graph.js").then((m) => {
    const div = document.querySelector(".test-graph");
    m.markGraph(div, marks);
    const svg = div.querySelector("svg");
    const classed = (name) => [...svg.querySelectorAll(`.gnode.${name}, .gcluster.${name}`)].map(
      (element) => element.dataset.node ?? `cluster:${element.dataset.subgraph}`).sort();
    const shown = (selector) => [...svg.querySelectorAll(selector)]
      .filter((dot) => getComputedStyle(dot).display !== "none")
      .map((dot) => dot.closest("[data-node], [data-subgraph]").dataset.node ?? "cluster").sort();
    return {
      active: classed("active"), visited: classed("visited"), waiting: classed("waiting"),
      breakBefore: classed("break-before"), breakAfter: classed("break-after"),
      dotsBefore: shown(".gbreak-before"), dotsAfter: shown(".gbreak-after"),
      taken: [...svg.querySelectorAll(".gedge.taken")]
        .map((edge) => `${edge.dataset.source}>${edge.dataset.target}`).sort(),
      dataActive: svg.dataset.active, dataWaiting: svg.dataset.waiting,
    };
  });
}"""


def screenshot_dir(tmp_path: Path) -> Path:
    """Where the drawings' screenshots go: $PHASEGRAPH_SCREENSHOTS when set, else the test's tmp_path."""
    folder = (
        Path(os.environ["PHASEGRAPH_SCREENSHOTS"]) if os.environ.get("PHASEGRAPH_SCREENSHOTS") else tmp_path
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with demo_server(tmp_path_factory, "browser-graph") as started:
        yield started


@pytest.fixture(scope="module")
def page(server: Server) -> Iterator[Page]:
    with open_page() as opened:
        opened.goto(server.url)
        yield opened


def served_graph(server: Server, protocol: str, xray: int) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/assistants/{protocol}/graph", params={"xray": xray}, timeout=30)
    assert response.status_code == 200, response.text
    graph: dict[str, Any] = response.json()
    return graph


def draw(page: Page, protocol: str, expand: bool) -> dict[str, Any]:
    drawn: dict[str, Any] = page.evaluate(DRAW, [protocol, expand])
    return drawn


def overlap(a: list[float], b: list[float]) -> bool:
    """Whether two [left, top, right, bottom] boxes share more than a hairline."""
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


def test_protocols_listed_by_the_server_are_the_registrys(server: Server) -> None:
    listed = [item["id"] for item in httpx.get(f"{server.url}/api/protocols", timeout=30).json()]
    assert sorted(listed) == sorted(PROTOCOLS)


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_each_protocols_graph_is_drawn_whole_and_readable(
    page: Page, server: Server, protocol: str, tmp_path: Path
) -> None:
    served = served_graph(server, protocol, 1)
    drawn = draw(page, protocol, True)
    page.locator(".test-graph").screenshot(
        path=str(screenshot_dir(tmp_path) / f"graph-{protocol}.png"), animations="disabled"
    )

    assert drawn["json"] == served  # loadGraph hands back the server's JSON as it is
    svg = drawn["svg"]
    assert svg["testid"] == "graph" and svg["protocol"] == protocol and svg["inContainer"], svg
    assert all(float(size) > 100 for size in svg["viewBox"].split()[2:]), svg  # sized to the layout
    ids = [node["id"] for node in served["nodes"]]
    assert drawn["picker"] == [i for i in ids if i not in TERMINALS]

    # Every node once, each with its full id as tooltip; start/end as small pills, others by their name.
    nodes = {node["id"]: node for node in drawn["nodes"]}
    assert sorted(nodes) == sorted(ids) and len(drawn["nodes"]) == len(ids)
    for node_id, node in nodes.items():
        assert node["title"] == node_id
        assert node["terminal"] == (node_id in TERMINALS)
        expected = {"__start__": "start", "__end__": "end"}.get(node_id, node_id.rpartition(":")[2])
        assert node["text"] == expected

    # Every edge, with its route label shown, dashed when conditional, ending in this svg's arrowhead.
    key = ("source", "target", "label", "conditional")
    served_edges = Counter(
        (e["source"], e["target"], e.get("data"), bool(e.get("conditional"))) for e in served["edges"]
    )
    assert Counter(tuple(edge[k] for k in key) for edge in drawn["edges"]) == served_edges
    for edge in drawn["edges"]:
        assert edge["shown"] == edge["label"], edge
        assert edge["dashed"] == edge["conditional"], edge
        assert edge["marker"] and edge["length"] > 10, edge  # loops too: a real curve, not a point
    labels = {edge["label"] for edge in drawn["edges"]}
    assert ROUTES.get(protocol, set()) <= labels

    # No two boxes overlap, no route label sits on a box, and no two labels on each other.
    label_boxes = [(edge["label"], edge["labelBox"]) for edge in drawn["edges"] if edge["labelBox"]]
    for i, (name, a) in enumerate(label_boxes):
        for other, b in label_boxes[i + 1 :]:
            assert not overlap(a, b), (name, other)
    boxes = [node["box"] for node in drawn["nodes"]]
    assert all(box[2] - box[0] > 20 and box[3] - box[1] > 10 for box in boxes), boxes
    for i, a in enumerate(drawn["nodes"]):
        for b in drawn["nodes"][i + 1 :]:
            assert not overlap(a["box"], b["box"]), (a["id"], b["id"])
        for edge in drawn["edges"]:
            if edge["labelBox"]:
                assert not overlap(a["box"], edge["labelBox"]), (a["id"], edge["label"])


def test_planner_subgraph_is_a_cluster_when_expanded_and_one_node_when_not(page: Page) -> None:
    expanded = draw(page, "planner", True)
    [cluster] = expanded["clusters"]
    assert cluster["id"] == "execute_plan" and cluster["label"] == "execute_plan"
    inside = {node["id"] for node in expanded["nodes"] if node["cluster"] == "execute_plan"}
    assert inside == SUBGRAPH
    left, top, right, bottom = cluster["box"]
    for node in expanded["nodes"]:
        x0, y0, x1, y1 = node["box"]
        within = left <= x0 and top <= y0 and x1 <= right and y1 <= bottom
        assert within == (node["id"] in SUBGRAPH), node

    collapsed = draw(page, "planner", False)
    ids = {node["id"] for node in collapsed["nodes"]}
    assert collapsed["clusters"] == [] and "execute_plan" in ids and not ids & SUBGRAPH
    assert "execute_plan" in collapsed["picker"] and not set(collapsed["picker"]) & SUBGRAPH


def test_marks_replace_each_other_and_name_the_cluster_while_expanded(page: Page, tmp_path: Path) -> None:
    draw(page, "planner", True)
    first = page.evaluate(
        MARK,
        {"active": ["call_planner"], "visited": ["start_turn"], "taken": [["start_turn", "call_planner"]]},
    )
    assert first["active"] == ["call_planner"] and first["dataActive"] == "call_planner"
    assert first["visited"] == ["start_turn"] and first["taken"] == ["start_turn>call_planner"]
    # graph.css lights it (after a short transition): filled with the accent colour, unlike the others.
    fill = "(selector) => getComputedStyle(document.querySelector(`.test-graph ${selector} > rect`)).fill"
    page.wait_for_function(
        f"() => ({fill})(\"[data-node='call_planner']\") === 'rgb(42, 98, 201)'", timeout=5_000
    )
    assert page.evaluate(f"({fill})(\"[data-node='run_tools']\")") == "rgb(248, 249, 251)"

    second = page.evaluate(MARK, {
        "active": ["run_tools", "no_such_node"],
        "visited": ["start_turn", "call_planner"],
        "waiting": ["review_plan"],
        "breakBefore": ["draft_plan"],
        "breakAfter": ["run_tools", "execute_plan"],
        "taken": [["call_planner", "run_tools"], ["review_plan", "execute_plan"]],
    })  # fmt: skip
    page.locator(".test-graph").screenshot(
        path=str(screenshot_dir(tmp_path) / "graph-planner-marked.png"), animations="disabled"
    )
    assert second["active"] == ["run_tools"] and second["dataActive"] == "run_tools"  # the first lost it
    assert second["visited"] == ["call_planner", "start_turn"]
    assert second["waiting"] == ["review_plan"] and second["dataWaiting"] == "review_plan"
    assert second["breakBefore"] == ["draft_plan"] == second["dotsBefore"]
    assert second["breakAfter"] == ["cluster:execute_plan", "run_tools"]
    assert second["dotsAfter"] == ["cluster", "run_tools"]  # the dots show only where a breakpoint is
    # An edge into the collapsed name reaches the subgraph's entry while expanded.
    assert second["taken"] == ["call_planner>run_tools", "review_plan>execute_plan:start_plan"]

    cluster = page.evaluate(MARK, {"active": ["execute_plan"]})
    assert cluster["active"] == ["cluster:execute_plan"] and cluster["dataActive"] == "execute_plan"
    assert cluster["visited"] == cluster["waiting"] == cluster["taken"] == cluster["breakAfter"] == []

    cleared = page.evaluate(MARK, {})
    assert cleared["active"] == [] and cleared["dataActive"] == "" and cleared["dataWaiting"] == ""

    draw(page, "planner", False)
    collapsed = page.evaluate(MARK, {"active": ["execute_plan"], "taken": [["review_plan", "execute_plan"]]})
    assert collapsed["active"] == ["execute_plan"] and collapsed["taken"] == ["review_plan>execute_plan"]


def test_clicking_a_node_names_it(page: Page) -> None:
    draw(page, "planner", True)
    svg = page.locator(".test-graph svg")
    svg.locator("[data-node='run_tools']").click()
    svg.locator("[data-node='execute_plan:run_step']").click()
    svg.locator("[data-node='__start__']").click()  # start and end are not nodes to pick
    svg.locator("[data-node='call_planner']").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("window.clicked") == ["run_tools", "execute_plan:run_step", "call_planner"]
