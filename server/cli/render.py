"""Readable, live rendering of the event union in a terminal (rich)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel

from phasegraph.nodes.events import (
    AgentState,
    AgentStep,
    ApprovalAnswered,
    ApprovalRequested,
    BudgetExhaustedEvent,
    Cancelled,
    ContextUpdate,
    Decision,
    DuplicateToolCall,
    ErrorEvent,
    Event,
    Final,
    IgnoredToolCall,
    LastTurnContext,
    Paused,
    PhaseEnd,
    PhaseStart,
    PlanCreated,
    PlanReadyForReview,
    PlanReview,
    Route,
    Session,
    StepComplete,
    StepStart,
    TextChunk,
    ToolCall,
    ToolResultEvent,
    ValidationErrorEvent,
    Verdict,
    XmlBlock,
)

_PHASE_STYLE = {
    "action_phase": "cyan",
    "tool_phase": "magenta",
    "complete": "green",
    "context_discovery": "blue",
    "context_refinement": "blue",
    "action_decision": "cyan",
    "refinement_analysis": "yellow",
    "execution": "magenta",
}


class EventRenderer:
    """Prints each event as it arrives; text chunks flow inline, and the answer is shown once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._in_text = False
        self._asked = False  # the last event asked for an approval
        self._said: list[str] = []  # the text streamed so far
        self._rejected: set[str] = set()  # ids of the calls a person rejected, until their result

    def __call__(self, event: Event) -> None:
        """Render one event."""
        if isinstance(event, TextChunk):
            self.console.print(event.text, end="", markup=False, highlight=False)
            self._said.append(event.text)
            self._in_text = True
            return
        if isinstance(event, ApprovalAnswered) and event.decision == "reject":
            self._rejected.add(event.call_id)  # its tool_call and tool_result follow: it never ran
        if self._in_text:
            self.console.print()
            self._in_text = False
        if isinstance(event, Paused) and event.reason == "interrupt" and self._asked:
            line: str | None = "[bold yellow]… the call waits for approval[/]"
        else:
            line = self._line(event)
        self._asked = isinstance(event, ApprovalRequested)
        if line:
            self.console.print(line, highlight=False)

    def _line(self, event: Event) -> str | None:
        where = f"{event.phase} #{event.phase_index} ({_progress(event)})" if event.phase_index else ""
        style = _PHASE_STYLE.get(event.phase or "", "white")
        match event:
            case PhaseStart():
                label = "final action phase" if event.final else where
                return f"[bold {style}]▶ {label}[/]"
            case PhaseEnd():
                return f"[dim {style}]■ {where} ended: {event.reason}{_phase_figures(event)}[/]"
            case ContextUpdate():
                return _context_line(event)
            case Decision():
                if event.decision_type == "execute":
                    return f"  [cyan]◆ decided: execute {event.tool}({_args(event.params)})[/]"
                return f"  [cyan]◆ decided: finalize ({event.status})[/]"
            case Verdict():
                if event.verdict == "approve":
                    later = " - deferred: too early (min_iter)" if event.deferred else ""
                    return f"  [green]✔ approved (confidence {event.confidence}){later}[/]"
                return f"  [yellow]↻ refine: {', '.join(event.assessment_delta) or 'no assessment change'}[/]"
            case AgentStep():
                return _agent_step_line(event)
            case Route():
                note = f": {event.message}" if event.message else ""
                handoff = f"{event.from_agent} hands control to {event.to_agent} (epoch {event.epoch})"
                return f"[bold blue]⇢ {handoff}[/]{note}"
            case XmlBlock():
                return f"  [bold magenta]⧉ {event.kind} block {event.group}: {len(event.steps)} call(s)[/]"
            case ValidationErrorEvent():
                where = f"block {event.group}" if event.group else "the answer"
                listed = "".join(f"\n    - {p}" for p in event.problems)
                return f"  [red]✗ {where} was not run:[/]{listed}"
            case Session() | LastTurnContext() | AgentState():
                return _session_line(event)
            case PlanCreated() | PlanReadyForReview():
                return _plan_lines(event)
            case PlanReview():
                color = "green" if event.verdict == "approved" else "yellow"
                return f"  [{color}]⚖ review: {event.verdict}[/] {event.notes}"
            case StepStart():
                return f"  [bold magenta]▸ step {event.step_id}: {event.tool}[/] [dim]{event.rationale}[/]"
            case StepComplete():
                mark = {"ok": "[green]✓", "error": "[red]✗", "skipped": "[yellow]↷"}[event.status]
                return f"  {mark} step {event.step_id} {event.status}[/]"
            case ToolCall() if event.call_id in self._rejected:
                return f"  [red]✗ {event.name}({_args(event.args)}) rejected, not run[/]"
            case ToolCall():
                step = f"{event.step_index}. " if event.step_index is not None else ""
                return f"  [magenta]→ {step}{event.name}[/]({_args(event.args)})"
            case ToolResultEvent() if event.call_id in self._rejected:
                self._rejected.discard(event.call_id)  # its error is the refusal the model reads
                return None
            case ToolResultEvent():
                mark = "[green]✓[/]" if event.status == "ok" else f"[red]✗ {event.error}[/]"
                output = f"\n[dim]{event.output}[/]" if event.output else ""
                return f"  {mark} {event.name} in {event.duration_ms:.1f} ms{output}"
            case ApprovalRequested() | ApprovalAnswered():
                return _approval_line(event)
            case DuplicateToolCall():
                return (
                    f"  [yellow]⟲ refused duplicate {event.name}({_args(event.args)}) "
                    f"[{event.attempts}/{event.limit}][/]"
                )
            case IgnoredToolCall():
                return f"  [dim]· ignored {event.name or '?'}({_args(event.args)}): {event.reason}[/]"
            case BudgetExhaustedEvent():
                return f"[yellow]! {event.budget} budget exhausted ({event.used}/{event.limit})[/]"
            case Final():
                return self._final_lines(event)
            case Paused() | Cancelled():
                return _stop_line(event)
            case ErrorEvent():
                steps = (
                    f" ({len(event.transcript)} log entries in its transcript)" if event.transcript else ""
                )
                return f"[bold red]error ({event.kind}): {event.message}[/]{steps}"
        return None

    def streamed(self, answer: str) -> bool:
        """Whether the text streamed so far ends with ``answer``: the reader has seen it."""
        return "".join(self._said).strip().endswith(answer.strip())

    def _final_lines(self, event: Final) -> str | None:
        """The answer in a panel, unless it was streamed; then what the run cost, when it is known."""
        title = "final answer (fallback)" if event.fallback else "final answer"
        if event.agent:
            title += f" from {event.agent}"
        warning = " - every tool call failed; it rests on no tool output" if event.all_tools_failed else ""
        border = "yellow" if event.all_tools_failed else "green"
        if event.answer.strip() and self.streamed(event.answer):  # shown once: the text above ends with it
            self.console.print(f"[bold {border}]✔ {title}: the text above{warning}[/]", highlight=False)
        else:  # a fallback, an answer assembled after the stream, a question after a preamble
            self.console.print(Panel(event.answer, title=title + warning, border_style=border))
        if not event.usage:
            return None
        usage = event.usage
        return (
            f"[dim]{usage['calls']} model call(s), {usage['inputTokens']} in / "
            f"{usage['outputTokens']} out tokens, ${usage['costUsd']:.6f}[/]"
        )


