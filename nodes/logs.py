"""Log lines for people (text) or for log pipelines (one JSON object a line), with the run's ids.

``PHASEGRAPH_LOG_FORMAT`` chooses: ``text`` is ``LEVEL logger: message``; ``json`` is written by
python-json-logger with the fields ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and
``exc_info`` (a traceback), plus any ``extra`` a caller passed. A line logged while a run goes on also
carries the run's ``request_id``, ``thread_id``, ``project_id`` and ``protocol``, and the ``trace_id``
and ``span_id`` of its root span when spans are recorded: ``stream_graph``, which every run passes
through, binds them (``bind_run``) in a context variable that the tasks of the run inherit, and
``RunFieldsFilter`` copies them onto each record. Secrets are masked as on every sink:
``RedactingFilter`` on each handler, and a JSON line once more whole, so ``extra`` fields are too.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any, Literal

from opentelemetry.trace import format_span_id, format_trace_id
from pydantic import ValidationError
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.redact import RedactingFilter, redact_logging, redactor
from phasegraph.nodes.settings import LogSettings

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from phasegraph.nodes.context import RunContext
    from phasegraph.nodes.telemetry import RunTrace

LogFormat = Literal["text", "json"]
#: The text format (what the command always wrote).
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
#: The ids a line logged during a run carries, in this order.
RUN_FIELDS = ("request_id", "thread_id", "project_id", "protocol", "trace_id", "span_id")

_NONE: Mapping[str, str] = MappingProxyType({})
_run_fields: ContextVar[Mapping[str, str]] = ContextVar("phasegraph_run_fields", default=_NONE)


def log_format() -> LogFormat:
    """The format ``PHASEGRAPH_LOG_FORMAT`` asks for; a value other than text or json is refused."""
    try:
        return LogSettings().log_format
    except ValidationError as exc:
        raise ConfigurationError("PHASEGRAPH_LOG_FORMAT must be text or json") from exc


def run_fields(
    context: RunContext, protocol: str, config: RunnableConfig, trace: RunTrace
) -> Mapping[str, str]:
    """The ids a line logged during the run carries (``trace``: the run's, its root names the trace)."""
    thread = str(config.get("configurable", {}).get("thread_id", ""))
    fields = {
        "request_id": context.request_id,
        # the server keys LangGraph threads by project ("<project>/<thread>"): log the client's thread id
        "thread_id": thread.removeprefix(f"{context.project_id}/"),
        "project_id": context.project_id,
        "protocol": protocol,
    }
    span = trace.root.get_span_context()
    if span.is_valid:  # spans are recorded: lines can be joined to the run's trace
        fields |= {"trace_id": format_trace_id(span.trace_id), "span_id": format_span_id(span.span_id)}
    return MappingProxyType({k: v for k, v in fields.items() if v})


def bind_run(fields: Mapping[str, str]) -> Mapping[str, str]:
    """Give every line logged from here on (in this task and the tasks it starts) the run's ``fields``.

    Returns the ids bound before, for ``unbind_run``.
    """
    previous = _run_fields.get()
    _run_fields.set(fields)
    return previous


def unbind_run(previous: Mapping[str, str]) -> None:
    """Put back the ids ``bind_run`` replaced (a set, not a reset: the run may end in another task)."""
    _run_fields.set(previous)


class RunFieldsFilter(logging.Filter):
    """A handler filter that puts the ids of the run going on (if any) on each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the bound ids the record does not carry already; always keep the record."""
        for name, value in _run_fields.get().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonLines(JsonFormatter):
    """One JSON object a line: time, level, logger, message, then the run's ids and any extras."""

    def __init__(self) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message"],
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            # uvicorn repeats each message with terminal colours; taskName is new in Python 3.12
            reserved_attrs=[*RESERVED_ATTRS, "color_message", "taskName"],
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The record's time in UTC, ISO 8601 with milliseconds."""
        return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")

    def serialize_log_record(self, log_data: dict[str, Any]) -> str:
        """The line, masked whole: ``extra`` fields are not seen by ``RedactingFilter``."""
        return redactor().text(super().serialize_log_record(log_data))


def formatter(fmt: LogFormat) -> logging.Formatter:
    """The formatter of ``fmt`` lines."""
    return JsonLines() if fmt == "json" else logging.Formatter(TEXT_FORMAT)


def log_handler(fmt: LogFormat, stream: IO[str] | None = None) -> logging.Handler:
    """A handler writing ``fmt`` lines to ``stream`` (standard error by default), run ids on, secrets off."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(RunFieldsFilter())
    handler.addFilter(RedactingFilter())
    return handler


def configure_logging() -> None:
    """The process's logging as ``PHASEGRAPH_LOG_FORMAT`` says: a handler on the root logger.

    A root logger that has handlers already (an application hosting phasegraph set them) keeps them,
    each with secrets masked. In json, Python warnings are logged too, so no line of another shape
    reaches the log.
    """
    fmt = log_format()
    logging.basicConfig(handlers=[log_handler(fmt)])
    redact_logging()
    if fmt == "json":
        logging.captureWarnings(True)


def dict_config(base: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a ``logging.config.dictConfig`` dict (uvicorn's) writing our format on every handler.

    Each handler gets the run ids and secret masking; in json each formatter becomes ``JsonLines``.
    """
    config = copy.deepcopy(dict(base))
    config["filters"] = {
        **config.get("filters", {}),
        "run_fields": {"()": RunFieldsFilter},
        "redact": {"()": RedactingFilter},
    }
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "run_fields", "redact"]
    if log_format() == "json":
        config["formatters"] = {name: {"()": JsonLines} for name in config.get("formatters", {})}
    return config
