"""Approval before a tool runs, over AG-UI: the interrupt a run ends with, and the resume that answers it.

A call whose tool's policy says ``confirm`` stops its run in a LangGraph ``interrupt`` whose value is
``{"type": "approval", "call": {id, name, args}, "reason": ..., "problem"?: ...}``
(:mod:`phasegraph.nodes.approval`). The AG-UI stream ends that run with ``RUN_FINISHED`` and the
interrupt outcome (AG-UI 1.0's ``RunFinishedInterruptOutcome``, as ``ag-ui-protocol`` 1.0.0 and
``@ag-ui/client`` 1.0.0 type it): one ``Interrupt`` named by the LangGraph interrupt's id, ``reason``
``tool_approval``, ``toolCallId`` the call's id, ``message`` why it waits, ``responseSchema`` the answers
it takes and ``metadata`` the call (``call``: id, name, arguments), ``reason``, ``problem`` (why a last
answer was not taken) and ``requestId`` (the paused request).

The next run answers it with ``resume: [{"interruptId": <id>, "status": "resolved", "payload": ...}]``:
``"approve"``, ``"reject"``, ``{"decision": "approve"}``, ``{"decision": "edit", "args": {...}}`` or
``{"decision": "reject", "reason": "..."}`` (LangChain's ``{"decisions": [...]}`` too). The answer
becomes the graph's ``Command(resume=payload)``: the request paused at the approval goes on with it
(the same request and ``runId``, as the native resume route answers it; a thread whose waiting request
was cancelled takes it on a new request, the run's ``runId``), so a rejected call never runs and the
model reads the reason. Only the payload answers: the run's
``messages`` are the client's copy of the conversation, and no message answers an approval (a run
with no ``resume`` on a thread waiting for one is refused, 409). ``status: "cancelled"`` abandons the
approval: the call is rejected ("cancelled"). A payload of another shape is refused (422) before
anything starts; an edit that does not fit the tool's schema is asked again by the run, which ends
with the same approval and its ``problem``.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt, ResumeEntry
from langgraph.types import Command
from langgraph.types import Interrupt as GraphInterrupt

from phasegraph.nodes.approval import APPROVAL, read_answer
from phasegraph.nodes.errors import InvalidInputError
from phasegraph.nodes.redact import redactor
from phasegraph.server.http.ag_ui.state import plain
from phasegraph.server.http.bodies import refuse_wide_integers

#: The ``reason`` of an approval's AG-UI interrupt.
TOOL_APPROVAL = "tool_approval"
#: What an approval's answer is (``responseSchema``).
APPROVAL_SCHEMA: dict[str, Any] = {
    "description": "approve; edit (new arguments, checked against the tool's schema); reject (a reason)",
    "oneOf": [
        {"type": "string", "enum": ["approve", "reject"]},
        {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "edit", "reject"]},
                "args": {"type": "object", "description": "edit: the call's new arguments"},
                "reason": {"type": "string", "description": "reject: why (the model reads it)"},
            },
            "required": ["decision"],
        },
    ],
}
#: What a cancelled approval becomes: a rejection.
CANCELLED = {"decision": "reject", "reason": "the approval was cancelled: nobody approved the call"}


def is_approval(pending: GraphInterrupt) -> bool:
    """Whether a LangGraph interrupt left on a thread waits for a tool call's approval."""
    value = pending.value
    return isinstance(value, dict) and value.get("type") == APPROVAL and isinstance(value.get("call"), dict)


def approval_interrupt(pending: GraphInterrupt, request_id: str) -> Interrupt:
    """An approval's interrupt as AG-UI's: the call, why it waits, what answers it."""
    value = redactor().data(plain(pending.value))
    call, reason, problem = value["call"], str(value.get("reason") or ""), value.get("problem")
    message = f"{reason} (the last answer was not taken: {problem})" if problem else reason
    metadata = {"type": APPROVAL, "call": call, "reason": reason, "requestId": request_id}
    return Interrupt(
        id=pending.id, reason=TOOL_APPROVAL, message=message, tool_call_id=call.get("id"),
        response_schema=APPROVAL_SCHEMA, metadata={**metadata, **({"problem": problem} if problem else {})},
    )  # fmt: skip


def approval_answer(pending: GraphInterrupt, entry: ResumeEntry) -> Command[Any]:
    """The graph input that answers an approval: ``Command(resume=payload)``; 422 for a bad answer."""
    where = f"interrupt {entry.interrupt_id!r}"
    if entry.status == "cancelled":
        return Command(resume=CANCELLED)
    if entry.payload is None:
        raise InvalidInputError(
            f"{where} waits for an approval: give the payload 'approve', 'reject', "
            "{'decision': 'edit', 'args': {...}} or {'decision': 'reject', 'reason': '...'}"
        )
    refuse_wide_integers(entry.payload, f"{where}: payload")
    call = pending.value["call"]
    _, problem = read_answer(entry.payload, {**call, "args": call.get("args") or {}}, None)
    if problem is not None:
        raise InvalidInputError(f"{where}: {problem}")
    return Command(resume=entry.payload)


def waiting_approvals(pending: tuple[GraphInterrupt, ...]) -> list[str]:
    """The ids of the approvals a thread waits on (a new user message does not answer them)."""
    return [each.id for each in pending if is_approval(each)]
