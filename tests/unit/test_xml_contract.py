"""The XML contract read from model answers: blocks, arguments, placeholders and every refusal."""

from __future__ import annotations

from typing import Any

import pytest

from phasegraph.nodes.xml_contract.arguments import ToolSchemas
from phasegraph.nodes.xml_contract.contract import EMPTY, read_proposal
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
