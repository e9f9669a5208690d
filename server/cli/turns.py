"""One ``phasegraph run`` turn, with or without a durable thread, answering the approvals it stops at.

A run without ``--thread`` keeps its graph's checkpoints in memory for the command's life, so it can
stop before a call that waits for approval and go on once it is answered. With ``--thread`` each
answer is a new request on the thread (as the server's resume is), so an unanswered approval can be
answered by a later command: ``phasegraph run PROTOCOL --thread ID --resume '<answer>'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import ErrorEvent, Event, Final, Paused
from phasegraph.server.cli.approvals import Approval, Approvals, approval_of
from phasegraph.server.cli.options import error_exit_code

if TYPE_CHECKING:  # the server's store and run engine are imported by a --thread turn only
    from phasegraph.server.cli.durable import DurableRuns

Render = Callable[[Event], None]


async def plain_turn(
    protocol: str, message: str, fields: dict[str, Any], render: Render, approvals: Approvals
) -> int:
    """Run one self-contained turn (kept in memory only); return the command's exit code.

    0: a final answer; 2: refused for its configuration, 1: another error (``error_exit_code``); 3: it
    waits for an approval this command did not answer.
    """
    spec = get_protocol(protocol)
    spec.check_message(message)
    context = spec.make_context(**fields)
    graph = spec.compile(InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": context.request_id}}
    graph_input: Any = {"messages": [HumanMessage(message)]}
    finished, failed, seq = False, None, 0
    try:
        while True:
            async for event in stream_graph(spec, graph, graph_input, context, config, seq_start=seq):
                render(event)
                seq = event.seq
                finished = finished or isinstance(event, Final)
                failed = failed or (event if isinstance(event, ErrorEvent) else None)
            if failed is not None:
                return error_exit_code(failed)
            approval = approval_of((await graph.aget_state(config)).interrupts)
            if approval is None:
                return 0 if finished else 1
            answer = await approvals.answer(approval)
            if answer is None:
                return approvals.stop(approval, protocol, None)
            graph_input = Command(resume=answer)
    finally:
        await context.aclose()


async def durable_turn(
    protocol: str, message: str | None, thread_id: str, fields: dict[str, Any], render: Render,
    approvals: Approvals, resume: Any = None,
) -> int:  # fmt: skip
    """Take a turn on a durable thread (or answer the approval it waits for, ``resume``); the exit code.

    0: a final answer, or a question the thread waits on; 1: an error; 3: it waits for an approval
    this command did not answer; 130: cancelled.
    """
    from phasegraph.server.cli.durable import DurableRuns, turn_exit_code

    async with DurableRuns(fields) as runs:
        if resume is not None:
            if await runs.approval(protocol, thread_id) is None:
                raise ConflictError(f"thread {thread_id!r} waits for no approval: there is nothing to resume")
            ended = await _resumed(runs, protocol, thread_id, render, resume)
        else:
            ended = await runs.turn(protocol, message or "", thread_id, render)
        settled = await answer_approvals(runs, protocol, thread_id, ended, render, approvals)
        if isinstance(settled, Approval):
            return approvals.stop(settled, protocol, thread_id)
        return turn_exit_code(settled)


async def answer_approvals(
    runs: DurableRuns, protocol: str, thread_id: str, ended: Event, render: Render, approvals: Approvals
) -> Event | Approval:
    """Answer each approval the thread stops at; the event that ended the turn, or the unanswered approval."""
    while isinstance(ended, Paused) and ended.reason == "interrupt":
        approval = await runs.approval(protocol, thread_id)
        if approval is None:
            break  # a question of another kind: its answer comes as a resume, not from here
        answer = await approvals.answer(approval)
        if answer is None:
            return approval
        ended = await _resumed(runs, protocol, thread_id, render, answer)
    return ended


async def answer_waiting(
    runs: DurableRuns, protocol: str, thread_id: str, approval: Approval, render: Render, approvals: Approvals
) -> Event | Approval:
    """Answer the approval a thread already waits on, then each it asks next (as ``answer_approvals``)."""
    answer = await approvals.answer(approval)
    if answer is None:
        return approval
    ended = await _resumed(runs, protocol, thread_id, render, answer)
    return await answer_approvals(runs, protocol, thread_id, ended, render, approvals)


async def _resumed(runs: DurableRuns, protocol: str, thread_id: str, render: Render, answer: Any) -> Event:
    """The thread's run, resumed with ``answer`` as a new request."""
    return await runs.turn(protocol, "", thread_id, render, graph_input=Command(resume=answer))
