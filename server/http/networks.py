"""The agent-network API: publish and list networks, and ``POST /run``, which runs one to its end.

``POST /run`` is an ordinary request of the ``agent_network`` protocol (trace, events, pause,
inspection and the web page all see it); it waits for the run to end and answers with the
seed's shape: the instructions, the result, the execution log and the tool execution ids.
"""

from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from phasegraph.nodes import telemetry
from phasegraph.nodes.agent_network.tools import compile_for_project
from phasegraph.nodes.errors import ConfigurationError, InvalidInputError, NotFoundError
from phasegraph.nodes.events import ErrorEvent, Event, Final
from phasegraph.server.http.auth import Access
from phasegraph.server.http.responses import ID_PATTERN, NOT_BLANK, STARTS, errors, whole
from phasegraph.server.runs.manager import RunManager, manager_of
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord
from phasegraph.tools.networks import (
    NetworkDefinition,
    NetworkError,
    NetworkNotFound,
    NetworkSnapshot,
    NetworkStore,
    NetworkSummary,
    NetworkValidationError,
)

PROTOCOL = "agent_network"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
#: Versions are 32-bit integers in every database.
MAX_VERSION = 2**31 - 1


class InvalidNetwork(InvalidInputError):
    """A network that breaks publish-time rules; ``problems`` lists each one."""

    kind = "invalid_network"

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class _Body(BaseModel):
    # the seed's field names (snake_case); strict: 3 is not "3"
    model_config = ConfigDict(extra="forbid", strict=True)


#: JSON Schema's way of saying what ``NetworkRunRequest`` checks: a version is a version of a network.
VERSION_NEEDS_NETWORK: JsonDict = {
    "if": {"properties": {"version": {"type": "integer"}}, "required": ["version"]},
    "then": {"properties": {"network": {"type": "string"}}, "required": ["network"]},
}


class NetworkRunRequest(_Body):
    """Body of ``POST /run``."""

    model_config = ConfigDict(json_schema_extra=VERSION_NEEDS_NETWORK)

    user_message: str = Field(
        min_length=1, pattern=NOT_BLANK, description="What the network should do (not blank)."
    )
    network: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="A published network (the bundled example when omitted).",
    )
    version: Annotated[int, Field(ge=1, le=MAX_VERSION), BeforeValidator(whole)] | None = Field(
        default=None, description="Its version (the latest when omitted)."
    )
    agent_key: str | None = Field(default=None, description="The agent to start at (the network's default).")
    system_params: dict[str, Any] = Field(
        default_factory=dict, description="System parameters merged into tool calls."
    )
    max_steps: Annotated[int, Field(ge=1, le=1000), BeforeValidator(whole)] | None = Field(
        default=None, description="Agent decisions allowed (10)."
    )
    debug: bool = Field(default=False, description="Add each step's raw prompt and raw model JSON.")
    project_id: str = Field(default="default", pattern=ID_PATTERN)
    request_id: str | None = Field(default=None, pattern=ID_PATTERN)
    thread_id: str | None = Field(default=None, pattern=ID_PATTERN)
    model: str | None = None

    @model_validator(mode="after")
    def _version_of_a_network(self) -> "NetworkRunRequest":
        if self.version is not None and self.network is None:
            raise ValueError("version needs a network: the bundled example has no versions")
        return self


class DebugStep(BaseModel):
    """One decision as the model saw and answered it."""

    step: int
    agent: str
    prompt: str
    raw: str = Field(description="The model's JSON as it sent it.")


class NetworkRunAnswer(BaseModel):
    """Answer of ``POST /run``."""

    request_id: str
    status: Literal["completed", "failed", "paused", "cancelled"]
    network: str
    version: int | None = Field(description="The published version that ran (none for the bundled example).")
    result: str | None = Field(description="The answer, when an agent responded.")
    responder: str | None = None
    error: dict[str, str] | None = Field(default=None, description="kind and message, when the run failed.")
    instructions: list[dict[str, Any]]
    execution_log: list[dict[str, Any]]
    tool_refs: list[str] = Field(
        description="execution_id of every tool call (keys of the tool execution log)."
    )
    steps: list[DebugStep] | None = Field(default=None, description="debug: each step's prompt and raw JSON.")
    tool_execution_log: dict[str, dict[str, Any]] | None = Field(
        default=None, description="debug: full payloads."
    )


class PublishRequest(BaseModel):
    """Body of ``POST /api/networks``."""

    model_config = ConfigDict(extra="forbid")

    project_id: str = Field(default="default", pattern=ID_PATTERN, alias="projectId")
    definition: NetworkDefinition = Field(description="The network, as its YAML or JSON file holds it.")


class NetworkInfo(BaseModel):
    """A published network version."""

    project_id: str = Field(serialization_alias="projectId")
    name: str
    version: int
    agents: list[str]
    default_agent_key: str = Field(serialization_alias="defaultAgentKey")
    published_at: float = Field(serialization_alias="publishedAt")


