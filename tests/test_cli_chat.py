"""Conversations from the command line: ``phasegraph chat`` and ``phasegraph run --thread``.

Every test runs the installed console script in a subprocess, in a temporary folder with its own
database (``PHASEGRAPH_CHECKPOINTER``), and reads what the turns left there: the thread's state
(through the protocol's graph on that database, as the server reads it) and its requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS, get_protocol
from phasegraph.nodes.events import Final, TextChunk
from phasegraph.server.cli.chat import ChatRenderer
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.records import scoped_key
from tests.helpers import turn
from tests.server.conftest import Server, stream
from tests.tool_projects import write_project

PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")
#: One command can take a while on a loaded machine (each starts Python and imports LangChain).
TIMEOUT = 240
#: What each protocol's offline demo is asked, turn by turn (its bundled script answers them).
TURNS = {
    "triggered_phase": ["Summarise the roadmap", "Who is on the team?", "Thanks, and the next milestone?"],
    "unified": ["Summarise the roadmap", "Who is on the team?", "Thanks, and the next milestone?"],
    "goal_pursuit": [
        "The Grey Fox found her compass: give it back to her and note it in chapter 3.",
        "Where is the compass now?",
        "Thanks. Anything else to fix in chapter 3?",
    ],
    "agent_network": [
        "Who works on the streaming server?",
        "And what is on the roadmap?",
        "Thanks, summarise both.",
    ],
    "xml_contract": ["Summarise the roadmap", "Who is on the team?", "Thanks, and the next milestone?"],
    "planner": ["Which templates are there?", "Create a project from the first one", "Thanks, list them."],
}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}", "NO_COLOR": "1",
            "COLUMNS": "200"}  # fmt: skip


def _cli(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PHASEGRAPH, *args], cwd=tmp_path, env=_env(tmp_path), input=stdin, capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip


def _script(tmp_path: Path, name: str, *turns: dict[str, Any], **options: Any) -> str:
    """A script file's model spec."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": list(turns), **options}), encoding="utf-8")
    return f"scripted:{path}"


def _requests(tmp_path: Path, thread_id: str) -> list[tuple[str, str]]:
    """(protocol, status) of each request of the thread, oldest first."""
    with sqlite3.connect(tmp_path / "state.db") as db:
        rows = db.execute(
            "SELECT protocol, status FROM phasegraph_requests WHERE thread_id = ? ORDER BY created_at",
            (thread_id,),
        ).fetchall()
    return [(protocol, status) for protocol, status in rows]


def _state(tmp_path: Path, protocol: str, thread_id: str) -> dict[str, Any]:
    """The thread's current state values, read through the protocol's graph on the database."""

    async def read() -> dict[str, Any]:
        async with open_checkpointer(f"sqlite:{tmp_path / 'state.db'}") as saver:
            graph = get_protocol(protocol).compile(saver)
            snapshot = await graph.aget_state(thread_config(scoped_key("default", thread_id)))
            return dict(snapshot.values)

    return asyncio.run(read())


def _user_messages(tmp_path: Path, protocol: str, thread_id: str) -> list[str]:
    return [m.content for m in _state(tmp_path, protocol, thread_id).get("messages", []) if m.type == "human"]


def _thread_printed(stdout: str) -> str:
    found = re.search(r"^thread (\S+) \(", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(1)


def test_run_with_a_thread_continues_it_and_inspect_shows_it(tmp_path: Path):
    first = _cli(tmp_path, "run", "triggered_phase", "Summarise the roadmap", "--thread", "t-1")
    assert first.returncode == 0, first.stderr
    assert "final answer" in first.stdout
    second = _cli(tmp_path, "run", "triggered_phase", "Who is on the team?", "--thread", "t-1", "--json")
    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[-1]["type"] == "final" and events[0]["seq"] == 1
    said = _user_messages(tmp_path, "triggered_phase", "t-1")
    assert said == ["Summarise the roadmap", "Who is on the team?"]
    assert _requests(tmp_path, "t-1") == [("triggered_phase", "completed")] * 2
    shown = _cli(tmp_path, "inspect", "t-1")
    assert shown.returncode == 0, shown.stderr
    assert "thread t-1 (triggered_phase, project default)" in shown.stdout


def test_run_without_a_thread_keeps_nothing(tmp_path: Path):
    done = _cli(tmp_path, "run", "triggered_phase", "Summarise the roadmap")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "state.db").exists() and not (tmp_path / ".phasegraph").exists()


