"""Readable, live rendering of the event union in a terminal (rich)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel

from nodes.events import (
    BudgetExhaustedEvent,
    DuplicateToolCall,
    ErrorEvent,
    Event,
    Final,
    IgnoredToolCall,
    PhaseEnd,
    PhaseStart,
    TextChunk,
    ToolCall,
    ToolResultEvent,
)

_PHASE_STYLE = {"action_phase": "cyan", "tool_phase": "magenta", "complete": "green"}


class EventRenderer:
    """Prints each event as it arrives; text chunks flow inline."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._in_text = False

    def __call__(self, event: Event) -> None:
        """Render one event."""
        if isinstance(event, TextChunk):
            self.console.print(event.text, end="", markup=False, highlight=False)
            self._in_text = True
            return
        if self._in_text:
            self.console.print()
            self._in_text = False
        line = self._line(event)
        if line:
            self.console.print(line, highlight=False)

    def _line(self, event: Event) -> str | None:
        where = f"{event.phase} #{event.phase_index} (cycle {event.cycle_index})" if event.phase_index else ""
        style = _PHASE_STYLE.get(event.phase or "", "white")
        match event:
            case PhaseStart():
                label = "final action phase" if event.final else where
                return f"[bold {style}]▶ {label}[/]"
            case PhaseEnd():
                stream = f", read {event.chunks_read} chunks{' (stream cut)' if event.stream_cut else ''}"
                return f"[dim {style}]■ {where} ended: {event.reason}{stream if event.chunks_read else ''}[/]"
            case ToolCall():
                return f"  [magenta]→ {event.name}[/]({_args(event.args)})"
            case ToolResultEvent():
                mark = "[green]✓[/]" if event.status == "ok" else f"[red]✗ {event.error}[/]"
                output = f"\n[dim]{event.output}[/]" if event.output else ""
                return f"  {mark} {event.name} in {event.duration_ms:.1f} ms{output}"
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
                title = "final answer (fallback)" if event.fallback else "final answer"
                if event.all_tools_failed:
                    title += " - every tool call failed; it rests on no tool output"
                border = "yellow" if event.all_tools_failed else "green"
                self.console.print(Panel(event.answer, title=title, border_style=border))
                return None
            case ErrorEvent():
                return f"[bold red]error ({event.kind}): {event.message}[/]"
        return None


def _args(args: dict[str, object]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items())
