"""Row 6, agent_network: the step-10 prompt with segment injection against naive full-history injection.

A scripted run of a three-agent network (lead, researcher, writer) that read workspace documents of 1-3 KB
and hand control around: twelve decisions, four handoffs, the lead in control twice. The prompt each step
sends carries the tool outputs of the agent's current control epoch only, plus a log summary cut to
``summary_chars``; the anchor is the prompt that step would have sent with every tool output of the run and
the whole log (``build_prompt(..., full=True)``), built from the checkpointed state the step decided on.
Both are counted the way ``prompt_chars`` counts a prompt: the system prompt and the ask to decide.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from bench.harness import Figure, Row, Side
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.agent_network.agent_step import DECIDE
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.prompts import build_prompt
from phasegraph.nodes.events import AgentStep, Event
from phasegraph.nodes.scripted import Script, ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.networks import NetworkSnapshot

KEY = "6"
#: The step the issue's acceptance measures.
STEP = 10
ANCHOR = "naive full-history injection"
MEASURED = "segment injection (sent)"
HEADLINE = f"step-{STEP} prompt"
MESSAGE = (
    "Write the post-incident review of the April checkout outages: what happened, who owns the follow-ups, "
    "and the latency figures, in our post-mortem template."
)
#: Ends every generated document, past the 100 characters a log preview keeps: only a full output has it.
MARKER = "FULL-OUTPUT-MARKER"

NETWORK: dict[str, Any] = {
    "name": "incident-review",
    "description": "A lead, a researcher and a writer turn incident notes into a post-incident review.",
    "agents": [
        {
            "key": "lead",
            "is_default": True,
            "description": "Scopes the review and gathers owners and figures.",
            "prompt_template": "You are {agent_key}, who leads post-incident reviews. Read what the review "
            "needs from the workspace, then hand the work on.\nYour tools:\n{tools}\nYou may hand control "
            "to:\n{routes}\n\n{tool_history}",
            "tools": [{"tool": "read_file"}],
            "routes": ["researcher", "writer"],
        },
        {
            "key": "researcher",
            "description": "Reads incident notes and extracts the timeline.",
            "prompt_template": "You are {agent_key}. Reconstruct each incident's timeline from the notes in "
            "the workspace.\nYour tools:\n{tools}\nHand your findings on to:\n{routes}\n\n{tool_history}",
            "tools": [{"tool": "read_file"}],
            "routes": ["writer", "lead"],
        },
        {
            "key": "writer",
            "description": "Writes the review in the house template and style.",
            "prompt_template": "You are {agent_key}. Write the review from what the other agents found, "
            "in the house template and style. If facts are missing, hand control back:\n{routes}\n"
            "Your tools:\n{tools}\n\n{tool_history}",
            "tools": [{"tool": "read_file"}],
            "routes": ["lead", "researcher"],
            "allow_respond": True,
        },
    ],
}

#: Workspace documents and their sizes (characters before the marker line).
DOCUMENTS: dict[str, int] = {
    "docs/brief.md": 1400,
    "research/incident-0412.md": 2600,
    "research/incident-0419.md": 2300,
    "templates/postmortem.md": 1600,
    "research/latency-metrics.md": 2100,
    "docs/owners.md": 1300,
    "docs/style-guide.md": 1800,
}


def _decide(action: str, reasoning: str, **details: Any) -> dict[str, Any]:
    args = {"action": action, "action_reasoning": reasoning, "action_details": details}
    return {"content": "", "tool_calls": [{"name": "AgentDecision", "args": args}]}


def _read(path: str, why: str) -> dict[str, Any]:
    return _decide("USE_TOOL", why, tool="read_file", params={"path": path})


def _route(target: str, note: str) -> dict[str, Any]:
    return _decide("ROUTE_TO_AGENT", f"{target} takes it from here", target_agent=target, message=note)


#: The model's decisions: (agent, control epoch, turn); step n is the n-th.
DECISIONS: list[tuple[str, int, dict[str, Any]]] = [
    ("lead", 1, _read("docs/brief.md", "Start from the review brief.")),
    ("lead", 1, _route("researcher", "Two checkout outages, 12 and 19 April: build the timelines.")),
    ("researcher", 2, _read("research/incident-0412.md", "The first outage's notes.")),
    ("researcher", 2, _read("research/incident-0419.md", "The second outage's notes.")),
    ("researcher", 2, _route("writer", "Both timelines: cache eviction storm, then a ledger retry loop.")),
    ("writer", 3, _read("templates/postmortem.md", "The template the review must follow.")),
    ("writer", 3, _route("lead", "I need the owners of the follow-ups and the latency figures.")),
    ("lead", 4, _read("research/latency-metrics.md", "The latency figures the writer asked for.")),
    ("lead", 4, _read("docs/owners.md", "Who owns which service.")),
    ("lead", 4, _route("writer", "p99 peaked at 4.2 s; payments own the retry fix, platform the cache.")),
    ("writer", 5, _read("docs/style-guide.md", "House style before writing.")),
    ("writer", 5, _decide("RESPOND", "All facts are in.", message="Post-incident review: see the draft.")),
]

_SERVICES = (
    "checkout-api", "payment-worker", "session-cache", "ledger", "search-indexer", "mobile-gateway",
    "order-queue", "fraud-scorer",
)  # fmt: skip
_TEAMS = ("payments", "platform", "storefront", "data", "mobile", "risk")
_VERBS = ("timed out on", "retried", "dropped", "queued", "throttled", "recovered", "rejected", "replayed")
_OBJECTS = (
    "requests to the ledger", "writes to the primary database", "cache refreshes", "webhook deliveries",
    "card authorisations", "session renewals", "inventory lookups", "refund jobs",
)  # fmt: skip
_WHEN = (
    "during the 14:00 deploy", "after the connection-pool change", "while the replica lagged",
    "once the circuit breaker opened", "before the on-call engineer paged the owners",
    "until traffic was shifted to the second region",
)  # fmt: skip
_GUIDANCE = (
    "State the customer impact first, in numbers: failed orders, minutes of degraded checkout, refunds.",
    "Write the timeline in UTC, one line per event, with the evidence each line rests on.",
    "Name the trigger and the contributing causes separately; a deploy is rarely the only cause.",
    "Every follow-up has one owning team, a ticket and a due date; no follow-up is owned by a person.",
    "Quote latency as p50 and p99 over the incident window, against the week before.",
    "Keep blame out: describe what the system allowed, not who pressed which button.",
    "Link the dashboards and the alert that fired, and say how long detection took.",
    "Close with what went well: the fallbacks, alerts and runbooks that limited the damage.",
)


def _timeline_line(rng: random.Random) -> str:
    return (
        f"- 14:{rng.randrange(60):02d} UTC. {rng.choice(_SERVICES)} {rng.choice(_VERBS)} "
        f"{rng.randrange(20, 4000)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}; "
        f"p99 latency {rng.randrange(180, 4200)} ms."
    )


def _owner_line(rng: random.Random) -> str:
    service, team = rng.choice(_SERVICES), rng.choice(_TEAMS)
    return (
        f"| {service} | {team} | {team}-oncall@example.com | runbook/{service}.md | "
        f"SLO {rng.choice(('99.9', '99.95', '99.5'))}% |"
    )


def _guidance_line(rng: random.Random) -> str:
    return f"- {rng.choice(_GUIDANCE)} (see section {rng.randrange(1, 9)}.{rng.randrange(1, 6)})"


def document(path: str, size: int, seed: int) -> str:
    """A Markdown document of about ``size`` characters, ending with its marker line.

    Incident notes and metrics are timelines, the owners file a table, the rest written guidance.
    """
    rng = random.Random(seed)
    title = Path(path).stem.replace("-", " ").capitalize()
    if path.startswith("research/"):
        lines, write = [f"# {title}", ""], _timeline_line
    elif "owners" in path:
        lines = [f"# {title}", "", "| service | team | on-call | runbook | SLO |", "|---|---|---|---|---|"]
        write = _owner_line
    else:
        lines, write = [f"# {title}", ""], _guidance_line
    length = sum(len(line) + 1 for line in lines)
    while length < size:
        line = write(rng)
        lines.append(line)
        length += len(line) + 1
    return "\n".join([*lines, "", marker(path)]) + "\n"


def marker(path: str) -> str:
    """The line that ends ``path``'s document; it reaches a prompt only with the document's full output."""
    return f"{MARKER}:{path}"


def write_workspace(root: Path) -> Path:
    """The documents the run reads, under ``root/workspace``."""
    workspace = root / "workspace"
    for seed, (path, size) in enumerate(DOCUMENTS.items()):
        file = workspace / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(document(path, size, seed), encoding="utf-8")
    return workspace


def write_network(root: Path) -> Path:
    """The network file the run compiles."""
    path = root / "incident-review.yaml"
    path.write_text(yaml.safe_dump(NETWORK, sort_keys=False), encoding="utf-8")
    return path


def files_read(step: int) -> list[tuple[int, str, int]]:
    """(step, path, epoch) of each read_file decision before ``step``."""
    return [
        (n, turn["tool_calls"][0]["args"]["action_details"]["params"]["path"], epoch)
        for n, (_, epoch, turn) in enumerate(DECISIONS[: step - 1], start=1)
        if turn["tool_calls"][0]["args"]["action"] == "USE_TOOL"
    ]


@dataclass
class PromptSizes:
    """What the scripted run's step ``STEP`` sent, against what naive injection would have sent."""

    step: int
    agent: str
    epoch: int
    actual_chars: int  # the agent_step event's prompt_chars
    naive_chars: int  # build_prompt(full=True) on the state the step decided on, counted the same way
    prompt: str  # the system prompt the step sent (its agent_prompt trace entry)
    naive_prompt: str
    current_files: list[str]  # read in the step's control epoch, before it
    earlier_files: list[str]  # read in earlier epochs
    tool_outputs: int  # tool outputs of the whole run before the step
    events: list[Event] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Actual over naive."""
        return self.actual_chars / self.naive_chars


async def prompt_size_run(root: Path, *, summary_chars: int = 2000) -> PromptSizes:
    """Run the scripted incident review on a checkpointer and measure step ``STEP``'s prompt both ways.

    ``root`` gets the network file and the generated workspace. Raises unless the run made every scripted
    decision and answered, and unless the checkpointed state rebuilds the prompt the step actually sent.
    """
    workspace, network_file = write_workspace(root), write_network(root)
    model = ScriptedChatModel(
        script=Script.model_validate({"turns": [turn for _, _, turn in DECISIONS]}), source="bench:network"
    )
    context = AgentNetworkContext(
        chat_model=model,
        workspace=str(workspace),
        network_file=str(network_file),
        max_steps=len(DECISIONS) + 5,
        summary_chars=summary_chars,
    )
    spec = get_protocol("agent_network")
    graph = spec.compile(InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": f"bench-{context.request_id}"}}
    traces = MemoryTraceStore()
    inputs = {"messages": [HumanMessage(MESSAGE)]}
    try:
        events = [e async for e in stream_graph(spec, graph, inputs, context, config, traces=traces)]
    finally:
        await context.aclose()
    steps = [e for e in events if isinstance(e, AgentStep)]
    expected = [(agent, epoch) for agent, epoch, _ in DECISIONS]
    if [(e.agent, e.epoch) for e in steps] != expected or events[-1].type != "final" or not model.exhausted:
        raise RuntimeError(f"the scripted network run did not go as scripted: {[e.type for e in events]}")
    step = next(e for e in steps if e.step == STEP)
    prompts = [t for t in traces.get(context.request_id) if t.type == "agent_prompt"]
    prompt = next(t.details["prompt"] for t in prompts if t.details["step"] == STEP)
    state = None
    async for snapshot in graph.aget_state_history(config):
        if snapshot.next == ("run_agent_step",) and snapshot.values.get("steps") == STEP - 1:
            state = snapshot.values
            break
    if state is None:
        raise RuntimeError(f"no checkpoint before step {STEP}'s decision")
    agent = NetworkSnapshot.model_validate(state["network"]).agent(state["current_agent"])
    if build_prompt(agent, state, summary_chars) != prompt or step.prompt_chars != len(prompt) + len(DECIDE):
        raise RuntimeError(f"the checkpoint before step {STEP} does not rebuild the prompt it sent")
    naive = build_prompt(agent, state, summary_chars, full=True)
    read = files_read(STEP)
    return PromptSizes(
        step=STEP,
        agent=agent.key,
        epoch=state["control_epoch"],
        actual_chars=step.prompt_chars,
        naive_chars=len(naive) + len(DECIDE),
        prompt=prompt,
        naive_prompt=naive,
        current_files=[path for _, path, epoch in read if epoch == state["control_epoch"]],
        earlier_files=[path for _, path, epoch in read if epoch != state["control_epoch"]],
        tool_outputs=len(state["tool_execution_log"]),
        events=events,
    )


async def prompt_size_row(workdir: Path) -> Row:
    """Step 10's prompt as sent (segment injection) against naive full-history injection, same run."""
    root = workdir / "agent-network"
    root.mkdir(parents=True, exist_ok=True)
    sizes = await prompt_size_run(root)
    handoffs = sum(1 for e in sizes.events if e.type == "route")
    sizes_kb = [(workdir / "agent-network" / "workspace" / p).stat().st_size / 1000 for p in DOCUMENTS]
    low, high, kib = min(sizes_kb), max(sizes_kb), sum(sizes_kb) * 1000 / 1024
    return Row(
        key=KEY,
        title=f"agent_network: step-{STEP} prompt, segment vs full-history injection",
        workload=f"a scripted run of a three-agent network (lead, researcher, writer; read_file each) on "
        f"{len(DOCUMENTS)} generated incident documents of {low:.1f}-{high:.1f} KB ({kib:.1f} KiB), "
        f"{len(DECISIONS)} decisions with {handoffs} handoffs, InMemorySaver checkpointer; step {STEP} is "
        f"the {sizes.agent}'s in its second control epoch (epoch {sizes.epoch}); figure: that step's prompt "
        "characters (system prompt and the ask to decide) as sent, against build_prompt(full=True) (every "
        "tool output of the run and the whole log) on the checkpointed state the step decided on",
        anchor=ANCHOR,
        headline=HEADLINE,
        note=f"acceptance: at most half of naive injection at step {STEP}: "
        f"{sizes.actual_chars} / {sizes.naive_chars} = {sizes.ratio:.2f}, "
        + ("met" if sizes.actual_chars * 2 <= sizes.naive_chars else "missed"),
        sides=[
            Side(
                ANCHOR,
                {
                    HEADLINE: Figure(sizes.naive_chars, "chars"),
                    "tool outputs in it": Figure(sizes.tool_outputs),
                },
            ),
            Side(
                MEASURED,
                {
                    HEADLINE: Figure(sizes.actual_chars, "chars"),
                    "tool outputs in it": Figure(len(sizes.current_files)),
                    "saved": Figure(sizes.naive_chars - sizes.actual_chars, "chars"),
                },
            ),
        ],
    )


async def agent_network_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 6's agent_network row; the run is a fixed scripted one, so ``quick`` changes nothing."""
    del quick  # a character count: no repeats to cut
    return [await prompt_size_row(workdir)]
