"""PHASEGRAPH_LOG_FORMAT=json: every log line of the phasegraph command and server is one JSON object.

The real console script runs in a subprocess. A provider on loopback answers 401 quoting the API key,
as some OpenAI-compatible servers do: phasegraph logs that failure (nodes/models.py) during the run,
so the line must carry the run's ids and must not carry the key. Spans go to a loopback OTLP
receiver, so the trace id a log line names can be checked against the run's root span.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from phasegraph.nodes.logs import log_handler
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.server.cli.main import main
from tests.conftest import PROVIDER_KEY
from tests.fake_openai import error, fake_openai
from tests.otlp_receiver import ReceivedSpan, otlp_receiver
from tests.processes import Process, answers, free_port, running
from tests.server.conftest import PHASEGRAPH, stream

#: What the provider answers: its error quotes the key whole.
REFUSED = f"Incorrect API key provided: {PROVIDER_KEY}"
#: The fields every JSON line has, first and in this order.
BASE = ["time", "level", "logger", "message"]
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
#: What the text format wrote before there was a choice, and writes still by default.
TEXT_LINE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: .*")


def _env(provider_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHASEGRAPH_", "OTEL_"))}
    return {
        **env,
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OPENAI_BASE_URL": provider_url,
        "PHASEGRAPH_MODEL_MAX_RETRIES": "0",
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_WORKERS": "1",  # one process: its pid is the one uvicorn's lines name
        **extra,
    }


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` parsed: each must be one JSON object with the base fields first."""
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert isinstance(line, dict) and list(line)[:4] == BASE, line
        assert TIME.fullmatch(line["time"]) and line["level"] in {"DEBUG", "INFO", "WARNING", "ERROR"}, line
    return lines


