"""Bodies and parameters the native routes share: chat, run, resume and fork bodies, ids in paths.

Also the check every route's free JSON (inputs, answers, state values) passes before a checkpoint holds it.
"""

from typing import Annotated, Any, Literal

from fastapi import Path as PathParam
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from phasegraph.nodes.errors import InvalidInputError
from phasegraph.server.http.responses import ID_PATTERN, NOT_BLANK, whole


class Body(BaseModel):
    """A native route's body: camelCase on the wire, no unknown fields, strict types."""

    # strict: 0 is not false and "3" is not 3, as the schema says.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)


def _addressable(value: str) -> str:
    """Refuse ids that a URL path cannot address."""
    if value in (".", ".."):
        raise ValueError("'.' and '..' cannot be used as ids: they cannot be addressed in a URL")
    return value


NEXT_PAGE_HEADER = {
    "description": 'The next, older page: `</api/threads/...?before=ID&limit=N>; rel="next"`',
    "schema": {"type": "string"},
}
NAME_IT = "add ?projectId="
PROJECT_PARAM = (
    "Only this project (the token must cover it): names the project when the caller's projects "
    "each have a request or thread of the id."
)
#: Ids appear in URL paths, so they are kept to URL-safe characters that a URL can address.
Identifier = Annotated[str, Field(pattern=ID_PATTERN), AfterValidator(_addressable)]
#: The same ids in a path: one that no body could have created is refused with 422.
PathId = Annotated[str, PathParam(pattern=ID_PATTERN), AfterValidator(_addressable)]


#: A phase number (from 1): a JSON integer, written with or without a zero fraction.
PhaseIndex = Annotated[int, Field(ge=1), BeforeValidator(whole)]


class ChatRequest(Body):
    """Body of every streaming route."""

    message: str = Field(min_length=1, pattern=NOT_BLANK, description="What the agent should do (not blank).")
    project_id: Identifier = "default"
    request_id: Identifier | None = None
    thread_id: Identifier | None = None
    model: str | None = None
    show_tool_outputs: bool = False
    on_disconnect: Literal["stop", "continue"] = "stop"
    interrupt_before: list[str] | None = Field(
        default=None, max_length=100,
        description="Breakpoints: the run pauses before any of these nodes (Resume goes on from there).",
    )  # fmt: skip
    interrupt_after: list[str] | None = Field(
        default=None, max_length=100, description="Breakpoints: the run pauses after any of these nodes."
    )


class RunRequest(ChatRequest):
    """Body of the generic streaming route: a chat request plus the protocol's client settings."""

    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Run settings the protocol lets clients choose (agent_network: network, "
        "network_version, agent_key, max_steps, max_tool_errors, system_params; xml_contract: max_steps); "
        "a setting of another protocol is refused with 400.",
    )


class ResumeFrom(Body):
    """Body of the generic resume route: where to continue (the latest point when omitted), or an answer."""

    resume_from_phase_index: PhaseIndex | None = None
    answer: JsonValue = Field(
        default=None,
        description="The answer to the question the run waits on (a run paused with reason interrupt). "
        'An approval: "approve", "reject", {"decision": "edit", "args": {...}} or '
        '{"decision": "reject", "reason": "..."}. A run waiting for one is not resumed without it (409).',
        json_schema_extra={"examples": ["approve", {"decision": "edit", "args": {"path": "docs"}}]},
    )


class ResumeRequest(ResumeFrom):
    """Body of the two-stage resume route."""

    request_id: Identifier


class ForkRequest(Body):
    """Body of the fork route (optional)."""

    on_disconnect: Literal["stop", "continue"] = "stop"


#: The integers a checkpoint can hold: MessagePack's, signed or unsigned 64 bits.
INTEGERS = range(-(2**63), 2**64)


def refuse_wide_integers(value: Any, where: str) -> None:
    """422 naming the first integer in ``value`` (JSON data) that no checkpoint could save."""
    if isinstance(value, int) and not isinstance(value, bool) and value not in INTEGERS:
        raise InvalidInputError(f"{where}: {value} is past the 64-bit integers a checkpoint can hold")
    if isinstance(value, dict):
        for key, item in value.items():
            refuse_wide_integers(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            refuse_wide_integers(item, f"{where}[{index}]")