def _session_line(event: Session | LastTurnContext | AgentState) -> str | None:
    match event:
        case Session():
            return f"[bold blue]● {event.context_type} session ({event.profile}):[/] {event.intent}"
        case LastTurnContext():
            return f"[dim]↺ carried over: {event.summary}[/]"
        case AgentState() if event.state == "waiting_on_user":
            return f"[bold yellow]… waiting on you: {event.details or ''}[/]"
    return None  # thinking / executing: the following events show it


def _approval_line(event: ApprovalRequested | ApprovalAnswered) -> str:
    """A call waiting for a person's approval, or their answer."""
    if isinstance(event, ApprovalRequested):
        problem = f" [red](last answer not taken: {event.problem})[/]" if event.problem else ""
        return f"  [bold yellow]⏸ {event.name}({_args(event.args)}) waits for approval[/]{problem}"
    if event.decision == "reject":
        return f"  [red]✗ rejected {event.name}: {event.reason or 'no reason given'}[/]"
    edited = f" with edited arguments {_args(event.args)}" if event.decision == "edit" else ""
    return f"  [green]✔ approved {event.name}{edited}[/]"


def _stop_line(event: Paused | Cancelled) -> str:
    """How a turn on a durable thread stopped without an answer."""
    if isinstance(event, Cancelled):
        return "[yellow]■ cancelled: the thread keeps what was done and takes your next message[/]"
    if event.reason == "interrupt":
        return "[bold yellow]… the thread waits for your answer: send it as the next message[/]"
    return f"[yellow]■ paused ({event.reason}): resume it from the server[/]"