def _failed_call(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The one line that logged the provider's refusal."""
    [line] = [line for line in lines if line["logger"] == "phasegraph.nodes.models"]
    assert line["level"] == "WARNING"
    assert line["message"].endswith("401 - Incorrect API key provided: [REDACTED]")
    return line


def _run_cli(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    command = [PHASEGRAPH, "run", "triggered_phase", "Summarise", "--json", "--model", "openai:gpt-4o-mini"]
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_serve_writes_every_line_as_json_with_the_runs_ids(tmp_path: Path):
    with fake_openai(error(401, REFUSED)) as provider, otlp_receiver() as receiver:
        env = _env(
            provider.url, tmp_path, PHASEGRAPH_LOG_FORMAT="json", PHASEGRAPH_MODEL="openai:gpt-4o-mini",
            PHASEGRAPH_OTEL_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_BSP_SCHEDULE_DELAY="100",
        )  # fmt: skip
        with _serving(env, tmp_path) as (client, pid):
            body = {"message": "Summarise", "projectId": "alpha", "threadId": "t-logs", "requestId": "r-logs"}
            events = stream(client, "POST", "/api/runs/triggered_phase/stream", json=body)
            assert events[-1].type == "error" and events[-1].kind == "provider"
            [root] = receiver.wait_for(lambda: _roots(receiver.spans()), 20, "the run's root span")
    logged = _json_lines((tmp_path / "stderr.log").read_text())
    accesses = _json_lines((tmp_path / "stdout.log").read_text())  # uvicorn's access log goes to stdout
    assert PROVIDER_KEY not in (tmp_path / "stderr.log").read_text() + (tmp_path / "stdout.log").read_text()

    failed = _failed_call(logged)
    assert {k: failed[k] for k in ("request_id", "thread_id", "project_id", "protocol")} == {
        "request_id": "r-logs", "thread_id": "t-logs", "project_id": "alpha", "protocol": "triggered_phase"
    }  # fmt: skip
    assert failed["trace_id"] == root.trace_id and re.fullmatch(r"[0-9a-f]{32}", failed["trace_id"])
    assert failed["span_id"] == root.span_id and re.fullmatch(r"[0-9a-f]{16}", failed["span_id"])
    # uvicorn's own lines, without a run's ids: they were not logged during a run
    started = [line for line in logged if line["message"].startswith("Uvicorn running on")]
    assert started and started[0]["logger"] == "uvicorn.error" and "request_id" not in started[0]
    assert any(line["message"] == f"Finished server process [{pid}]" for line in logged)
    assert all("color_message" not in line for line in logged + accesses)
    [access] = [line for line in accesses if "/api/runs/triggered_phase/stream" in line["message"]]
    assert access["logger"] == "uvicorn.access" and access["message"].endswith('" 200')


def _roots(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == "invoke_agent triggered_phase"]


@contextmanager
def _serving(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[httpx.Client, int]]:
    """``phasegraph serve`` on a free loopback port, stdout and stderr in two files; stopped after.

    Stopped with SIGTERM: uvicorn shuts down and logs that it did.
    """
    url = f"http://127.0.0.1:{free_port()}"
    command = [PHASEGRAPH, "serve", "--port", url.rpartition(":")[2]]
    server = Process(command, tmp_path / "stdout.log", env=env, cwd=tmp_path, inherit=False,
                     stderr=tmp_path / "stderr.log")  # fmt: skip
    with running(server, answers(f"{url}/healthz")), httpx.Client(base_url=url) as client:
        yield client, server.pid


def test_a_cli_run_logs_json_lines_with_its_ids(tmp_path: Path):
    with fake_openai(error(401, REFUSED)) as provider:
        ran = _run_cli(_env(provider.url, tmp_path, PHASEGRAPH_LOG_FORMAT="json"), tmp_path)
    assert ran.returncode == 1, ran.stderr
    request = json.loads(ran.stdout.splitlines()[0])["requestId"]  # stdout holds the run's events
    failed = _failed_call(_json_lines(ran.stderr))
    assert PROVIDER_KEY not in ran.stderr + ran.stdout
    assert failed["request_id"] == failed["thread_id"] == request  # a run without --thread is its own thread
    assert failed["project_id"] == "default" and failed["protocol"] == "triggered_phase"
    assert "trace_id" not in failed  # spans are not recorded (no exporter): no trace to point at


def test_console_spans_go_to_standard_error_a_span_a_line(tmp_path: Path):
    with fake_openai(error(401, REFUSED)) as provider:
        ran = _run_cli(_env(provider.url, tmp_path, PHASEGRAPH_OTEL_EXPORTER="console"), tmp_path)
    assert ran.returncode == 1, ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines()]  # stdout: the run's events only
    assert events and events[-1]["type"] == "error"
    spans = [json.loads(line) for line in ran.stderr.splitlines() if line.startswith("{")]
    roots = [span for span in spans if span["parent_id"] is None]
    assert [root["name"] for root in roots] == ["invoke_agent triggered_phase"]
    assert roots[0]["attributes"]["phasegraph.request_id"] == events[0]["requestId"]
    assert {"start_turn", "action_phase", "chat gpt-4o-mini"} <= {span["name"] for span in spans}
    assert PROVIDER_KEY not in ran.stderr + ran.stdout


def test_text_stays_the_default_format(tmp_path: Path):
    with fake_openai(error(401, REFUSED)) as provider:
        ran = _run_cli(_env(provider.url, tmp_path), tmp_path)
    assert ran.returncode == 1, ran.stderr
    lines = ran.stderr.splitlines()
    assert lines and all(TEXT_LINE.fullmatch(line) for line in lines), lines
    assert (
        "WARNING phasegraph.nodes.models: openai model 'gpt-4o-mini' failed: OpenAIAuthenticationError: "
        "Error code: 401 - Incorrect API key provided: [REDACTED]"
    ) in lines
    assert PROVIDER_KEY not in ran.stderr


def test_an_unknown_format_is_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("PHASEGRAPH_LOG_FORMAT", "xml")
    monkeypatch.setattr(sys, "argv", ["phasegraph", "protocols"])  # would list them and exit 0
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    assert capsys.readouterr() == ("", "error: PHASEGRAPH_LOG_FORMAT must be text or json\n")


def test_a_traceback_and_extra_fields_are_masked_too(provider_env: Any):
    provider_env("http://127.0.0.1:9/v1")  # the key is a configured secret from here on
    written = io.StringIO()
    logger = logging.getLogger("phasegraph.tests.json_logs")
    handler = log_handler("json", written)
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"the provider said {PROVIDER_KEY}")
        except RuntimeError:
            logger.exception("calling with %s failed", PROVIDER_KEY, extra={"body": {"key": PROVIDER_KEY}})
    finally:
        logger.removeHandler(handler)
    [line] = _json_lines(written.getvalue())
    assert PROVIDER_KEY not in written.getvalue()
    assert line["level"] == "ERROR" and line["message"] == "calling with [REDACTED] failed"
    assert line["body"] == {"key": "[REDACTED]"}
    assert line["exc_info"].startswith("Traceback (most recent call last):")
    assert line["exc_info"].endswith("RuntimeError: the provider said [REDACTED]")


def test_a_line_outside_a_run_has_the_base_fields_only():
    written = io.StringIO()
    logger = logging.getLogger("phasegraph.tests.json_logs")
    handler = log_handler("json", written)
    logger.addHandler(handler)
    try:
        logger.warning("no run here")
    finally:
        logger.removeHandler(handler)
    [line] = _json_lines(written.getvalue())
    assert list(line) == BASE and line["message"] == "no run here"