def test_another_protocols_thread_and_a_bad_id_are_refused_with_exit_two(tmp_path: Path):
    assert _cli(tmp_path, "run", "triggered_phase", "Summarise", "--thread", "mine").returncode == 0
    wrong = _cli(tmp_path, "run", "unified", "hello", "--thread", "mine")
    assert wrong.returncode == 2
    assert "thread 'mine' belongs to protocol 'triggered_phase'" in " ".join(wrong.stderr.split())
    chat = _cli(tmp_path, "chat", "unified", "--thread", "mine", stdin="hello\n")
    assert chat.returncode == 2
    assert "thread 'mine' belongs to protocol 'triggered_phase'" in " ".join(chat.stderr.split())
    bad = _cli(tmp_path, "run", "triggered_phase", "x", "--thread", "a/b")
    assert bad.returncode == 2 and "a thread id is 1 to 200 letters" in bad.stderr
    assert _requests(tmp_path, "mine") == [("triggered_phase", "completed")]  # nothing was run or stored


def test_chat_prints_a_new_thread_and_run_continues_it(tmp_path: Path):
    lines = "Summarise the roadmap\n\n   \nWho is on the team?\n/exit\nnever sent\n"
    chat = _cli(tmp_path, "chat", "triggered_phase", stdin=lines)
    assert chat.returncode == 0, chat.stderr
    thread_id = _thread_printed(chat.stdout)
    assert re.fullmatch(r"[0-9a-f-]{36}", thread_id)
    assert "(triggered_phase, new)" in chat.stdout
    assert "→ list_files(" in chat.stdout and "✓ list_files in" in chat.stdout  # compact tool lines
    assert "The roadmap has two milestones." in chat.stdout
    assert "final answer" not in chat.stdout  # the streamed answer is not shown again in a panel
    later = _cli(tmp_path, "run", "triggered_phase", "Thanks", "--thread", thread_id)
    assert later.returncode == 0, later.stderr
    assert _user_messages(tmp_path, "triggered_phase", thread_id) == [
        "Summarise the roadmap", "Who is on the team?", "Thanks",
    ]  # fmt: skip
    again = _cli(tmp_path, "chat", "triggered_phase", "--thread", thread_id, stdin="")  # EOF at once
    assert again.returncode == 0 and f"thread {thread_id} (triggered_phase, continued)" in again.stdout


