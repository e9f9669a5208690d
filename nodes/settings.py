"""Environment settings, read in this one place and nowhere else."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from phasegraph.nodes.project import PROTOCOL_IDS, load_project


class ProviderSettings(BaseSettings):
    """Credentials and endpoint of the OpenAI-compatible provider behind ``openai:`` specs."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    openai_api_key: SecretStr | None = Field(
        default=None, description="API key (any value for local servers)."
    )
    openai_base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, DeepSeek).",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None, description="Key of 'anthropic:' specs (read by langchain-anthropic; redacted here)."
    )


@lru_cache(maxsize=1)
def provider_settings() -> ProviderSettings:
    """The provider settings of this process (read once)."""
    return ProviderSettings()


class RunSettings(BaseSettings):
    """Defaults of per-run limits (env prefix ``PHASEGRAPH_``); a run's Context may override them."""

    model_config = SettingsConfigDict(env_prefix="PHASEGRAPH_", extra="ignore")

    max_tool_args_chars: int = Field(
        default=100_000,
        ge=1,
        description="Longest argument text one tool call may stream; a longer call is refused unread.",
    )
    model_max_retries: int = Field(
        default=2,
        ge=0,
        description="Retries of a provider call after a 429, a 5xx, a timeout or a dropped connection "
        "(the provider client's own exponential backoff).",
    )
    model_timeout_seconds: float = Field(
        default=60.0, gt=0, description="Longest wait for each provider response (and each streamed read)."
    )
    resources: str = Field(
        default="",
        description="Folder of the resource repository goal_pursuit discovers context in (its domain tools "
        "write changes back to the files). Empty: the bundled story world, changed in memory only.",
    )
    database: str = Field(
        default="sqlite:.phasegraph/state.db",
        validation_alias="PHASEGRAPH_CHECKPOINTER",
        description="Where published agent networks are read from when a run does not say: the "
        "server's database (PHASEGRAPH_CHECKPOINTER).",
    )
    mcp_config: str = Field(
        default="",
        description="xml_contract's services: an mcp_servers.json (name -> stdio command or streamable-http "
        "URL, as langchain-mcp-adapters' MultiServerMCPClient takes it). Empty: the bundled demo MCP server "
        "over stdio, on the workspace.",
    )
    dataset_dir: str = Field(
        default=".phasegraph/dataset",
        description="Folder of xml_contract's training data: one JSON line per iteration, one file per run.",
    )
    otel_exporter: Literal["none", "console", "otlp"] = Field(
        default="none",
        description="Where OpenTelemetry spans (and metrics) go: none (spans to the process's own tracer "
        "provider, silent unless the host application set one; metrics only on GET /metrics), console, or "
        "otlp (configured by the standard OTEL_EXPORTER_OTLP_* variables).",
    )
    shared_metrics_dir: str = Field(
        default="",
        validation_alias="PROMETHEUS_MULTIPROC_DIR",
        description="A folder the processes of one server share their metrics in (prometheus_client's "
        "multiprocess mode), so GET /metrics on any of them counts them all. `phasegraph serve` with several "
        "workers makes a fresh one for them; empty: each process's GET /metrics counts its own.",
    )
    price_table: str = Field(
        default="",
        description="A JSON file of model prices (USD per million input/output tokens, keyed by model spec, "
        "wildcards allowed) for the planner's usage rows. Empty: the bundled table.",
    )
    otel_capture_content: bool = Field(
        default=False,
        validation_alias=AliasChoices("PHASEGRAPH_OTEL_CAPTURE_CONTENT", "PHASEGRAPH_OTEL_CAPTURE_PROMPTS"),
        description="Put prompts, model answers and tool arguments and results on spans (secrets masked); "
        "off, spans carry only sizes. PHASEGRAPH_OTEL_CAPTURE_PROMPTS is its older name.",
    )


@lru_cache(maxsize=1)
def run_settings() -> RunSettings:
    """The run defaults of this process (read once)."""
    return RunSettings()


#: An origin as a browser sends it in ``Origin``: scheme, host, optional port; nothing after.
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s,?#]+")


