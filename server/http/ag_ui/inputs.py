"""What the AG-UI route reads: AG-UI's ``RunAgentInput``, narrowed to what a phasegraph protocol can take."""

from typing import Annotated, Any, Literal

from ag_ui.core import Context as AgUiContext
from ag_ui.core import ResumeEntry, RunAgentInput, TextPart, UserMessage
from ag_ui.core import Tool as AgUiTool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from phasegraph.graphs.registry import client_settings_schema
from phasegraph.server.http.responses import ID_PATTERN, NOT_BLANK


def _addressable(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("'.' and '..' cannot be used as ids: they cannot be addressed in a URL")
    return value


#: Run and thread ids become request and thread ids, which appear in URL paths.
AgUiId = Annotated[str, Field(pattern=ID_PATTERN), AfterValidator(_addressable)]


def _says_something(parts: list[TextPart]) -> list[TextPart]:
    if not "\n".join(part.text for part in parts).strip():
        raise ValueError("every text part is blank: the message says nothing")
    return parts


#: Text parts of which one at least is not blank (what the route joins with newlines and answers).
TextParts = Annotated[
    list[TextPart],
    Field(json_schema_extra={"contains": {"type": "object", "properties": {
        "text": {"type": "string", "pattern": NOT_BLANK}}, "required": ["text"]}}),
    AfterValidator(_says_something),
]  # fmt: skip


class TextUserMessage(UserMessage):
    """A user message the protocols can read: text, or text parts (joined by newlines); never blank."""

    role: Literal["user"]  # required: it tells the messages apart
    # narrowed on purpose: no media parts, and something to answer (as every route's message)
    content: Annotated[str, Field(pattern=NOT_BLANK)] | TextParts  # type: ignore[assignment]


class EarlierMessage(BaseModel):
    """Any other message: the client's copy of the conversation, which the thread's checkpoint keeps."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    id: str
    role: Literal["developer", "system", "assistant", "tool", "activity", "reasoning"]


#: The conversation as the route reads it: user messages (the last one is answered), and the rest.
HistoryMessage = Annotated[TextUserMessage | EarlierMessage, Field(discriminator="role")]


def _settings_schema(schema: dict[str, Any]) -> None:
    """Document ``forwardedProps`` as the settings object every protocol's clients may set."""
    schema["anyOf"][0] = client_settings_schema()


class AgUiInput(RunAgentInput):
    """AG-UI's ``RunAgentInput``, narrowed to what a phasegraph protocol can take."""

    model_config = ConfigDict(extra="forbid")

    thread_id: AgUiId
    run_id: AgUiId = Field(description="The new run's request id (a resumed paused run keeps its own).")
    messages: list[HistoryMessage] = Field(  # type: ignore[assignment]  # user messages narrowed to text
        description="The conversation; its last user message is what the agent answers.",
        json_schema_extra={
            "contains": {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
        },
    )
    tools: list[AgUiTool] | None = Field(
        default=None,
        description="Empty: the protocols call only their own, server-side tools (client tools are refused).",
        json_schema_extra={"maxItems": 0},
    )
    context: list[AgUiContext] | None = Field(
        default=None,
        description="Empty: the protocols take no ambient context (client context is refused).",
        json_schema_extra={"maxItems": 0},
    )
    state: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The thread's state as this server last sent it (STATE_SNAPSHOT with the STATE_DELTAs applied), "
            "a part of it, or {}: a run starts from the thread's checkpointed state, and any other state "
            "is refused (409)."
        ),
    )
    forwarded_props: dict[str, Any] | None = Field(
        default=None,
        description="The protocol's client settings (the generic route's ``settings``).",
        json_schema_extra=_settings_schema,
    )
    resume: list[ResumeEntry] | None = Field(
        default=None, max_length=1, description="The answer to the interrupt the thread's last run left open."
    )

    @field_validator("tools")
    @classmethod
    def _no_client_tools(cls, tools: list[AgUiTool] | None) -> list[AgUiTool] | None:
        if tools:
            names = ", ".join(tool.name for tool in tools)
            raise ValueError(
                f"client-side tools are not supported ({names}): the protocols call only their own "
                "server-side tools; send tools: []"
            )
        return tools

    @field_validator("context")
    @classmethod
    def _no_client_context(cls, context: list[AgUiContext] | None) -> list[AgUiContext] | None:
        if context:
            raise ValueError(
                f"client context is not supported ({len(context)} items): the protocols read only the "
                "conversation and their own tools; put what the agent should know in a user message, or "
                "send context: []"
            )
        return context

    @field_validator("messages")
    @classmethod
    def _has_user_message(cls, messages: list[Any]) -> list[Any]:
        if not any(message.role == "user" for message in messages):
            raise ValueError("messages has no user message: there is nothing for the agent to answer")
        return messages
