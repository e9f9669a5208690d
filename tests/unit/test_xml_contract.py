"""The XML contract read from model answers: blocks, arguments, placeholders and every refusal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from phasegraph.nodes.xml_contract import contract
from phasegraph.nodes.xml_contract.arguments import ToolSchemas
from phasegraph.nodes.xml_contract.contract import CUT_IN_THOUGHT, EMPTY, read_proposal
from phasegraph.nodes.xml_contract.tool_phase import substitute

SCHEMAS = ToolSchemas(
    services={
        "demo": {
            "read_file": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            "slow_echo": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "ms": {"type": "integer"}},
                "required": ["text", "ms"],
            },
            "list_files": {"type": "object", "properties": {"path": {"type": "string", "default": "."}}},
        },
        "search": {
            "find": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
        },
    },
    unavailable={"sandbox": "connection refused"},
)


def steps(answer: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    proposal = read_proposal(answer, SCHEMAS)
    assert not proposal.problems and all(not b.problems for b in proposal.blocks), proposal
    return [(b.kind, s.service, s.tool, s.args) for b in proposal.blocks for s in b.steps]


def problems(answer: str) -> list[str]:
    proposal = read_proposal(answer, SCHEMAS)
    found = proposal.problems + [p for b in proposal.blocks for p in b.problems]
    assert found and not any(b.steps for b in proposal.blocks if b.problems)  # nothing of a bad block runs
    return found


def test_arguments_as_text_json_or_elements_with_prose_and_thinking_around():
    answer = """Let me look. <think>read it, then <b>echo</b></think>
    <demo><read_file>docs/a.md</read_file></demo> and also
    <demo><slow_echo>{"text": "hi", "ms": 5}</slow_echo></demo>
    <demo><slow_echo><text>there</text><ms>7</ms></slow_echo></demo>
    <demo><list_files/></demo> a <b>bold</b> word & more <execute_tools/>"""
    assert steps(answer) == [
        ("single", "demo", "read_file", {"path": "docs/a.md"}),
        ("single", "demo", "slow_echo", {"text": "hi", "ms": 5}),
        ("single", "demo", "slow_echo", {"text": "there", "ms": 7}),  # "7" read as the integer it must be
        ("single", "demo", "list_files", {}),
    ]


def test_parallel_and_sequential_blocks_keep_their_order():
    answer = """<parallel><demo><read_file>a</read_file></demo><search><find>x</find></search></parallel>
    <sequential><demo><read_file>a</read_file></demo>
    <demo><slow_echo><text>got $result_of_step_1</text><ms>1</ms></slow_echo></demo></sequential>"""
    assert steps(answer) == [
        ("parallel", "demo", "read_file", {"path": "a"}),
        ("parallel", "search", "find", {"query": "x"}),
        ("sequential", "demo", "read_file", {"path": "a"}),
        ("sequential", "demo", "slow_echo", {"text": "got $result_of_step_1", "ms": 1}),
    ]
    assert substitute({"text": "got $result_of_step_1", "ms": 1}, ["content"]) == {
        "text": "got content",
        "ms": 1,
    }


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("<sequential><demo><read_file>$result_of_step_2</read_file></demo><demo><read_file>b</read_file></demo>"
         "</sequential>", "points forward: step 1 can use steps 1 to 0"),
        ("<sequential><demo><read_file>a</read_file></demo><demo><read_file>$result_of_step_5</read_file></demo>"
         "</sequential>", "points forward: step 2 can use steps 1 to 1"),
        ("<sequential><demo><read_file>a</read_file></demo><demo><read_file>$result_of_step_0</read_file></demo>"
         "</sequential>", "steps count from 1"),
        ("<parallel><demo><read_file>a</read_file></demo><demo><read_file>$result_of_step_1</read_file></demo>"
         "</parallel>", "placeholders are for <sequential> blocks only"),
        ("<demo><read_file>$result_of_step_1</read_file></demo>", "placeholders are for <sequential> blocks"),
        ("<nowhere><read_file>a</read_file></nowhere>", "unknown service <nowhere> (services: demo, search)"),
        ("<demo><delete_all>x</delete_all></demo>", "unknown tool (tools of demo: list_files, read_file"),
        ("<sandbox><run>ls</run></sandbox>", "service <sandbox> is unavailable: connection refused"),
        ("<demo><slow_echo><text>hi</text><ms>soon</ms></slow_echo></demo>", "ms: 'soon' is not of type"),
        ("<demo><slow_echo><text>hi</text></slow_echo></demo>", "'ms' is a required property"),
        ("<demo><slow_echo>just text</slow_echo></demo>", "give the arguments as elements or JSON"),
        ('<demo><slow_echo>{"text": </slow_echo></demo>', "the arguments are not valid JSON"),
        ("<demo><read_file>a</demo>", "malformed XML in <demo>"),
        ("<demo><read_file>a</read_file>", "<demo> is never closed"),
        ("<sequential><parallel><demo><read_file>a</read_file></demo></parallel></sequential>",
         "<parallel> inside <sequential> is not supported"),
        ("<demo><read_file>a</read_file><read_file>b</read_file></demo>", "must hold exactly one tool"),
        ("<demo><read_file>&xxe;</read_file></demo>", "malformed XML"),
    ],
)  # fmt: skip
def test_each_broken_block_is_refused_before_anything_runs(answer: str, problem: str):
    assert any(problem in p for p in problems(answer)), problems(answer)


def test_entity_attacks_are_refused_without_expansion():
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{i} "{"&lol{};".format(i - 1 if i > 1 else "") * 10}">' for i in range(1, 10))
        + "]><demo><read_file>&lol9;</read_file></demo>"
    )
    external = (
        '<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><demo><read_file>&xxe;</read_file></demo>'
    )
    for answer in (laughs, external):
        proposal = read_proposal(answer, SCHEMAS)
        assert proposal.blocks == [] and proposal.problems == [
            "the answer declares a DTD or entities, which are refused; nothing was run"
        ]


def test_a_good_block_runs_beside_a_broken_one():
    proposal = read_proposal("<demo><read_file>a</read_file></demo><nowhere><x>1</x></nowhere>", SCHEMAS)
    assert [bool(b.steps) for b in proposal.blocks] == [True, False]


def test_results_the_model_writes_are_cut_off_and_never_trusted():
    proposal = read_proposal("<demo><read_file>a</read_file></demo>\n<result>secret: 42</result>", SCHEMAS)
    assert proposal.dropped_result and "secret" not in proposal.text
    assert [s.args for b in proposal.blocks for s in b.steps] == [{"path": "a"}]


def test_a_final_answer_is_captured_unless_blocks_come_first():
    final = read_proposal("<think>done</think>Final Answer: It is 42.", SCHEMAS)
    assert final.final_answer == "It is 42." and final.blocks == []
    early = read_proposal("<demo><read_file>a</read_file></demo> Final Answer: guessed", SCHEMAS)
    assert early.final_answer is None and len(early.blocks) == 1  # the calls run; the guess waits for them
    prose = read_proposal("Just prose, no calls.", SCHEMAS)
    assert prose.blocks == [] and prose.final_answer is None and prose.problems == []


def test_unclosed_tags_in_prose_are_prose_but_an_unclosed_block_is_not():
    assert steps("Line one<br>then a<b and <demo><read_file>a</read_file></demo>") == [
        ("single", "demo", "read_file", {"path": "a"})
    ]
    assert any("<demo> is never closed" in p for p in problems("<br> <demo><read_file>a</read_file>"))


@pytest.mark.parametrize(
    "answer", ["", "   ", "<think>only thinking</think>", "Final Answer:", "<execute_tools />"]
)
def test_an_empty_answer_is_a_problem_not_a_final_answer(answer: str):
    proposal = read_proposal(answer, SCHEMAS)
    assert proposal.problems == [EMPTY] and not proposal.final_answer


@pytest.mark.parametrize(
    "signal",
    ["<execute_tools />", "<execute_tools/>", "<execute_tools>", "<execute_tools  />", "<execute_tools\n/>",
     '<execute_tools foo="1"/>', "< execute_tools />", "</execute_tools>", "</ execute_tools >",
     "<EXECUTE_TOOLS/>", "<Execute_Tools reason='done'>"],
)  # fmt: skip
def test_the_answer_ends_at_its_first_execute_signal_in_any_spelling(signal: str):
    kept = "<demo><read_file>a</read_file></demo>"
    answer = f"{kept}{signal}<demo><read_file>b</read_file></demo><execute_tools />Final Answer: guessed"
    proposal = read_proposal(answer, SCHEMAS)
    assert proposal.text == kept and not proposal.dropped_result  # what a provider honouring stop sends
    assert [s.args for b in proposal.blocks for s in b.steps] == [{"path": "a"}]
    assert proposal.final_answer is None


def test_the_cut_is_at_whichever_comes_first_signal_or_invented_result():
    call = "<demo><read_file>a</read_file></demo>"
    signal_first = read_proposal(f"{call}<execute_tools  /><result>42</result>", SCHEMAS)
    assert signal_first.text == call and not signal_first.dropped_result
    result_first = read_proposal(f"{call}<result>42</result><execute_tools  />", SCHEMAS)
    assert result_first.text == call and result_first.dropped_result
    other = read_proposal(f"<execute_tools_later/>{call}", SCHEMAS)  # another tag, not the signal
    assert [s.args for b in other.blocks for s in b.steps] == [{"path": "a"}]


def test_a_signal_inside_thinking_ends_the_answer_there_as_a_stop_sequence_would():
    answer = "<think>I write <execute_tools foo='x'/></think><demo><read_file>a</read_file></demo>"
    proposal = read_proposal(answer, SCHEMAS)
    assert proposal.problems == [CUT_IN_THOUGHT] and proposal.blocks == []


class RegexMeter:
    """Adds up the characters each regex call of the reader is handed: how much text its passes cover.

    A scan handed the rest of the answer for every tag is what made the reader quadratic; a linear
    reader makes a fixed number of passes, so its total is a fixed multiple of the answer's length.
    ``finditer`` counts up to where its consumer stopped reading it.
    """

    def __init__(self) -> None:
        self.chars = 0

    def wrap(self, pattern: re.Pattern[str]) -> SimpleNamespace:
        def search(string: str, pos: int = 0, *rest: Any) -> re.Match[str] | None:
            found = pattern.search(string, pos, *rest)
            self.chars += (found.end() if found else len(string)) - pos
            return found

        def finditer(string: str, pos: int = 0, *rest: Any) -> Iterator[re.Match[str]]:
            reached = pos
            try:
                for found in pattern.finditer(string, pos, *rest):
                    reached = found.end()
                    yield found
                reached = len(string)
            finally:
                self.chars += reached - pos

        def whole(name: str, text_at: int = 0) -> Any:  # the whole text: an upper bound
            def call(*args: Any, **kwargs: Any) -> Any:
                self.chars += len(args[text_at])
                return getattr(pattern, name)(*args, **kwargs)

            return call

        return SimpleNamespace(
            pattern=pattern.pattern, flags=pattern.flags, groups=pattern.groups, search=search,
            finditer=finditer, sub=whole("sub", 1), findall=whole("findall"), match=whole("match"),
            fullmatch=whole("fullmatch"), split=whole("split"),
        )  # fmt: skip

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every pattern of the reader's module, and any it compiles while reading, is measured."""
        for name, value in vars(contract).items():
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(contract, name, self.wrap(value))
        measured = SimpleNamespace(**{k: getattr(re, k) for k in dir(re) if not k.startswith("__")})
        measured.compile = lambda *args, **kwargs: self.wrap(re.compile(*args, **kwargs))
        monkeypatch.setattr(contract, "re", measured)


