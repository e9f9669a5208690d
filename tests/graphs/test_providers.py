"""Provider specs through init_chat_model, retries with backoff, and typed provider errors.

Real protocol runs against a real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import pickle

import pytest
from langchain_openai import ChatOpenAI

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.errors import ConfigurationError, ProviderError
from phasegraph.nodes.models import make_model
from phasegraph.nodes.redact import MASK, MIN_SECRET_CHARS, Redactor
from tests.conftest import PROVIDER_KEY
from tests.fake_openai import Reply, error, fake_openai

KEY = PROVIDER_KEY


async def test_429_then_500_then_a_streamed_answer_succeeds_after_three_requests(collect, provider_env):
    with fake_openai(error(429, "slow down"), error(500, "oops"), Reply(text="All good here.")) as fake:
        provider_env(fake.url, PHASEGRAPH_MODEL_MAX_RETRIES="2")
        result = await collect("triggered_phase", model="openai:test-model")
    assert result.error is None
    assert result.final is not None and result.final.answer == "All good here."
    assert len(fake.requests) == 3
    assert all(r["stream"] is True and r["model"] == "test-model" for r in fake.requests)


async def test_retries_run_out_with_a_clear_provider_error(collect, provider_env):
    with fake_openai(error(503, "overloaded")) as fake:
        provider_env(fake.url, PHASEGRAPH_MODEL_MAX_RETRIES="1")
        result = await collect("triggered_phase", model="openai:test-model")
    assert result.final is None and result.error is not None
    assert result.error.kind == "provider"
    assert result.error.message.startswith("openai model 'test-model' answered HTTP 503 after 2 attempts")
    assert "overloaded" in result.error.message
    assert len(fake.requests) == 2


async def test_a_hanging_provider_ends_the_run_with_an_error_after_timeout_and_retries(collect, provider_env):
    with fake_openai(Reply(hang=True)) as fake:
        provider_env(fake.url, PHASEGRAPH_MODEL_MAX_RETRIES="1", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="0.5")
        # A guard, not a timing assertion: without the timeout this run would never end.
        result = await asyncio.wait_for(collect("triggered_phase", model="openai:test-model"), 60)
    assert result.error is not None and result.error.kind == "provider"
    assert result.error.message.startswith("openai model 'test-model' timed out (no answer within 0.5 s)")
    assert "after 2 attempts" in result.error.message
    assert len(fake.requests) == 2


async def test_the_unified_loop_reports_provider_errors_the_same_way(collect, provider_env):
    with fake_openai(error(500, "broken")) as fake:
        provider_env(fake.url, PHASEGRAPH_MODEL_MAX_RETRIES="0")
        result = await collect("unified", model="openai:test-model")
    assert result.error is not None and result.error.kind == "provider"
    assert result.error.message.startswith("openai model 'test-model' answered HTTP 500 after 1 attempt:")
    assert len(fake.requests) == 1


async def test_an_echoed_key_never_reaches_the_error_event(collect, provider_env):
    with fake_openai(error(401, f"Incorrect API key provided: {KEY}")) as fake:
        provider_env(fake.url)
        result = await collect("triggered_phase", model="openai:test-model")
    assert result.error is not None and result.error.kind == "provider"
    assert "answered HTTP 401 after 1 attempt" in result.error.message
    assert "[REDACTED]" in result.error.message
    assert all(KEY not in event.to_json() for event in result.events)


def test_openai_specs_go_through_init_chat_model_with_the_retry_settings(provider_env):
    provider_env(
        "http://127.0.0.1:9/v1", PHASEGRAPH_MODEL_MAX_RETRIES="4", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="7"
    )
    model = make_model("openai:qwen2.5")
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.max_retries, model.request_timeout) == ("qwen2.5", 4, 7.0)
    assert model.streaming and model.stream_usage
    assert model.openai_api_base == "http://127.0.0.1:9/v1"


def test_a_provider_whose_package_is_missing_names_the_package():
    if importlib.util.find_spec("langchain_ollama") or importlib.util.find_spec("langchain_community"):
        pytest.skip("an Ollama integration is installed here")
    with pytest.raises(ConfigurationError, match=r"requires the langchain-ollama package.*pip install"):
        make_model("ollama:llama3")


def test_unknown_providers_are_configuration_errors():
    with pytest.raises(ConfigurationError, match=r"model spec 'nosuch:model' does not work"):
        make_model("nosuch:model")


def test_provider_errors_survive_pickling_with_their_fields():
    exc = ProviderError(
        "openai model 'm' answered HTTP 429", provider="openai", model="m", status=429, attempts=3
    )
    copy = pickle.loads(pickle.dumps(exc))
    assert (str(copy), copy.provider, copy.status, copy.attempts) == (str(exc), "openai", 429, 3)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
async def test_a_quoted_part_of_the_key_never_reaches_any_protocols_events(protocol, collect, provider_env):
    # A provider quoting the key's first 12 characters, as OpenAI's 401 body does, leaks as much as
    # the whole key would to whoever reads the events: every run of MIN_SECRET_CHARS is masked.
    with fake_openai(error(401, f"Incorrect API key provided: {KEY[:12]}****cdef.")) as fake:
        provider_env(fake.url)
        result = await collect(protocol, model="openai:test-model")
    assert result.error is not None and result.error.kind == "provider"
    assert f"Incorrect API key provided: {MASK}****cdef." in result.error.message
    leaked = {KEY[i : i + MIN_SECRET_CHARS] for i in range(len(KEY) - MIN_SECRET_CHARS + 1)}
    assert not [w for event in result.events for w in leaked if w in event.to_json()]


def test_every_run_of_eight_characters_of_a_secret_is_masked_and_shorter_ones_are_not():
    scrub = Redactor([KEY])
    assert scrub.text(f"key {KEY[:12]}... {KEY[-8:]}.") == f"key {MASK}... {MASK}."
    assert scrub.text(f"middle {KEY[5:20]} end") == f"middle {MASK} end"
    assert scrub.text(f"short {KEY[:7]} {KEY[9:16]}") == f"short {KEY[:7]} {KEY[9:16]}"
    # Two fragments written next to each other are one masked run; nothing is left between them.
    assert scrub.text(f"{KEY[:9]}{KEY[3:14]}!") == f"{MASK}!"
    assert scrub.found(KEY[10:18]) and not scrub.found(KEY[10:17])
