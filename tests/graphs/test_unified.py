"""unified: create_agent with call-limit middleware, on the same scripts and tools."""

from pathlib import Path

from tests.helpers import kinds, of_type, turn, write_script


async def test_demo_script_runs_every_call_including_the_duplicate(collect):
    result = await collect("unified")
    assert [e.args for e in of_type(result, "tool_call")] == [
        {"path": "docs"},
        {"path": "docs/roadmap.md"},
        {"path": "./docs/../docs/roadmap.md"},
    ]
    assert of_type(result, "duplicate_tool_call") == []
    assert result.final.answer.startswith("The roadmap has two milestones.")
    assert kinds(result)[-1] == "final"
    assert all(e.protocol == "unified" and e.phase is None for e in result.events)
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert "".join(e.text for e in of_type(result, "text")).startswith(
        "Let me see what is in the docs folder."
    )
    trace_types = [t.type for t in result.trace]
    assert trace_types[0] == "tool_registration" and trace_types.count("tool_result") == 3


async def test_a_looping_script_is_stopped_by_the_call_limit_middleware(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})), repeat_last=True)
    result = await collect("unified", model=spec)
    results = of_type(result, "tool_result")
    assert len(results) == 8  # TOOL_CALL_LIMIT executions, all of the same call
    assert "limit" in result.final.answer.lower()
    assert result.error is None


async def test_tool_errors_reach_the_model_as_tool_messages(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("read_file", {"path": "/etc/passwd"})), turn("Not allowed."))
    result = await collect("unified", model=spec)
    assert of_type(result, "tool_result")[0].status == "error"
    assert result.final.answer == "Not allowed."
