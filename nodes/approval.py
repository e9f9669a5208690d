"""Approval before a tool runs: a call whose tool's policy says ``confirm`` waits in an ``interrupt``.

The interrupt carries the call (tool, arguments, why it waits) and takes an explicit answer, never
free text read by a model:

- ``"approve"``, ``{"decision": "approve"}``: the call runs as proposed;
- ``{"decision": "edit", "args": {...}}``: it runs with these arguments, checked against the tool's
  schema first (a wrong edit asks again, saying why);
- ``"reject"``, ``{"decision": "reject", "reason": "..."}``: it never runs; the model reads the reason.

``{"type": ...}`` in place of ``decision``, and LangChain's human-in-the-loop shape
``{"decisions": [{"type": "approve" | "edit" | "reject", "edited_action": {"args": ...}, "message": ...}]}``
(what Agent Chat UI sends) are read too. A node that runs several calls asks for every approval
before running any, so a call never waits halfway through a block. The run's MCP sessions are
closed when a node stops at the question: nothing is left open while it waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.tools import BaseTool
from langgraph._internal._constants import CONFIG_KEY_SCRATCHPAD  # no public name; see _Given
from langgraph.config import get_config
from langgraph.constants import CONF
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import ApprovalAnswered, ApprovalRequested
from phasegraph.nodes.redact import redactor
from phasegraph.tools import ToolRegistry
from phasegraph.tools.runner import argument_problem
from phasegraph.tools.sources import policy_of

#: The ``type`` of every approval interrupt's value.
APPROVAL = "approval"
#: What the model reads of a rejected call.
REJECTED = "A person rejected this call; it did not run. Their reason: {reason}"


@dataclass(frozen=True)
class Verdict:
    """A person's answer: run the call with ``args``, or not at all (``reason`` says why)."""

    decision: Literal["approve", "edit", "reject"]
    args: dict[str, Any]
    reason: str = ""

    @property
    def runs(self) -> bool:
        """Whether the call runs (approved, maybe edited)."""
        return self.decision != "reject"

    def refusal(self) -> str | None:
        """The error result a rejected call gets (``None`` when it runs)."""
        return None if self.runs else REJECTED.format(reason=self.reason or "none given")


def needs_approval(registry: ToolRegistry, name: str) -> bool:
    """Whether calls of ``name`` wait for a person (its policy says ``confirm``)."""
    found = registry.get(name)
    return found is not None and policy_of(found).confirm


async def approve_calls(
    context: RunContext, emitter: Emitter, registry: ToolRegistry, calls: Sequence[dict[str, Any]],
    meta: dict[str, Any] | None = None,
) -> dict[str, Verdict]:  # fmt: skip
    """The verdict on each call (by id) that needs approval, asked one after another before any runs."""
    verdicts: dict[str, Verdict] = {}
    for call in calls:
        if needs_approval(registry, call["name"]):
            verdicts[call["id"]] = await ask(context, emitter, registry, call, meta)
    return verdicts


