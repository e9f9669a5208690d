"""Reading a model answer under the XML contract: blocks of service/tool calls, or a final answer.

The answer is cut at a hallucinated ``<result>``, its ``<think>`` blocks and stop signals are
dropped, and every top-level element becomes a block: a service element (one call), or a
``<parallel>`` / ``<sequential>`` of service elements. Each element is parsed on its own with
defusedxml (no DTD, no entities, no network), so prose around blocks is tolerated and nothing in
the answer can expand. Problems are sentences the model reads; a block with one runs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from phasegraph.nodes.xml_contract.arguments import ToolSchemas, read_arguments

Kind = Literal["single", "parallel", "sequential"]
FINAL = "Final Answer:"
GROUPS = ("parallel", "sequential")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>(?:(?!</think>).)*$", re.DOTALL | re.IGNORECASE)
_MARKUP = re.compile(r"<[^<>]+>")
EMPTY = "the answer was empty: write your calls, or 'Final Answer:' and the answer"
CUT_IN_THOUGHT = (
    "the answer stopped inside <think>: <execute_tools /> and <result> end an answer wherever they appear, "
    "so keep them out of your thinking and write your calls after </think>"
)
_SIGNAL = re.compile(r"<\s*/?\s*execute_tools\s*/?\s*>", re.IGNORECASE)
_RESULT = re.compile(r"<\s*result\b", re.IGNORECASE)
_DTD = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)(\s[^<>]*)?(/?)>")


@dataclass(frozen=True)
class Step:
    """One tool call of a block."""

    index: int  # from 1, in block order
    service: str
    tool: str
    args: dict[str, Any]


@dataclass
class Block:
    """A top-level block: its calls, or why it cannot run."""

    kind: Kind
    source: str  # the block's XML as the model wrote it
    steps: list[Step] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Proposal:
    """What one answer proposes."""

    text: str  # the answer as kept (cut at a hallucinated result)
    blocks: list[Block] = field(default_factory=list)
    final_answer: str | None = None
    problems: list[str] = field(default_factory=list)  # about the answer as a whole
    dropped_result: bool = False


def read_proposal(raw: str, schemas: ToolSchemas) -> Proposal:
    """Read blocks or a final answer from a model answer; validate every block before anything runs."""
    text, dropped = raw, False
    if cut := _RESULT.search(raw):
        text, dropped = raw[: cut.start()], True  # results come from the system, never from the model
    proposal = Proposal(text=text, dropped_result=dropped)
    if _OPEN_THINK.search(text):  # a stop sequence fired mid-thought: what it meant to call was never written
        proposal.problems.append(CUT_IN_THOUGHT)
        return proposal
    if _DTD.search(text):
        proposal.problems.append("the answer declares a DTD or entities, which are refused; nothing was run")
        return proposal
    plain = _SIGNAL.sub("", _THINK.sub("", text))
    before, final, after = plain.partition(FINAL)
    known = {*schemas.services, *schemas.unavailable, *GROUPS}
    for source, name, problem in _elements(before, known):
        block = Block("single", source, problems=[problem] if problem else [])
        if not problem:
            _read_block(block, name, schemas)
        if block.problems or block.steps:
            proposal.blocks.append(block)
    if final and not proposal.blocks:
        proposal.final_answer = after.strip()
    if not proposal.blocks and not proposal.final_answer and not answer_text(text):
        proposal.problems.append(EMPTY)
    return proposal


def answer_text(raw: str) -> str:
    """The answer in a model's text: what follows "Final Answer:" outside its thinking, else its prose."""
    plain = _SIGNAL.sub("", _THINK.sub("", raw))
    if FINAL in plain:
        return plain.partition(FINAL)[2].strip()
    return _MARKUP.sub("", plain).strip()


def _elements(text: str, known: set[str]) -> list[tuple[str, str, str | None]]:
    """Top-level elements: (source, tag, problem); prose and lone tags between them are skipped.

    An unclosed tag that names no service or block is prose too (``<br>``, ``a<b``); an unclosed
    service or block is malformed, and takes the rest of the answer with it.
    """
    found: list[tuple[str, str, str | None]] = []
    at = 0
    while match := _OPEN.search(text, at):
        name = match.group(1)
        if match.group(3):  # self-closing: no block
            at = match.end()
            continue
        end = _closing(text, name, match.end())
        if end is None and name not in known:
            at = match.end()
            continue
        if end is None:
            found.append((text[match.start() :], name, f"malformed XML: <{name}> is never closed"))
            break
        found.append((text[match.start() : end], name, None))
        at = end
    return found


def _closing(text: str, name: str, start: int) -> int | None:
    """The end of the element opened before ``start`` (same-name nesting counted), or None."""
    pattern = re.compile(rf"<(/?){re.escape(name)}(\s[^<>]*)?(/?)>")
    depth = 1
    for tag in pattern.finditer(text, start):
        if tag.group(3):
            continue
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return tag.end()
    return None


def _read_block(block: Block, name: str, schemas: ToolSchemas) -> None:
    try:
        element = fromstring(block.source, forbid_dtd=True)
    except (ParseError, DefusedXmlException) as exc:
        block.problems.append(f"malformed XML in <{name}>: {exc}")
        return
    calls = list(element) if name in GROUPS else [element]
    if name in GROUPS:
        block.kind = name  # type: ignore[assignment]
        nested = [c.tag for c in calls if c.tag in GROUPS]
        if nested:
            block.problems.append(f"<{nested[0]}> inside <{name}> is not supported: blocks do not nest")
            return
        if not calls:
            block.problems.append(f"<{name}> holds no calls")
            return
    elif name not in schemas.services and not len(element):
        return  # a lone tag in prose (<b>, say): not a call
    for index, call in enumerate(calls, start=1):
        step = _read_call(call, index, schemas, block)
        if step is not None:
            block.steps.append(step)
    if block.problems:
        block.steps.clear()


def _read_call(service: Element, index: int, schemas: ToolSchemas, block: Block) -> Step | None:
    where = f"step {index}" if block.kind != "single" else "the call"
    if down := schemas.unavailable.get(service.tag):
        block.problems.append(f"{where}: service <{service.tag}> is unavailable: {down}")
        return None
    if service.tag not in schemas.services:
        known = ", ".join(sorted(schemas.services)) or "none"
        block.problems.append(f"{where}: unknown service <{service.tag}> (services: {known})")
        return None
    tools = list(service)
    if len(tools) != 1:
        block.problems.append(
            f"{where}: <{service.tag}> must hold exactly one tool element, not {len(tools)}"
        )
        return None
    tool = tools[0]
    args, problems = read_arguments(schemas, service.tag, tool, index, block.kind)
    block.problems += [f"{where} ({service.tag}.{tool.tag}): {p}" for p in problems]
    return None if problems else Step(index, service.tag, tool.tag, args)
