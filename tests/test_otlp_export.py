"""End to end over OTLP: a real ``phasegraph serve`` exports its spans and metrics to a loopback receiver.

One server starts for the module, exporting to an ``OtlpReceiver`` (``tests/otlp_receiver.py``, a
real OTLP/HTTP endpoint decoding with ``opentelemetry-proto``) as an operator would run it (content
off): each protocol's demo runs once through the HTTP API, a run is paused and resumed, a run fails.
The tests read what arrived: one root per run, a child per node of the protocol's graph, ``chat``
and ``execute_tool`` spans beneath the nodes, the run's events as span events, a resumed run's link
to its first root, and the metrics. Content capture (``PHASEGRAPH_OTEL_CAPTURE_CONTENT=true``, a
secret in the prompt) is read the same way from a run in this process, exported gzip-compressed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run as run_turn
from phasegraph.nodes import telemetry
from phasegraph.nodes.events import Event, Paused, ToolResultEvent
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import provider_settings, run_settings
from phasegraph.nodes.telemetry.handler import SHOWN, UNNOTED
from phasegraph.nodes.trace import MemoryTraceStore
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.server.conftest import Server, read_sse, stream

PROTOCOLS = ("triggered_phase", "goal_pursuit", "xml_contract", "agent_network", "planner", "unified")
MESSAGE = "Summarise the roadmap in the docs folder."
#: An OpenAI key the capturing run is configured with: the redactor masks it wherever it appears.
SECRET = "sk-test-OTLP-0123456789abcdefSECRET"
#: Exports every 100 ms (spans) and 500 ms (metrics), so a test waits for fractions of a second.
QUICK_EXPORTS = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "500"}
#: Longest wait for what a run exported to arrive.
ARRIVAL_SECONDS = 20
#: Attributes that carry a run's content (prompts, answers, tool arguments and results).
CONTENT_ATTRIBUTES = frozenset(
    {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.tool.call.arguments",
     "gen_ai.tool.call.result"}
)  # fmt: skip
#: Events the server itself writes (not a node): they are no span events.
SERVER_EVENTS = frozenset({"paused", "resumed", "cancelled"})


@dataclass
class Run:
    """One request made through the HTTP API, and every event it streamed."""

    protocol: str
    request_id: str
    events: list[Event]

    def tool_results(self) -> list[ToolResultEvent]:
        return [e for e in self.events if isinstance(e, ToolResultEvent)]


@dataclass
class Exported:
    """The runs made (through the server, or in this process) and what their receiver got."""

    receiver: OtlpReceiver
    runs: dict[str, Run]

    def roots(self, request_id: str) -> list[ReceivedSpan]:
        """The root spans of a request (one per run of it), in the order they started."""
        found = [s for s in self.receiver.spans() if not s.parent_span_id
                 and s.attributes.get("phasegraph.request_id") == request_id]  # fmt: skip
        return sorted(found, key=lambda s: s.start_ns)

    def root(self, request_id: str) -> ReceivedSpan:
        (root,) = self.roots(request_id)
        return root

    def trace(self, root: ReceivedSpan) -> list[ReceivedSpan]:
        """Every span of the root's trace, in the order they started."""
        return sorted(
            (s for s in self.receiver.spans() if s.trace_id == root.trace_id), key=lambda s: s.start_ns
        )


def _server(folder: Path, receiver: OtlpReceiver, **env: str) -> Server:
    base = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_OTEL_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        **QUICK_EXPORTS,
    }
    return Server(env={**base, **env}, log=folder / "server.log")


def _short_script(folder: Path) -> str:
    """A model that asks for one tool, then has nothing left to say: the run fails at its second call."""
    path = folder / "short.json"
    call = {"name": "list_files", "args": {"path": "docs"}}
    path.write_text(json.dumps({"turns": [{"content": "Looking.", "tool_calls": [call]}]}), encoding="utf-8")
    return f"scripted:{path}"


def _run(client: httpx.Client, protocol: str, request_id: str, message: str = MESSAGE, **body: Any) -> Run:
    events = stream(client, "POST", f"/api/runs/{protocol}/stream",
                    json={"message": message, "requestId": request_id, **body})  # fmt: skip
    return Run(protocol, request_id, events)