async def ask(
    context: RunContext, emitter: Emitter, registry: ToolRegistry, call: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> Verdict:  # fmt: skip
    """Wait for the answer on ``call`` (an ``interrupt``); a wrong answer asks again, saying why."""
    call["name"] = registry.canonical(call["name"])  # a call made under the tool's wire name
    tool = registry.get(call["name"])
    reason = f"{call['name']} runs only after a person approves it (its policy says confirm)"
    request = {
        "type": APPROVAL, "call": {k: call[k] for k in ("id", "name", "args")}, "reason": reason,
        # LangChain's human-in-the-loop request, which Agent Chat UI shows with its own buttons
        "action_requests": [{"name": call["name"], "args": call["args"], "description": reason}],
        "review_configs": [{"action_name": call["name"], "allowed_decisions": ["approve", "edit", "reject"]}],
    }  # fmt: skip
    problem: str | None = None
    while True:
        asked = {**request, **({"problem": problem} if problem else {})}
        given = _answers_given()
        try:
            answer = interrupt(asked)
        except GraphInterrupt:
            emitter.emit(ApprovalRequested, call_id=call["id"], name=call["name"], args=call["args"],
                         reason=reason, problem=problem, **(meta or {}))  # fmt: skip
            await context.close_tools()  # nothing stays open while the run waits
            raise
        verdict, problem = read_answer(answer, call, tool)
        problem = _cut(problem)  # the question is asked again with it: an answer is not echoed whole
        if verdict is not None and given.is_new(answer):  # a re-run of the node replays earlier answers
            emitter.emit(ApprovalAnswered, call_id=call["id"], name=call["name"], decision=verdict.decision,
                         args=verdict.args, reason=verdict.reason, **(meta or {}))  # fmt: skip
        if verdict is not None:
            return verdict


@dataclass(frozen=True)
class _Given:
    """The answers the node's task had before an ``interrupt`` call, to tell a new answer from a replayed one.

    LangGraph re-runs a node from its start when it is resumed, and every ``interrupt`` the node
    passed before returns its earlier answer again. A new answer is the one the resume brought: a
    plain ``Command(resume=value)`` is appended to the task's answers by the ``interrupt`` it answers;
    answers keyed by interrupt id arrive in the list already, the newest last. (LangGraph's
    scratchpad is internal; without it every answer counts as new.)
    """

    scratchpad: Any
    count: int
    plain_resume: bool

    def is_new(self, answer: Any) -> bool:
        if self.scratchpad is None:
            return True
        answers = self.scratchpad.resume
        if self.plain_resume:
            return len(answers) > self.count
        return bool(answers) and answers[-1] is answer and len(answers) == self.count


def _answers_given() -> _Given:
    try:
        scratchpad = get_config()[CONF][CONFIG_KEY_SCRATCHPAD]
        return _Given(scratchpad, len(scratchpad.resume), scratchpad.get_null_resume(False) is not None)
    except (RuntimeError, KeyError, AttributeError, TypeError):  # outside a run, or LangGraph changed
        return _Given(None, 0, False)


def read_answer(
    answer: Any, call: dict[str, Any], tool: BaseTool | None
) -> tuple[Verdict | None, str | None]:
    """The verdict an answer gives, or why it gives none."""
    if (
        isinstance(answer, dict)
        and isinstance(answer.get("decisions"), list)
        and len(answer["decisions"]) == 1
    ):
        answer = _from_human_in_the_loop(answer["decisions"][0])
    if isinstance(answer, str):
        answer = {"decision": answer.strip().lower()}
    if not isinstance(answer, dict):
        return (
            None,
            f"an answer is 'approve', 'reject' or an object with 'decision'; got {type(answer).__name__}",
        )
    decision = answer.get("decision", answer.get("type"))
    reason = answer.get("reason", answer.get("message", ""))
    if decision not in ("approve", "edit", "reject"):
        return None, f"'decision' must be approve, edit or reject; got {decision!r}"
    if not isinstance(reason, str):
        return None, "'reason' must be a string"
    if decision == "reject":
        return Verdict("reject", call["args"], reason), None
    if decision == "approve":
        return Verdict("approve", call["args"]), None
    args = answer.get("args")
    if not isinstance(args, dict):
        return None, "an edit gives the call's new arguments as an object in 'args'"
    problem = argument_problem(tool, args) if tool is not None else None
    if problem is not None:
        return None, f"the edited arguments do not fit {call['name']}: {problem}"
    return Verdict("edit", args), None


#: The longest problem a question asked again carries (it names what was wrong, not the whole answer).
MAX_PROBLEM_CHARS = 500


def _cut(problem: str | None) -> str | None:
    """``problem`` cut to ``MAX_PROBLEM_CHARS``, saying how much was left out."""
    if problem is None or len(problem) <= MAX_PROBLEM_CHARS:
        return problem
    return f"{problem[:MAX_PROBLEM_CHARS]}... ({len(problem) - MAX_PROBLEM_CHARS} more characters)"


def _from_human_in_the_loop(decision: Any) -> Any:
    """LangChain's ``{"type", "edited_action": {"name", "args"}, "message"}`` as this module's answer."""
    if not isinstance(decision, dict):
        return decision
    edited = decision.get("edited_action")
    args = edited.get("args") if isinstance(edited, dict) else decision.get("args")
    return {"decision": decision.get("type"), "args": args, "reason": decision.get("message", "")}


def waits_for(value: Any) -> str:
    """What a thread waiting in an interrupt of ``value`` waits for, as a refusal says it."""
    if isinstance(value, dict) and value.get("type") == APPROVAL and isinstance(value.get("call"), dict):
        call = value["call"]
        args = redactor().text(repr(call.get("args")))  # a 409 names no configured secret
        shown = args if len(args) <= 200 else f"{args[:200]}..."  # arguments may be long: the call is named
        return f"waits for an approval of its call {call.get('name')!r} with {shown}"
    return "waits for the answer to the question it asked"


class AwaitingAnswer(ConflictError):
    """A new message on a thread that waits for an answer (an approval): refused, never read as the answer.

    The answer is explicit: each interface's resume carries it (docs/your-tools.md, Approval).
    """

    def __init__(self, thread_id: str, value: Any) -> None:
        super().__init__(
            f"thread {thread_id!r} {waits_for(value)}: answer it (approve, edit or reject, as the thread's "
            "resume) before sending a new message"
        )
