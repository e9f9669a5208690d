import logging
import sys
from collections.abc import Iterator

import pytest

from phasegraph.nodes.redact import MASK, RedactingFilter, Redactor, redactor
from phasegraph.nodes.settings import provider_settings
from phasegraph.nodes.trace import TraceEntry
from tests.helpers import scripted, turn

TOKEN = "tok-SECRET-5e8a1f2b9c"


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PHASEGRAPH_API_TOKENS", f"{TOKEN}:projA;other-token-123:*")
    provider_settings.cache_clear()
    redactor.cache_clear()
    yield
    monkeypatch.undo()
    redactor.cache_clear()


def test_secrets_are_masked_longest_first_and_short_values_are_not_secrets():
    scrub = Redactor(["abcdefgh", "abcdefgh-longer", "x"])
    assert scrub.text("key abcdefgh-longer and abcdefgh, x") == f"key {MASK} and {MASK}, x"
    entry = TraceEntry(type="tool_result", request_id="r", details={"output": ["abcdefgh"]})
    assert scrub.model(entry).details == {"output": [MASK]}
    clean = TraceEntry(type="tool_result", request_id="r", details={"output": "fine"})
    assert scrub.model(clean) is clean


def test_the_process_redactor_knows_every_bearer_token(token_env):
    assert redactor().text(f"a {TOKEN} b other-token-123") == f"a {MASK} b {MASK}"


def test_the_log_filter_masks_arguments_messages_and_tracebacks(token_env):
    try:
        raise RuntimeError(f"upstream said {TOKEN}")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "got %s (%d)", (TOKEN, 3), sys.exc_info())
    assert RedactingFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert TOKEN not in formatted
    assert f"got {MASK} (3)" in formatted and f"upstream said {MASK}" in formatted
    assert record.args == (MASK, 3)  # still arguments: formatters that read them keep working


async def test_events_and_traces_of_a_run_never_carry_a_token(collect, token_env):
    model = scripted(
        turn("Looking.", ("read_file", {"path": f"{TOKEN}.md"})), turn(f"I was told {TOKEN} somewhere.")
    )
    result = await collect("triggered_phase", chat_model=model)
    assert result.final is not None and result.final.answer == f"I was told {MASK} somewhere."
    assert all(TOKEN not in e.to_json() for e in result.events)
    assert all(TOKEN not in t.model_dump_json() for t in result.trace)
    assert any(MASK in t.model_dump_json() for t in result.trace if t.type == "tool_call")


async def test_the_request_store_redacts_whatever_it_is_given(token_env):
    from phasegraph.nodes.events import ErrorEvent
    from phasegraph.server.storage.records import RequestRecord
    from phasegraph.server.storage.store import Append, RequestStore

    store = RequestStore.for_checkpointer("memory")
    await store.setup()
    try:
        record = RequestRecord(
            request_id="r", project_id="p", protocol="unified", thread_id="r", status="running"
        )
        await store.create(record)
        event = ErrorEvent(request_id="r", project_id="p", protocol="unified", seq=1, kind="x", message=TOKEN)
        entry = TraceEntry(type="tool_result", request_id="r", details={"error": f"bad {TOKEN}"})
        await store.write_batch([Append("r", [event], [entry]), Append("r", [], [entry])])
        assert [e.message for e in await store.events_after("r", 0)] == [MASK]  # type: ignore[union-attr]
        assert [t.details["error"] for t in await store.trace("r")] == [f"bad {MASK}"] * 2
    finally:
        await store.close()


def test_an_unexpected_failure_reaches_clients_without_its_text():
    from phasegraph.nodes.errors import describe

    kind, message = describe(FileNotFoundError(2, "No such file", "/srv/app/private/state.db"))
    assert kind == "internal" and "FileNotFoundError" in message and "/srv" not in message
