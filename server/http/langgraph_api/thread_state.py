"""Writing a thread's state as Studio edits it: checked against the protocol's state, then saved.

``POST /threads/{id}/state`` becomes one ``aupdate_state`` of the protocol's compiled graph: a new
checkpoint on top of the thread's latest (or of the one the body names, a fork), as if ``as_node``
had just run. Values are read against the state's own types first, in full (a field that keeps a model
as JSON is built as that model, ``Holds``), then against what ties them together (the protocol's
``check_edit``), so a value no node could read is refused naming its field instead of being saved for
the next run to trip over.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import typing_extensions
from langgraph._internal._constants import CONFIG_KEY_RUNTIME
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError

from phasegraph.nodes.errors import ConflictError, InvalidInputError, NotFoundError
from phasegraph.nodes.state_shapes import Holds
from phasegraph.server.http.bodies import refuse_wide_integers
from phasegraph.server.http.langgraph_api.common import Graph, client_messages
from phasegraph.server.http.langgraph_api.thread_bodies import StateUpdateBody
from phasegraph.server.runs.protocols import Served
from phasegraph.server.storage.checkpoints import snapshot_at, thread_config
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.threads import ThreadRecord

#: Besides the graph's nodes, what LangGraph lets an update act as: the end (values ``null``: clear the
#: pending tasks), the input, and a copy of the checkpoint.
SPECIAL_NODES = (END, "__input__", "__copy__")


#: How many of a value's problems a refusal names.
SHOWN_PROBLEMS = 3

#: What a TypedDict wraps around a field's type (and its reducer) to say whether the key must be there.
_KEY_MARKS = {typing.Required, typing.NotRequired, typing_extensions.Required, typing_extensions.NotRequired}


def fields_of(graph: Graph) -> dict[str, Any]:
    """The state's fields and their annotations (reducers included)."""
    hints: dict[str, Any] = typing.get_type_hints(graph.builder.state_schema, include_extras=True)
    return hints


def checked_values(graph: Graph, protocol: str, values: dict[str, Any] | None) -> dict[str, Any] | None:
    """``values`` as the state holds them (messages as messages, models as models), or 422 naming one."""
    if values is None:
        return None
    fields = fields_of(graph)
    checked = {}
    for key, value in values.items():
        if key not in fields:
            raise InvalidInputError(
                f"values.{key} is not a field of {protocol!r}'s state ({', '.join(sorted(fields))})"
            )
        refuse_wide_integers(value, f"values.{key}")
        checked[key] = _checked(f"values.{key}", fields[key], value)
    return checked


def _checked(where: str, annotation: Any, value: Any) -> Any:
    """One value read as its field's type (a messages field as LangChain messages), built in full.

    A field that keeps a model as JSON (``Holds``) is built as that model, then saved as it dumps back:
    what the nodes will build from it, defaults filled in. A field whose type pydantic cannot read
    cannot be checked, so it cannot be edited.
    """
    while typing.get_origin(annotation) in _KEY_MARKS:  # Required[...] of a TypedDict: the type inside
        annotation = typing.get_args(annotation)[0]
    kind, *extras = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Annotated else (
        annotation,
    )  # fmt: skip
    if add_messages in extras:  # what the reducer takes: one message or a list, as dicts or messages
        return client_messages(value if isinstance(value, list) else [value], where)
    held = next((extra.shape for extra in extras if isinstance(extra, Holds)), None)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind if held is None else held)
    except PydanticSchemaGenerationError:
        raise InvalidInputError(f"{where}: this field cannot be edited (its type cannot be read)") from None
    try:  # as JSON, strictly: "3" is not 3 and false is not 0, as everywhere in this API
        built = adapter.validate_json(json.dumps(value), strict=True)
    except ValidationError as exc:  # the first few problems, each naming where it is
        problems = [f"{where}{_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:SHOWN_PROBLEMS]]
        raise InvalidInputError("; ".join(problems)) from None
    return built if held is None else adapter.dump_python(built, mode="json")


def _path(loc: tuple[int | str, ...]) -> str:
    """Where in a value a problem is: ``.key`` and ``[index]`` steps."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def checked_node(graph: Graph, protocol: str, as_node: str | None) -> str | None:
    """``as_node`` when it names a node of the graph (or one of LangGraph's own), else 422."""
    known = set(graph.nodes) | set(SPECIAL_NODES)
    if as_node is not None and as_node not in known:
        raise InvalidInputError(
            f"as_node: {as_node!r} is not a node of {protocol!r} ({', '.join(sorted(known))})"
        )
    return as_node


async def write_state(
    served: Served,
    thread: ThreadRecord,
    body: StateUpdateBody,
    last_run: RequestRecord | None,
    busy: Callable[[str], Awaitable[bool]],
) -> dict[str, Any]:
    """Save the body's update on the thread as a new checkpoint; the checkpoint's config, as the API names it.

    Everything is checked before anything is written: the values and the node (422), the checkpoint
    to write on (404), that no run is going on (409, ``busy`` asks), and that the protocol's nodes can
    follow the values on that checkpoint's state (422, ``ProtocolSpec.check_edit``). What LangGraph itself
    refuses (an update whose node is ambiguous ...) is a 422 too. The routers after ``as_node`` read
    the protocol's limits as a run does: from the Context of the thread's last run (``last_run``; the
    protocol's defaults before any).
    """
    graph = served.graph
    values = checked_values(graph, served.id, body.values)
    as_node = checked_node(graph, served.id, body.as_node)
    checkpoint_id = body.checkpoint.checkpoint_id if body.checkpoint else body.checkpoint_id
    if body.checkpoint and body.checkpoint.thread_id not in (None, thread.thread_id):  # not this thread's
        raise NotFoundError(f"thread {thread.thread_id!r} has no checkpoint {checkpoint_id!r}")
    if checkpoint_id:  # on top of that checkpoint, a fork (404 when the thread has none such)
        await snapshot_at(graph, thread.thread_key, checkpoint_id, shown_as=thread.thread_id)
    if await busy(thread.thread_key):
        raise ConflictError(
            f"thread {thread.thread_id!r} has a run in progress; its state changes only between runs"
        )
    config = thread_config(thread.thread_key, checkpoint_id)
    config["configurable"]["checkpoint_ns"] = ""  # the savers write to a namespace: the root graph's
    if values:  # what ties the fields together, against the state the edit goes on
        served.spec.check_edit(values, (await graph.aget_state(config)).values or {})
    context = served.context(last_run) if last_run is not None else served.spec.make_context(
        workspace=served.settings.workspace, database=served.settings.checkpointer
    )  # fmt: skip
    # LangGraph hands update_state's routers no Runtime of their own: this is the one a run would get
    config["configurable"][CONFIG_KEY_RUNTIME] = Runtime(context=context, store=graph.store)
    try:
        written = await graph.aupdate_state(config, values, as_node)
    except InvalidUpdateError as exc:
        raise InvalidInputError(f"{'as_node' if 'as_node' in str(exc) else 'values'}: {exc}") from None
    except ValueError as exc:  # a reducer refusing the update: add_messages removing a message not there
        raise InvalidInputError(f"values: {exc}") from None
    finally:
        await context.aclose()
    saved = written["configurable"]
    return {"thread_id": thread.thread_id, "checkpoint_ns": saved.get("checkpoint_ns", ""),
            "checkpoint_id": saved["checkpoint_id"]}  # fmt: skip