def _paused_then_resumed(client: httpx.Client, request_id: str) -> Run:
    """triggered_phase paused through the API as it starts (it stops after its first tool), then resumed."""
    body = {"message": MESSAGE, "requestId": request_id}
    with client.stream("POST", "/api/runs/triggered_phase/stream", json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert client.post(f"/api/requests/{request_id}/pause").status_code == 202
        first = [event for _, _, event in read_sse(response)]
    assert isinstance(first[-1], Paused) and first[-1].reason == "requested"
    second = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
    assert second[-1].type == "final"
    return Run("triggered_phase", request_id, first + second)


def _arrived(exported: Exported, expected_roots: dict[str, int]) -> None:
    """Until every request's roots arrived (or nothing more arrives: a root that never ends never will),
    and the metrics count every run that ended (each ended root is one ``phasegraph.runs.ended``)."""
    receiver = exported.receiver
    receiver.wait_for(
        lambda: (
            all(len(exported.roots(r)) >= n for r, n in expected_roots.items()) or receiver.quiet_for(2.0)
        ),
        ARRIVAL_SECONDS,
        "the runs' root spans",
    )
    roots = sum(len(exported.roots(r)) for r in expected_roots)
    receiver.wait_for(
        lambda: sum(p.value for p in receiver.metric("phasegraph.runs.ended")) >= roots,
        ARRIVAL_SECONDS,
        f"phasegraph.runs.ended counting the {roots} roots",
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """The server as an operator runs it (content off): every protocol's demo, a paused run, a failed run."""
    folder = tmp_path_factory.mktemp("otlp")
    with otlp_receiver() as receiver:
        short = _short_script(folder)
        server = _server(folder, receiver, PHASEGRAPH_ALLOWED_MODELS=short).start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                runs = {p: _run(client, p, f"otlp-{p}") for p in PROTOCOLS}
                runs["paused"] = _paused_then_resumed(client, "otlp-paused")
                runs["failed"] = _run(client, "triggered_phase", "otlp-failed", model=short)
            exported = Exported(receiver, runs)
            _arrived(exported, {r.request_id: 2 if key == "paused" else 1 for key, r in runs.items()})
            yield exported
        finally:
            server.stop()


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """triggered_phase run in this process with content captured, a secret in its prompt.

    In process, not on a second server (whose start alone takes seconds): phasegraph's tracer exports
    through the SDK's OTLP exporter, gzip-compressed, to a receiver of its own.
    """
    workspace = tmp_path_factory.mktemp("captured") / "workspace"
    shutil.copytree(DEMO_WORKSPACE, workspace)
    message = f"{MESSAGE} My key is {SECRET}, keep it safe."
    with otlp_receiver() as receiver, pytest.MonkeyPatch.context() as env:
        env.setenv("PHASEGRAPH_OTEL_CAPTURE_CONTENT", "true")
        env.setenv("OPENAI_API_KEY", SECRET)
        _clear_settings()
        exporter = OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces", compression=Compression.Gzip)
        telemetry.use_exporter(exporter)
        try:
            result = asyncio.run(run_turn("triggered_phase", message, request_id="otlp-captured",
                                          workspace=str(workspace), traces=MemoryTraceStore()))  # fmt: skip
        finally:
            telemetry.use_exporter(None)  # ends the provider: every span is exported by now
            env.undo()
            _clear_settings()
    assert result.final is not None, result.error
    yield Exported(receiver, {"triggered_phase": Run("triggered_phase", "otlp-captured", result.events)})


def _clear_settings() -> None:
    provider_settings.cache_clear()
    run_settings.cache_clear()
    redactor.cache_clear()


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def _node_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if "phasegraph.node" in s.attributes]


def _subgraph_nodes(protocol: str) -> dict[str, set[str]]:
    """A protocol's nodes that are subgraphs, and the nodes inside each (planner: execute_plan's)."""
    inner: dict[str, set[str]] = {}
    for name in get_protocol(protocol).compile().get_graph(xray=True).nodes:
        outer, _, node = name.partition(":")
        if node:
            inner.setdefault(outer, set()).add(node)
    return inner


def _demo_model_calls(protocol: str) -> int:
    script = get_protocol(protocol).context_schema.DEMO_SCRIPT
    return len(json.loads(Path(script).read_text(encoding="utf-8"))["turns"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_run_is_one_root_span_naming_its_request_and_outcome(served: Exported, protocol: str) -> None:
    run = served.runs[protocol]
    assert run.events[-1].type == "final"
    roots = served.roots(run.request_id)
    assert len(roots) == 1, [r.name for r in roots]
    root = roots[0]
    attributes = root.attributes
    if protocol == "agent_network":
        assert root.name == "invoke_workflow research"
        assert attributes["gen_ai.operation.name"] == "invoke_workflow"
        assert attributes["gen_ai.workflow.name"] == "research"
    else:
        assert root.name == f"invoke_agent {protocol}"
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.agent.name"] == protocol
    assert attributes["phasegraph.request_id"] == run.request_id
    assert attributes["phasegraph.protocol"] == protocol
    assert attributes["gen_ai.conversation.id"] == run.request_id  # the request is its own thread
    assert attributes["phasegraph.outcome"] == "completed"
    assert attributes["phasegraph.resumed"] is False and root.links == []
    assert root.status != "ERROR"
    assert root.scope == "phasegraph" and root.resource["service.name"] == "phasegraph"
    # every span of the trace ran within the root's time
    for span in served.trace(root):
        assert root.start_ns <= span.start_ns <= span.end_ns <= root.end_ns, span.name


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_roots_children_are_the_nodes_of_the_protocols_graph(served: Exported, protocol: str) -> None:
    root = served.root(served.runs[protocol].request_id)
    spans = served.trace(root)
    nodes, inner = set(get_protocol(protocol).node_names()), _subgraph_nodes(protocol)
    children = _children(spans, root)
    assert children and all("phasegraph.node" in child.attributes for child in children)
    for span in _node_spans(spans):
        node = span.attributes["phasegraph.node"]
        parent = next(s for s in spans if s.span_id == span.parent_span_id)
        if parent.span_id == root.span_id:
            assert node in nodes
        else:  # a node of a subgraph, under the span of the node that runs the subgraph
            assert parent.attributes["phasegraph.node"] in inner and node in inner[parent.name]
        if protocol == "agent_network" and node == "run_agent_step":  # a step is its agent's invocation
            assert span.name == f"invoke_agent {span.attributes['gen_ai.agent.name']}"
        else:
            assert span.name == node
        assert isinstance(span.attributes["phasegraph.graph_step"], int)
    # nothing of the trace hangs outside the root
    known = {s.span_id for s in spans}
    assert all(s.parent_span_id in known for s in spans if s is not root)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_model_calls_are_client_spans_under_nodes_with_token_usage(served: Exported, protocol: str) -> None:
    spans = served.trace(served.root(served.runs[protocol].request_id))
    by_id = {s.span_id: s for s in spans}
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == _demo_model_calls(protocol)  # every call of the demo's script, once
    for chat in chats:
        model = chat.attributes["gen_ai.request.model"]
        assert chat.name == f"chat {model}" and chat.kind == "CLIENT"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert "phasegraph.node" in by_id[chat.parent_span_id].attributes
        assert chat.attributes["phasegraph.prompt.chars"] > 0
    used = [c for c in chats if "gen_ai.usage.input_tokens" in c.attributes]
    assert used and all(
        c.attributes["gen_ai.usage.input_tokens"] > 0 and c.attributes["gen_ai.usage.output_tokens"] > 0
        for c in used
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_calls_are_spans_under_nodes_matching_the_runs_tool_results(
    served: Exported, protocol: str
) -> None:
    run = served.runs[protocol]
    spans = served.trace(served.root(run.request_id))
    by_id = {s.span_id: s for s in spans}
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    for tool in tools:
        assert tool.name == f"execute_tool {tool.attributes['gen_ai.tool.name']}"
        assert "phasegraph.node" in by_id[tool.parent_span_id].attributes
        assert tool.status != "ERROR"
    results = run.tool_results()
    assert results and all(r.status == "ok" for r in results)
    called = sorted(
        (t.attributes["gen_ai.tool.name"], t.attributes.get("gen_ai.tool.call.id")) for t in tools
    )
    assert called == sorted((r.name, r.call_id) for r in results)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_events_nodes_emit_are_events_of_their_node_spans(served: Exported, protocol: str) -> None:
    run = served.runs[protocol]
    spans = served.trace(served.root(run.request_id))
    noted = Counter(f"phasegraph.{e.type}" for e in run.events if e.type not in UNNOTED | SERVER_EVENTS)
    on_nodes = Counter(
        name for s in _node_spans(spans) for name in s.event_names() if name.startswith("phasegraph.")
    )
    assert on_nodes == noted
    final = next(s for s in spans if "phasegraph.final" in s.event_names())
    assert final.attributes["phasegraph.node"] in get_protocol(protocol).node_names()


def test_a_refused_duplicate_is_an_event_on_the_refuse_duplicate_span(served: Exported) -> None:
    run = served.runs["triggered_phase"]
    (duplicate,) = [e for e in run.events if e.type == "duplicate_tool_call"]
    spans = served.trace(served.root(run.request_id))
    (refusing,) = [s for s in spans if s.name == "refuse_duplicate"]
    (event,) = [e for e in refusing.events if e.name == "phasegraph.duplicate_tool_call"]
    assert event.attributes["phasegraph.name"] == duplicate.name
    assert "phasegraph.signature" not in event.attributes  # the call's arguments: content
    assert event.attributes["phasegraph.attempts"] == duplicate.attempts
    assert "phasegraph.args" not in event.attributes  # content: off by default


def test_a_resumed_run_is_a_second_root_linked_to_the_paused_first(served: Exported) -> None:
    run = served.runs["paused"]
    first, second = served.roots(run.request_id)
    assert first.trace_id != second.trace_id
    assert first.attributes["phasegraph.outcome"] == "paused"
    assert first.attributes["phasegraph.resumed"] is False and first.links == []
    assert second.attributes["phasegraph.outcome"] == "completed"
    assert second.attributes["phasegraph.resumed"] is True
    (link,) = second.links
    assert (link.trace_id, link.span_id) == (first.trace_id, first.span_id)
    assert link.attributes == {"phasegraph.link": "first_run"}
    assert first.attributes["gen_ai.conversation.id"] == second.attributes["gen_ai.conversation.id"]
    # the first run's tool ran in its trace, the rest in the second's
    tools = [
        [s.name for s in served.trace(root) if s.name.startswith("execute_tool")] for root in (first, second)
    ]
    assert tools == [["execute_tool list_files"], ["execute_tool read_file"]]
    assert [r.name for r in run.tool_results()] == ["list_files", "read_file"]


def test_a_failed_run_ends_its_root_with_an_error(served: Exported) -> None:
    run = served.runs["failed"]
    error = run.events[-1]
    assert error.type == "error"
    root = served.root(run.request_id)
    assert root.attributes["phasegraph.outcome"] == "failed"
    assert root.status == "ERROR" and root.attributes["error.type"] == error.kind
    assert "phasegraph.error" in root.event_names()


def test_prompt_and_tool_content_stay_out_of_spans_by_default(served: Exported) -> None:
    spans = served.receiver.spans()
    assert spans
    for span in spans:
        for attributes in (span.attributes, *(e.attributes for e in span.events)):
            assert not CONTENT_ATTRIBUTES & set(attributes), (span.name, sorted(attributes))
        for event in span.events:  # an event's fields beyond ids, kinds and counts are content
            fields = {k.removeprefix("phasegraph.") for k in event.attributes if k.startswith("phasegraph.")}
            assert fields <= SHOWN, (span.name, event.name, sorted(fields - SHOWN))
            texts = [v for v in attributes.values() if isinstance(v, str)]
            assert not any(MESSAGE in text or "Milestone" in text for text in texts), span.name


def test_captured_content_is_on_spans_with_secrets_masked(captured: Exported) -> None:
    spans = captured.trace(captured.root("otlp-captured"))
    first_chat = next(s for s in spans if s.name.startswith("chat "))
    sent = json.loads(first_chat.attributes["gen_ai.input.messages"])
    assert sent[-1] == {"role": "user", "content": f"{MESSAGE} My key is [REDACTED], keep it safe."}
    answered = [s for s in spans if "gen_ai.output.messages" in s.attributes]
    assert (
        answered and "roadmap" in json.loads(answered[-1].attributes["gen_ai.output.messages"])[0]["content"]
    )
    listed = next(s for s in spans if s.name == "execute_tool list_files")
    assert json.loads(listed.attributes["gen_ai.tool.call.arguments"]) == {"path": "docs"}
    assert "docs/roadmap.md" in listed.attributes["gen_ai.tool.call.result"]
    refused = next(e for s in spans for e in s.events if e.name == "phasegraph.duplicate_tool_call")
    (duplicate,) = [e for e in captured.runs["triggered_phase"].events if e.type == "duplicate_tool_call"]
    assert json.loads(refused.attributes["phasegraph.args"]) == duplicate.args
    # the secret is nowhere: no span or event attribute holds it, or a piece of it
    everything = json.dumps(
        [[s.attributes, [e.attributes for e in s.events]] for s in captured.receiver.spans()]
    )
    assert SECRET not in everything and SECRET[:12] not in everything and SECRET[-12:] not in everything
    # the exporter compressed every request, and the receiver read them all
    assert set(captured.receiver.requests()) == {("/v1/traces", "application/x-protobuf", "gzip")}


def test_captured_model_answers_have_the_assistant_role(captured: Exported) -> None:
    spans = captured.trace(captured.root("otlp-captured"))
    answers = [json.loads(s.attributes["gen_ai.output.messages"]) for s in spans
               if "gen_ai.output.messages" in s.attributes]  # fmt: skip
    assert answers and all(answer[0]["role"] == "assistant" for answer in answers), answers


def test_the_server_exports_protobuf_to_the_otlp_routes(served: Exported) -> None:
    requests = served.receiver.requests()
    assert {path for path, _, _ in requests} == {"/v1/traces", "/v1/metrics"}
    assert {(kind, encoding) for _, kind, encoding in requests} == {("application/x-protobuf", "")}


def test_run_and_model_metrics_arrive_over_otlp(served: Exported) -> None:
    receiver, runs = served.receiver, served.runs
    started = {"triggered_phase": 3, **{p: 1 for p in PROTOCOLS[1:]}}  # the demo, the paused run, the failed

    def counts() -> dict[tuple[str, bool], float]:
        return {(p.attributes["phasegraph.protocol"], p.attributes["phasegraph.resumed"]): p.value
                for p in receiver.metric("phasegraph.runs.started")}  # fmt: skip

    wanted = {**{(p, False): n for p, n in started.items()}, ("triggered_phase", True): 1}
    receiver.wait_for(lambda: counts() == wanted, ARRIVAL_SECONDS, f"phasegraph.runs.started = {wanted}")
    assert receiver.unit("phasegraph.run.duration") == "s"
    assert receiver.unit("gen_ai.client.token.usage") == "{token}"

    # tool calls by protocol, tool and status: what the runs' tool results say
    results = Counter((run.protocol, r.name, r.status) for run in runs.values() for r in run.tool_results())
    tool_calls = Counter[tuple[str, str, str]]()
    for point in receiver.metric("phasegraph.tool.calls"):
        a = point.attributes
        tool_calls[(a["phasegraph.protocol"], a["gen_ai.tool.name"], a["phasegraph.status"])] += int(
            point.value
        )
    assert tool_calls == results
    (duplicates,) = receiver.metric("phasegraph.tool.duplicates_refused")
    assert duplicates.attributes["phasegraph.protocol"] == "triggered_phase"
    assert duplicates.value == sum(
        e.type == "duplicate_tool_call" for run in runs.values() for e in run.events
    )

    # tokens: the histogram's sums are the chat spans' usage, by type; every protocol's calls are counted
    chats = [s for s in receiver.spans() if s.attributes.get("gen_ai.operation.name") == "chat"]
    spent = {kind: sum(s.attributes.get(f"gen_ai.usage.{kind}_tokens", 0) for s in chats)
             for kind in ("input", "output")}  # fmt: skip
    tokens = receiver.metric("gen_ai.client.token.usage")
    assert {kind: sum(p.total or 0 for p in tokens if p.attributes["gen_ai.token.type"] == kind)
            for kind in ("input", "output")} == spent  # fmt: skip
    assert {p.attributes["phasegraph.protocol"] for p in tokens} == set(PROTOCOLS)
    assert all(p.attributes["gen_ai.request.model"] for p in tokens)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_runs_ended_counts_each_demo_as_completed(served: Exported, protocol: str) -> None:
    receiver = served.receiver
    ended = {(p.attributes["phasegraph.protocol"], p.attributes["phasegraph.outcome"]): p.value
             for p in receiver.metric("phasegraph.runs.ended")}  # fmt: skip
    completed = 2 if protocol == "triggered_phase" else 1  # triggered_phase: its demo and the resumed run
    assert ended.get((protocol, "completed")) == completed, ended


def test_the_receiver_refuses_what_a_collector_would_refuse() -> None:
    with otlp_receiver() as receiver, httpx.Client(base_url=receiver.endpoint, timeout=5) as client:
        protobuf = {"Content-Type": "application/x-protobuf"}
        assert client.post("/v1/logs", content=b"", headers=protobuf).status_code == 404
        assert client.get("/v1/traces").status_code == 405
        assert client.post("/v1/traces", content=b"\xff\xff", headers=protobuf).status_code == 400
        assert (
            client.post("/v1/traces", content=b"", headers={"Content-Type": "text/plain"}).status_code == 415
        )
        gzip_header = {**protobuf, "Content-Encoding": "gzip"}
        assert client.post("/v1/traces", content=b"not gzip", headers=gzip_header).status_code == 400
        empty = client.post(
            "/v1/traces", content=ExportTraceServiceRequest().SerializeToString(), headers=protobuf
        )
        assert empty.status_code == 200
        assert ExportTraceServiceResponse.FromString(empty.content) == ExportTraceServiceResponse()
        assert receiver.spans() == []