class ServerSettings(BaseSettings):
    """HTTP server settings (env prefix ``PHASEGRAPH_``)."""

    model_config = SettingsConfigDict(env_prefix="PHASEGRAPH_", extra="ignore")

    model: str = Field(
        default="scripted:demo",
        description="Model spec runs use unless a request names another. Unset: the project file's "
        "(phasegraph.toml) model of each protocol, else the bundled demo model.",
    )
    allowed_models: str = Field(
        default="",
        description="Comma-separated model specs a request may ask for besides the protocol's default "
        "(PHASEGRAPH_MODEL, else the project file's).",
    )
    workspace: str = Field(
        default="",
        description="Root of the built-in workspace tools; requests cannot change it. Empty: the bundled "
        "demo workspace for runs on the bundled demo model ('scripted:demo'), else the folder the server "
        "started in.",
    )
    checkpointer: str = Field(
        default="sqlite:.phasegraph/state.db", description="memory | sqlite:PATH | postgresql://..."
    )
    two_stage_enabled: bool = Field(default=False, description="Serve /api/chat/messages_two_stage.")
    max_message_chars: int = Field(
        default=100_000, ge=1, description="Longest user message a request may send (413 beyond)."
    )
    max_input_messages: int = Field(
        default=1000,
        ge=1,
        description="Most messages one request may carry (LangGraph API input.messages, AG-UI messages); "
        "more is refused with 413 naming this limit, before anything is converted, stored or run.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest request body accepted, checked before parsing (413)."
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Worker processes `phasegraph serve` runs on its one port (its --workers option wins). "
        "Unset: one per CPU with sqlite or Postgres, one with memory (which no two processes can share).",
    )
    on_orphan: Literal["pause", "resume"] = Field(
        default="pause",
        description="What a replica does with a run whose server died mid-run: pause it (a person "
        "resumes) or resume it at once.",
    )
    orphan_after_seconds: float = Field(
        default=5.0,
        gt=0,
        description="A running request whose driver wrote no heartbeat for this long is taken over "
        "(at once when its process is known to be gone; after six times as long when it is a process of "
        "this host that is still alive, only busy).",
    )
    durability: Literal["async", "sync", "exit"] = Field(
        default="async",
        description="When a run's checkpoints are saved (LangGraph's durability). async: after every step, "
        "written while the next step runs; sync: after every step, before the next starts; exit: only at "
        "pause points (right after each tool execution) and at the end, so the checkpoint timeline, forks "
        "and resume-from-phase see only those. In every mode a tool's results are saved before anything "
        "after it runs, so a crash never repeats a finished tool; it may repeat the model calls in flight.",
    )
    api_tokens: SecretStr | None = Field(
        default=None, description='Bearer tokens and their projects: "tokenA:projX,projY;tokenB:*".'
    )
    retention: str = Field(
        default="",
        description="Checkpoint retention, applied in the background and by `phasegraph prune`: "
        "keep_latest=N keeps each thread's newest N checkpoints per namespace (N >= 1), ttl=30d removes "
        "threads whose newest checkpoint is older (units s, m, h, d); both as keep_latest=20,ttl=30d. "
        "Empty: off. Threads of paused or running requests keep what they need to resume.",
    )
    retention_interval_seconds: float = Field(
        default=300.0, gt=0, description="Seconds between retention rounds (one also runs at start)."
    )

    cors_origins: str = Field(
        default="",
        description="Comma-separated origins whose pages may call this server from a browser "
        "(http://localhost:5173,https://app.example.com), or * for any. Empty: no CORS headers at all.",
    )

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        """Each origin as a browser sends it (scheme://host[:port], no path), or ``*`` alone."""
        origins = [o.strip() for o in value.split(",") if o.strip()]
        if origins != ["*"]:
            for origin in origins:
                if not _ORIGIN.fullmatch(origin):
                    raise ValueError(
                        f"{origin!r} is not an origin: scheme://host[:port] with no path or trailing slash "
                        "(http://localhost:5173), or * alone for any origin"
                    )
        return ",".join(origins)

    def cors_origin_list(self) -> list[str]:
        """The origins CORS allows (``["*"]``: any; empty: CORS off)."""
        return [o for o in self.cors_origins.split(",") if o]

    def bearer_tokens(self) -> list[str]:
        """The token strings of ``api_tokens`` (secrets, whatever projects they cover)."""
        raw = self.api_tokens.get_secret_value() if self.api_tokens else ""
        return [token.strip() for token, _, _ in (e.partition(":") for e in raw.split(";")) if token.strip()]

    def default_model(self, protocol: str) -> str:
        """The model a protocol's runs use when a request names none.

        ``PHASEGRAPH_MODEL`` when the operator set it, else the project file's model for the protocol
        (``[protocols.<id>] model``, ``[models]``, top-level ``model``), else the bundled demo model.
        """
        if "model" not in self.model_fields_set and (project := load_project()) is not None:
            return str(project.settings(protocol).get("model") or self.model)
        return self.model

    def models(self, protocol: str | None = None) -> set[str]:
        """Every model spec a request may use (for one protocol, or for any when ``None``)."""
        defaults = {self.default_model(p) for p in ((protocol,) if protocol else PROTOCOL_IDS)}
        return {*defaults, *(m.strip() for m in self.allowed_models.split(",") if m.strip())}


class LogSettings(BaseSettings):
    """How log lines are written (env prefix ``PHASEGRAPH_``); apart, so a bad run setting still logs."""

    model_config = SettingsConfigDict(env_prefix="PHASEGRAPH_", extra="ignore")

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="How the phasegraph command and server write log lines: text ('LEVEL logger: message') "
        "or json (one JSON object a line: time, level, logger, message, exc_info for a traceback, and the "
        "request_id, thread_id, project_id, protocol, trace_id and span_id of the run that logged it).",
    )
