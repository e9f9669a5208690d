"""Two turns on one thread through the LangGraph API (langgraph_sdk), on sqlite, for the tool-loop protocols.

triggered_phase, unified and xml_contract each answer a follow-up from their demo's ``follow_ups``,
and the thread's messages are what a chat UI renders: calls answered by tool messages, no output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from phasegraph.nodes.models import DEMO_SCRIPT
from phasegraph.nodes.scripted import load_script
from phasegraph.nodes.xml_contract.context import DEMO_SCRIPT as XML_DEMO_SCRIPT
from phasegraph.nodes.xml_contract.contract import answer_text
from tests.conversations import calls, chat_turns, hidden, tool_messages
from tests.server.conftest import demo_server


def _answers(path: Path) -> list[str]:
    script = load_script(path)
    return [answer_text(part[-1].content) for part in (script.turns, *script.follow_ups)][:2]


#: protocol -> (the demo's first two answers, the calls of its second turn)
CASES = {
    "triggered_phase": (_answers(DEMO_SCRIPT), [("read_file", {"path": "docs/team.md"})]),
    "unified": (_answers(DEMO_SCRIPT), [("read_file", {"path": "docs/team.md"})]),
    "xml_contract": (_answers(XML_DEMO_SCRIPT), [("demo.read_file", {"path": "docs/team.md"})]),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncLangGraphClient]:
    with demo_server(tmp_path_factory, "conversations") as server:
        sdk = get_sync_client(url=server.url, timeout=120)
        yield sdk
        sdk.http.client.close()


@pytest.mark.parametrize("protocol", list(CASES))
def test_a_thread_holds_two_turns_a_chat_can_render(client: SyncLangGraphClient, protocol: str):
    answers, second_calls = CASES[protocol]
    thread_id = client.threads.create()["thread_id"]
    outputs = [
        client.runs.wait(thread_id, protocol, input={"messages": [{"role": "user", "content": text}]})
        for text in ("Summarise the roadmap.", "Who is on the team?")
    ]
    assert [o["messages"][-1]["content"] for o in outputs] == answers  # type: ignore[index]
    messages = client.threads.get_state(thread_id)["values"]["messages"]  # type: ignore[index]
    first, second = chat_turns(messages)
    assert [m.text for m in (first[0], second[0])] == ["Summarise the roadmap.", "Who is on the team?"]
    assert [first[-1].text, second[-1].text] == answers
    assert calls(second) == second_calls
    assert len(calls(first)) >= 3 and hidden(tool_messages(second)[0])
    assert not [m for m in messages if "Ada: orchestration" in str(m["content"])]  # no output shown
    assert [r["status"] for r in client.runs.list(thread_id)] == ["success", "success"]