def _plan_lines(event: PlanCreated | PlanReadyForReview) -> str:
    plan = event.plan
    if isinstance(event, PlanReadyForReview):
        return f"[bold yellow]✎ plan {plan['plan_id']} waits for your review: reply to run or change it[/]"
    steps = "".join(f"\n    {s['id']}. {s['tool']}({_args(s['args'])})" for s in plan["steps"])
    return f"[bold cyan]✎ plan {plan['plan_id']} ({plan['execution_mode']}): {plan['objective']}[/]{steps}"


def _progress(event: Event) -> str:
    if event.iteration is not None or event.step is not None:
        parts = [f"iteration {event.iteration}" if event.iteration else "", f"round {event.context_round}"
                 if event.context_round else "", f"step {event.step}" if event.step else ""]  # fmt: skip
        return ", ".join(p for p in parts if p) or "start"
    return f"cycle {event.cycle_index}"


def _agent_step_line(event: AgentStep) -> str:
    decision, details = event.decision, event.decision.get("action_details", {})
    action = decision.get("action", "?")
    what = {
        "USE_TOOL": f"use {details.get('tool')}",
        "ROUTE_TO_AGENT": f"route to {details.get('target_agent')}",
        "RESPOND": "respond",
    }.get(action, action)
    head = f"[bold cyan]▶ step {event.step} · {event.agent} (epoch {event.epoch})[/] decides to {what}"
    size = f" [dim](prompt {event.prompt_chars} chars)[/]"
    refused = f"\n  [red]✗ refused: {event.refused}[/]" if event.refused else ""
    return f"{head}{size}\n  [dim]{decision.get('action_reasoning', '')}[/]{refused}"


def _phase_figures(event: PhaseEnd) -> str:
    if event.chunks_read:
        return f", read {event.chunks_read} chunks{' (stream cut)' if event.stream_cut else ''}"
    if event.prompt_chars is not None:
        tokens = f", {event.prompt_tokens} tokens" if event.prompt_tokens is not None else ""
        retried = f", {event.retries} corrective retry" if event.retries else ""
        return f" (prompt {event.prompt_chars} chars{tokens}{retried})"
    return ""


def _context_line(event: ContextUpdate) -> str:
    if event.action == "searched":
        found = ", ".join(event.uris) or "nothing"
        return f"  [blue]⌕ search {json.dumps(event.query)}: {found}[/]"
    named = ", ".join(event.tools or event.uris)
    missing = f" [red](not found: {', '.join(event.missing)})[/]" if event.missing else ""
    size = f" [{event.chars:+d} chars → {event.context_chars}]" if event.chars else ""
    return f"  [blue]≡ {event.action} {named}{size}[/]{missing}"


def _args(args: dict[str, object]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items())