@pytest.mark.parametrize(
    "unit", ["<x>", "<x><y>", "<x>a</y>", "<b>bold</b> and ", "<think>", "<parallel>", "<demo><read_file>a"]
)
def test_reading_is_linear_in_the_answer(monkeypatch: pytest.MonkeyPatch, unit: str):
    meter = RegexMeter()
    meter.install(monkeypatch)
    passes = []
    for count in (1000, 8000):  # 8,000 x "<x>" is the 24 KB answer that took 47 s and stalled the server
        answer = unit * count + "<demo><read_file>a</read_file></demo>"
        meter.chars = 0
        read_proposal(answer, SCHEMAS)
        passes.append(meter.chars / len(answer))
    assert min(passes) >= 1  # the meter saw the reader's passes
    assert max(passes) <= 10, f"the reader covered the answer {passes} times"


#: Answers of about 200 KB built to make a reader rescan (unclosed tags; one thought closed at the end).
HOSTILE = ["<x>" * 66_000, "<x><y>" * 33_000, "<think>" * 28_000 + "</think>", "<think><x>" * 20_000,
           "< " * 100_000, "<a b " * 40_000, "<execute_tools " * 13_000]  # fmt: skip
#: Reads them in a child process: a regex call holds the GIL, so only a process can be stopped mid-read.
READ_HOSTILE = """
import json, sys
from phasegraph.nodes.xml_contract.arguments import ToolSchemas
from phasegraph.nodes.xml_contract.contract import read_proposal
for answer in json.load(sys.stdin):
    read_proposal(answer, ToolSchemas(services={"demo": {"read_file": {"type": "object"}}}))
"""


def test_hostile_answers_of_200_kb_are_read_within_a_hang_guard():
    try:  # a linear reader takes well under a second for all of them; a quadratic one, hours
        reader = [sys.executable, "-c", READ_HOSTILE]
        subprocess.run(reader, input=json.dumps(HOSTILE), text=True, timeout=120, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("reading 200 KB answers did not end: the hang guard fired")