def network_routes(caller: Any) -> APIRouter:
    """The routes, with the app's caller dependency (tokens and projects)."""
    router = APIRouter()
    Caller = Annotated[Access, Depends(caller)]

    @router.post("/run", response_model=NetworkRunAnswer, responses=errors(*STARTS))
    async def run_network(body: NetworkRunRequest, request: Request, access: Caller) -> NetworkRunAnswer:
        access.require(body.project_id)
        manager = manager_of(request)
        manager.check_message_size(body.user_message)
        if body.network:
            await _published(request, body.project_id, body.network, body.version)
        settings: dict[str, Any] = {
            "network": body.network or "", "network_version": body.version or 0,
            "agent_key": body.agent_key or "", "system_params": body.system_params,
        }  # fmt: skip
        if body.max_steps is not None:
            settings["max_steps"] = body.max_steps
        record = await manager.start(
            manager.protocol(PROTOCOL), body.user_message, project_id=body.project_id,
            request_id=body.request_id, thread_id=body.thread_id, model=body.model, show_tool_outputs=False,
            settings=settings,
        )  # fmt: skip
        events = [event async for event in manager.follow(record)]
        answer = await _answer(manager, record, events, body.debug)
        await anyio.to_thread.run_sync(telemetry.force_flush)  # spans are exported before the answer
        return answer

    @router.get("/api/networks", response_model=list[NetworkInfo], response_model_by_alias=True)
    async def list_networks(request: Request, access: Caller) -> list[NetworkInfo]:
        return [_info(summary) for summary in await _networks(request).list(access.projects)]

    @router.post(
        "/api/networks", status_code=201, response_model=NetworkInfo, response_model_by_alias=True,
        responses=errors(400, 403, invalid_input="the network breaks a publish-time rule (each is listed)"),
    )  # fmt: skip
    async def publish_network(body: PublishRequest, request: Request, access: Caller) -> NetworkInfo:
        access.require(body.project_id)
        try:  # against the tools the project gives agent_network: its MCP servers are started to list them
            workspace = manager_of(request).settings.workspace
            snapshot = await compile_for_project(body.definition, workspace=workspace)
        except NetworkValidationError as exc:
            raise InvalidNetwork(str(exc), exc.problems) from None
        except (NetworkError, ConfigurationError) as exc:
            raise InvalidNetwork(str(exc), [str(exc)]) from None
        stored = await _networks(request).publish(body.project_id, snapshot)
        return _info(NetworkSummary.of(body.project_id, stored))

    @router.get("/api/networks/{name}", responses=errors(403, 404))
    async def get_network(
        name: Annotated[str, PathParam(pattern=NAME_PATTERN)],
        request: Request,
        access: Caller,
        project_id: Annotated[str, Query(alias="projectId", pattern=ID_PATTERN)] = "default",
        version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None,
    ) -> dict[str, Any]:
        access.require(project_id)
        return (await _published(request, project_id, name, version)).model_dump(mode="json")

    return router


def _networks(request: Request) -> NetworkStore:
    store: NetworkStore = request.app.state.networks
    return store


async def _published(request: Request, project_id: str, name: str, version: int | None) -> NetworkSnapshot:
    try:
        return await _networks(request).get(project_id, name, version)
    except NetworkNotFound as exc:
        raise NotFoundError(str(exc)) from None


def _info(summary: NetworkSummary) -> NetworkInfo:
    return NetworkInfo(
        project_id=summary.project_id, name=summary.name, version=summary.version, agents=summary.agent_keys,
        default_agent_key=summary.default_agent_key, published_at=summary.published_at,
    )  # fmt: skip


async def _answer(
    manager: RunManager, record: RequestRecord, events: list[Event], debug: bool
) -> NetworkRunAnswer:
    """The seed's answer, read from the run's events, its last checkpoint and (debug) its trace."""
    graph = manager.protocol(PROTOCOL).graph
    values: dict[str, Any] = (await graph.aget_state(thread_config(record.thread_key))).values or {}
    last = events[-1] if events else None
    final = last if isinstance(last, Final) else None
    failed = last if isinstance(last, ErrorEvent) else None
    status = {"final": "completed", "error": "failed", "cancelled": "cancelled"}.get(
        last.type if last else "", "paused"
    )
    network = values.get("network") or {}
    tool_log: dict[str, dict[str, Any]] = values.get("tool_execution_log", {})
    answer = NetworkRunAnswer(
        request_id=record.request_id, status=status,  # type: ignore[arg-type]
        network=network.get("name", ""), version=network.get("version") or None,
        result=final.answer if final else None, responder=final.agent if final else None,
        error={"kind": failed.kind, "message": failed.message} if failed else None,
        instructions=values.get("instructions", []), execution_log=values.get("execution_log", []),
        tool_refs=list(tool_log),
    )  # fmt: skip
    if debug:
        trace = await manager.store.trace(record.request_key)
        answer.steps = [
            DebugStep(
                step=t.details["step"],
                agent=t.details["agent"],
                prompt=t.details["prompt"],
                raw=t.details["raw"],
            )
            for t in trace
            if t.type == "agent_prompt"
        ]
        answer.tool_execution_log = tool_log
    return answer
