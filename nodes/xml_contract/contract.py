"""Reading a model answer under the XML contract: blocks of service/tool calls, or a final answer.

The answer is cut at its first execute signal, in any spelling, or at a hallucinated ``<result>``
(a provider that ignores ``stop`` sends what follows: it is never read), its ``<think>`` blocks are
dropped, and every top-level element becomes a block: a service element (one call), or a
``<parallel>`` / ``<sequential>`` of service elements. Each element is parsed on its own with
defusedxml (no DTD, no entities, no network), so prose around blocks is tolerated and nothing in
the answer can expand. Problems are sentences the model reads; a block with one runs nothing.

Reading is linear in the answer's length: the tags are found in one pass and matched with one
stack per name, so no tag makes the reader scan the rest of the answer again.
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
_MARKUP = re.compile(r"<[^<>]+>")
EMPTY = "the answer was empty: write your calls, or 'Final Answer:' and the answer"
CUT_IN_THOUGHT = (
    "the answer stopped inside <think>: <execute_tools /> and <result> end an answer wherever they appear, "
    "so keep them out of your thinking and write your calls after </think>"
)
#: The execute signal in any spelling: any case, spaces, attributes, self-closed, opened or closed.
_SIGNAL = re.compile(r"<\s*(?:/\s*)?execute_tools(?:[\s/][^<>]*)?>", re.IGNORECASE)
#: Where an answer ends: its first execute signal, or a result it invented (the group is set).
_CUT = re.compile(rf"{_SIGNAL.pattern}|(<\s*result\b)", re.IGNORECASE)
_DTD = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
#: Any tag: closing slash, name, attributes, self-closing slash.
_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)(\s[^<>]*)?(/?)>")


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

    text: str  # the answer as kept (cut at its first execute signal or a hallucinated result)
    blocks: list[Block] = field(default_factory=list)
    final_answer: str | None = None
    problems: list[str] = field(default_factory=list)  # about the answer as a whole
    dropped_result: bool = False


@dataclass
class KeptProposal(Proposal):
    """A proposal as the state keeps it: with how long the model took and the system prompt it read."""

    model_ms: int = 0
    system: str = ""


def read_proposal(raw: str, schemas: ToolSchemas) -> Proposal:
    """Read blocks or a final answer from a model answer; validate every block before anything runs."""
    text, dropped = raw, False
    if cut := _CUT.search(raw):  # nothing after the signal is read; results come from the system only
        text, dropped = raw[: cut.start()], cut.group(1) is not None
    proposal = Proposal(text=text, dropped_result=dropped)
    thoughts = list(_THINK.finditer(text))
    if thoughts and not thoughts[-1].group(1):  # cut mid-thought: what it meant to call was never written
        proposal.problems.append(CUT_IN_THOUGHT)
        return proposal
    if _DTD.search(text):
        proposal.problems.append("the answer declares a DTD or entities, which are refused; nothing was run")
        return proposal
    plain = _THINK.sub("", text)
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
    """The answer in a model's text: what follows "Final Answer:" outside its thinking, else its prose.

    Nothing in it is read as a call, so an execute signal is dropped rather than cut at.
    """
    plain = _SIGNAL.sub("", _THINK.sub("", raw))
    if FINAL in plain:
        return plain.partition(FINAL)[2].strip()
    return _MARKUP.sub("", plain).strip()


def _elements(text: str, known: set[str]) -> list[tuple[str, str, str | None]]:
    """Top-level elements: (source, tag, problem); prose and lone tags between them are skipped.

    An unclosed tag that names no service or block is prose too (``<br>``, ``a<b``); an unclosed
    service or block is malformed, and takes the rest of the answer with it.
    """
    tags = list(_TAG.finditer(text))
    ends = _element_ends(tags)
    found: list[tuple[str, str, str | None]] = []
    at = 0
    for index, tag in enumerate(tags):
        if tag.start() < at or tag.group(1) or tag.group(4):  # inside a block, a closing or a lone tag
            continue
        name, end = tag.group(2), ends.get(index)
        if end is None and name not in known:
            continue
        if end is None:
            found.append((text[tag.start() :], name, f"malformed XML: <{name}> is never closed"))
            break
        found.append((text[tag.start() : end], name, None))
        at = end
    return found


def _element_ends(tags: list[re.Match[str]]) -> dict[int, int]:
    """Where each closed element ends, by its opening tag's index: same-name nesting counted.

    One stack per name: a closing tag closes the latest open tag of its name (one with none open is
    ignored), which is the tag where counting depth from that opening tag first comes back to zero.
    """
    open_tags: dict[str, list[int]] = {}
    ends: dict[int, int] = {}
    for index, tag in enumerate(tags):
        if tag.group(4):  # self-closing: opens and closes nothing
            continue
        stack = open_tags.setdefault(tag.group(2), [])
        if not tag.group(1):
            stack.append(index)
        elif stack:
            ends[stack.pop()] = tag.end()
    return ends


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
