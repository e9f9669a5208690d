"""LangSmith tracing (LangChain's own, on with ``LANGSMITH_TRACING=true``), with secrets masked.

LangChain adds its LangSmith tracer to a run's callbacks by itself; that tracer sends prompts, model
answers, tool outputs and errors as they are. A run phasegraph drives carries this module's tracer
instead (LangChain then adds none): it masks every configured secret in what it sends (inputs,
outputs, errors), as phasegraph's events, logs and spans do. LangSmith's own
``LANGSMITH_HIDE_INPUTS`` / ``LANGSMITH_HIDE_OUTPUTS`` still hide everything.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from langchain_core.tracers.langchain import LangChainTracer
from langchain_core.tracers.schemas import Run
from langsmith import Client
from langsmith import utils as ls_utils
from pydantic import BaseModel

from phasegraph.nodes.redact import redactor


def _masked(values: dict[str, Any]) -> dict[str, Any]:
    scrub = redactor()
    if not scrub.secrets:
        return values
    # messages and other models as the client would send them (their fields), then masked
    masked = scrub.data(json.loads(json.dumps(values, default=_plain)))
    return masked if isinstance(masked, dict) else {"value": masked}


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return repr(value)


@lru_cache(maxsize=1)
def _client() -> Client:
    """One client per process (it batches what every run sends)."""
    hide_inputs = True if ls_utils.get_env_var("HIDE_INPUTS") == "true" else _masked
    hide_outputs = True if ls_utils.get_env_var("HIDE_OUTPUTS") == "true" else _masked
    return Client(hide_inputs=hide_inputs, hide_outputs=hide_outputs)


class MaskingTracer(LangChainTracer):
    """LangChain's LangSmith tracer, masking secrets in a run's error too (its client masks the rest)."""

    def _persist_run_single(self, run: Run) -> None:
        _mask_error(run)
        super()._persist_run_single(run)

    def _update_run_single(self, run: Run) -> None:  # type: ignore[override]  # a static method there
        _mask_error(run)
        LangChainTracer._update_run_single(run)


def _mask_error(run: Run) -> None:
    if run.error:
        run.error = redactor().text(run.error)


def langsmith_tracer() -> LangChainTracer | None:
    """A LangSmith tracer whose client masks secrets (``None`` when LangSmith tracing is off)."""
    if not ls_utils.tracing_is_enabled():
        return None
    return MaskingTracer(client=_client())