def test_ctrl_c_cancels_the_turn_and_the_thread_takes_the_next(tmp_path: Path):
    words = " ".join(f"word{i}" for i in range(40))
    slow = _script(tmp_path, "slow", turn(words), chunk_delay_ms=150)
    chat = subprocess.Popen(
        [PHASEGRAPH, "chat", "triggered_phase", "--thread", "slow", "--model", slow,
         "--workspace", str(tmp_path)],
        cwd=tmp_path, env=_env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert chat.stdin is not None and chat.stdout is not None
    try:
        chat.stdin.write(b"first\n")
        chat.stdin.flush()
        seen = _read_until(chat, b"word2 ")  # the turn is streaming
        chat.send_signal(signal.SIGINT)
        seen += _read_until(chat, b"cancelled")
        assert b"word39" not in seen
        out, err = chat.communicate(b"second\n", timeout=TIMEOUT)  # then end of input ends the chat
    finally:
        chat.kill()
    assert chat.returncode == 0, err.decode()
    assert b"word39" in out  # the second turn ran to its end
    assert _requests(tmp_path, "slow") == [("triggered_phase", "cancelled"), ("triggered_phase", "completed")]
    assert _user_messages(tmp_path, "triggered_phase", "slow") == ["first", "second"]


def test_a_turn_whose_process_died_leaves_the_thread_usable(tmp_path: Path):
    slow = _script(tmp_path, "slow", turn(" ".join(f"word{i}" for i in range(40))), chunk_delay_ms=150)
    chat = subprocess.Popen(
        [PHASEGRAPH, "chat", "triggered_phase", "--thread", "killed", "--model", slow, "--workspace",
         str(tmp_path)],
        cwd=tmp_path, env=_env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert chat.stdin is not None
    try:
        chat.stdin.write(b"first\n")
        chat.stdin.flush()
        _read_until(chat, b"word2 ")
    finally:
        chat.kill()  # SIGKILL: no cancel, no pause, the request stays "running"
        chat.wait()
    assert _requests(tmp_path, "killed") == [("triggered_phase", "running")]
    fast = _script(tmp_path, "fast", turn("Back again."))
    again = _cli(tmp_path, "run", "triggered_phase", "second", "--thread", "killed", "--model", fast,
                 "--workspace", str(tmp_path))  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    # the dead turn was paused, then superseded by the next one, which went on from the thread
    assert _requests(tmp_path, "killed") == [
        ("triggered_phase", "superseded"),
        ("triggered_phase", "completed"),
    ]
    assert _user_messages(tmp_path, "triggered_phase", "killed") == ["first", "second"]


def _read_until(process: subprocess.Popen[bytes], marker: bytes) -> bytes:
    """What the process printed up to and including ``marker`` (fails after ``TIMEOUT``)."""
    assert process.stdout is not None
    seen, deadline = b"", time.monotonic() + TIMEOUT
    while marker not in seen:
        assert time.monotonic() < deadline and process.poll() is None, seen.decode()
        seen += os.read(process.stdout.fileno(), 4096)
    return seen


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_every_protocol_holds_a_conversation_in_chat_and_run(tmp_path: Path, protocol: str):
    first, second, third = TURNS[protocol]
    chat = _cli(tmp_path, "chat", protocol, "--thread", "talk", stdin=f"{first}\n{second}\n")
    assert chat.returncode == 0, chat.stderr
    assert "error" not in chat.stdout.lower(), chat.stdout
    later = _cli(tmp_path, "run", protocol, third, "--thread", "talk")
    assert later.returncode == 0, later.stdout + later.stderr
    requests = _requests(tmp_path, "talk")
    assert len(requests) == 3 and all(status in ("completed", "paused") for _, status in requests), requests
    said = _user_messages(tmp_path, protocol, "talk")
    assert [m for m in said if m in (first, second, third)] == [first, second, third], said


def test_a_destructive_call_waits_for_an_approval_the_command_answers_with_resume(tmp_path: Path):
    create = _script(tmp_path, "create", turn("", ("create_project", {"name": "Orbit",
                     "template_id": "product-launch"})), turn("Created Orbit."))  # fmt: skip
    archive = _script(tmp_path, "archive", turn("", ("archive_project", {})), turn("Archived."))
    made = _cli(tmp_path, "run", "planner", "Make a project Orbit", "--thread", "plan", "--model", create)
    assert made.returncode == 0, made.stdout + made.stderr
    in_project = ["--thread", "plan", "--model", archive, "--context-type", "project",
                  "--entity-id", "orbit", "--json"]  # fmt: skip
    asked = _cli(tmp_path, "run", "planner", "Archive it", *in_project)
    assert asked.returncode == 3, asked.stdout + asked.stderr  # it waits: the interrupt, then exit 3
    events = [json.loads(line) for line in asked.stdout.splitlines()]
    assert events[-1]["type"] == "interrupt" and events[-1]["value"]["call"]["name"] == "archive_project"
    assert "tool_result" not in {e["type"] for e in events}
    answered = _cli(tmp_path, "run", "planner", "--resume", "approve", *in_project)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    events = [json.loads(line) for line in answered.stdout.splitlines()]
    results = [(e["name"], e["status"]) for e in events if e["type"] == "tool_result"]
    assert results == [("archive_project", "ok")] and events[-1]["answer"] == "Archived."


def test_chat_on_a_thread_waiting_for_an_approval_asks_for_it_first(tmp_path: Path):
    (tmp_path / "chat_tools.py").write_text(  # the project file's folder is on the tools' import path
        'def archive_everything(reason: str) -> str:\n    """Archive every file."""\n    return "archived"\n'
    )
    call = ("archive_everything", {"reason": "tidy"})
    archive = _script(tmp_path, "archive", turn("", call), turn("Archived."))
    tools = {"python_tools": {"archive_everything": "chat_tools:archive_everything"},
             "tools": {"archive_everything": {"confirm": True}}}  # fmt: skip
    on_thread = ["--thread", "waits", "--model", archive, "--config", str(write_project(tmp_path, tools))]
    asked = _cli(tmp_path, "run", "unified", "Archive it", "--json", *on_thread)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    # the approval comes first (a message would be refused: words are no answer), then the chat goes on
    chat = _cli(tmp_path, "chat", "unified", *on_thread, stdin="a\n/exit\n")
    assert chat.returncode == 0, chat.stdout + chat.stderr
    assert "archive_everything waits for your approval" in chat.stdout and "Archived." in chat.stdout
    assert "error" not in chat.stdout
    assert _requests(tmp_path, "waits")[-1] == ("unified", "completed")  # the answer ran the call


def test_a_rejected_call_is_shown_as_rejected_not_as_run(tmp_path: Path):
    (tmp_path / "reject_tools.py").write_text(
        'def archive_everything(reason: str) -> str:\n    """Archive every file."""\n    return "archived"\n'
    )
    archive = _script(tmp_path, "archive", turn("", ("archive_everything", {"reason": "tidy"})),
                      turn("Not archived."))  # fmt: skip
    tools = {"python_tools": {"archive_everything": "reject_tools:archive_everything"},
             "tools": {"archive_everything": {"confirm": True}}}  # fmt: skip
    on_thread = ["--thread", "no", "--model", archive, "--config", str(write_project(tmp_path, tools))]
    asked = _cli(tmp_path, "run", "triggered_phase", "Archive it", "--json", *on_thread)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    answer = '{"decision": "reject", "reason": "not now"}'
    rejected = _cli(tmp_path, "run", "triggered_phase", "--resume", answer, *on_thread)
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    shown = rejected.stdout
    assert "✗ rejected archive_everything: not now" in shown, shown  # the person's answer
    assert 'archive_everything(reason="tidy") rejected, not run' in shown, shown  # where it would run
    assert "→ archive_everything" not in shown and "archive_everything in" not in shown, shown  # no run


def test_the_server_and_the_command_take_turns_on_one_thread(tmp_path: Path):
    first = _cli(tmp_path, "run", "triggered_phase", "Summarise the roadmap", "--thread", "shared")
    assert first.returncode == 0, first.stderr
    database = {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}"}
    server = Server(env=database, log=tmp_path / "server.log", cwd=tmp_path).start()  # `phasegraph serve`
    try:
        with httpx.Client(base_url=server.url) as client:
            body = {"message": "Who is on the team?", "threadId": "shared"}
            events = stream(client, "POST", "/api/runs/triggered_phase/stream", json=body)
            assert events[-1].type == "final"
            # the command's turn runs while the server is up: two processes on one database
            chat = _cli(tmp_path, "chat", "triggered_phase", "--thread", "shared", stdin="Thanks\n")
            assert chat.returncode == 0, chat.stdout + chat.stderr
            assert "(triggered_phase, continued)" in chat.stdout
            wrong = client.post("/api/runs/unified/stream", json={"message": "hi", "threadId": "shared"})
            assert wrong.status_code == 409
    finally:
        server.stop()
    said = _user_messages(tmp_path, "triggered_phase", "shared")
    assert said == ["Summarise the roadmap", "Who is on the team?", "Thanks"]
    assert _requests(tmp_path, "shared") == [("triggered_phase", "completed")] * 3


@pytest.mark.parametrize("renderer_class", [ChatRenderer, EventRenderer], ids=["chat", "run"])
@pytest.mark.parametrize(
    ("streamed", "answer"),
    [
        (["The roadmap has ", "two milestones."], "The roadmap has two milestones."),  # not repeated
        (["I will archive Orbit."], "Archive Orbit? Answer yes or no."),  # a question after a preamble
        ([], "Built from the results."),  # nothing streamed (a fallback answer)
    ],
)
def test_each_answer_is_shown_once_streamed_or_not(
    streamed: list[str], answer: str, renderer_class: type[EventRenderer]
):
    console = Console(record=True, width=200)
    renderer = renderer_class(console)
    envelope = {"request_id": "r", "project_id": "p", "protocol": "planner"}
    for seq, text in enumerate(streamed, 1):
        renderer(TextChunk(seq=seq, text=text, **envelope))
    renderer(Final(seq=len(streamed) + 1, answer=answer, **envelope))
    assert console.export_text().count(answer) == 1, console.export_text()
