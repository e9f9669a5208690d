"""Execute one tool call and return a structured result, never an exception."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import re
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from phasegraph.tools.context import ToolContext
from phasegraph.tools.errors import ToolError
from phasegraph.tools.registry import ToolRegistry
from phasegraph.tools.sources import policy_of, source_of

#: Name of the injected argument through which tools receive the run's ToolContext.
CONTEXT_ARG = "context"
#: The metadata key naming a call to the tool's callbacks.
CALL_ID = "phasegraph_call_id"
#: What the workspace's path reads as in a tool's error. Not ".": a server that resolves "." against a
#: folder of its own said "'.' is outside the allowed repository '/the/workspace'", which read
#: "'.' is outside the allowed repository '.'", a falsehood the model could not act on.
WORKSPACE_MARK = "[workspace]"


class ToolResult(BaseModel):
    """Outcome of one tool call, in a shape both the model and the trace can use."""

    status: Literal["ok", "error"]
    output: str | None = None
    error: str | None = None
    duration_ms: float = 0.0

    def as_text(self) -> str:
        """The text the model reads: the output, or the error."""
        return (self.output or "") if self.status == "ok" else f"ERROR: {self.error}"


class ToolRunner:
    """Finds a tool by name and runs it with ``{...args, context}``."""

    def __init__(self, registry: ToolRegistry, context: ToolContext) -> None:
        self.registry = registry
        self.context = context

    async def run(self, name: str, args: dict[str, Any], *, call_id: str = "") -> ToolResult:
        """Run ``name(**args)``; unknown tools, bad arguments and raising tools become errors.

        ``call_id`` names the call to the tool's callbacks (a trace's ``execute_tool`` span shows it).
        """
        started = time.perf_counter()
        try:
            output = await self._invoke(name, args, call_id)
        except TimeoutError:
            error = f"{name} gave no answer within {self._timeout(name):g} s"
        except (ToolError, ValidationError, ValueError, TypeError, OSError) as exc:
            error = _describe(exc)
        except Exception as exc:  # a third-party tool may raise anything; the model must still read it
            error = f"{type(exc).__name__}: {exc}"
        else:
            return ToolResult(status="ok", output=output, duration_ms=_ms(started))
        return ToolResult(status="error", error=self._masked(error), duration_ms=_ms(started))

    def _masked(self, text: str) -> str:
        """``text`` without the workspace's path: clients must not see server paths.

        A file in it is named relative to it (``docs/x.md``, as the tools take paths); the workspace
        itself reads ``WORKSPACE_MARK``. Only that path is replaced, where it stands as a path of its own
        (not inside a longer one), so the rest of what the tool said stays as it said it.
        """
        roots = {str(self.context.workspace.resolve()), str(self.context.workspace.absolute())} - {"/"}
        for root in sorted(roots, key=len, reverse=True):
            alone = rf"(?<![\w.~/-]){re.escape(root)}"
            text = re.sub(alone + "/(?=[^/])", "", text)  # a path inside it: relative
            text = re.sub(alone + r"(?![\w-]|\.[\w-])", WORKSPACE_MARK, text)
        return text

    async def _invoke(self, name: str, args: dict[str, Any], call_id: str = "") -> str:
        found = self.registry.get(name)
        if found is None:
            raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(self.registry.names())}")
        if not isinstance(args, dict):
            raise ToolError(f"arguments for {name!r} must be a JSON object, got {type(args).__name__}")
        unexpected = _unexpected(found, args)
        if unexpected is not None:
            raise ToolError(unexpected)
        payload = dict(args)
        if CONTEXT_ARG in _fields(found.args_schema):
            payload[CONTEXT_ARG] = dataclasses.replace(self.context, call_id=call_id)
        timeout = self._timeout(name) if not source_of(found).startswith("mcp:") else None
        config: Any = {"metadata": {CALL_ID: call_id}} if call_id else None
        async with asyncio.timeout(timeout):  # an MCP tool applies its own timeout to its call
            if timeout is not None and _blocks(found):  # a call given up at its timeout holds no exit
                output = await _on_daemon_thread(partial(found.invoke, payload, config))
            else:
                output = await found.ainvoke(payload, config)
        return output if isinstance(output, str) else str(output)

    def _timeout(self, name: str) -> float | None:
        found = self.registry.get(name)
        return policy_of(found).timeout_seconds if found is not None else None


def _blocks(tool: BaseTool) -> bool:
    """True for a tool with no coroutine of its own: LangChain runs it on the loop's default executor."""
    if hasattr(tool, "coroutine"):  # StructuredTool, Tool: a function, maybe with a coroutine
        return tool.coroutine is None
    return type(tool)._arun is BaseTool._arun


async def _on_daemon_thread(call: Callable[[], Any]) -> Any:
    """``call()`` on a daemon thread of its own, in a copy of this context (the run's callbacks).

    The loop's default executor would hold the process: ``asyncio.run`` and the interpreter wait for its
    threads at exit, so a call given up at its timeout kept ``phasegraph run`` going until the call ended
    (forever for one that never does). A daemon thread is left behind when the process exits.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: Exception | None) -> None:
        if done.done():  # given up meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        result: Any = None
        error: Exception | None = None
        try:
            result = context.run(call)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # SystemExit and the like stay in the tool's thread
            error = RuntimeError(f"the tool raised {type(exc).__name__}")
        with contextlib.suppress(RuntimeError):  # the loop closed: the call was given up, the run is over
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="phasegraph-tool-call", daemon=True).start()
    return await done


def argument_problem(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why ``args`` cannot be a call of ``tool`` (the runner's own words), or None.

    For planning a call before running it; the runner itself leaves validation to the tool.
    """
    unexpected = _unexpected(tool, args)
    if unexpected is not None:
        return unexpected
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(args)
        except ValidationError as exc:
            return _describe(exc)
    elif isinstance(schema, dict):  # an MCP tool's JSON schema: jsonschema only where MCP tools are
        import jsonschema

        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(args))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            return f"invalid arguments: {where}: {error.message}"
    return None


def _unexpected(tool: BaseTool, args: dict[str, Any]) -> str | None:
    accepted = _fields(tool.tool_call_schema)
    unexpected = sorted(set(args) - accepted)
    if unexpected:
        return f"unexpected argument(s) {unexpected} for {tool.name!r}; accepted: {sorted(accepted)}"
    return None


def _fields(schema: Any) -> set[str]:
    """Argument names of a tool schema: a pydantic model or a JSON schema dict."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return set(schema.model_fields)
    if isinstance(schema, dict):
        return set(schema.get("properties", {}))
    return set()


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
        )
        return f"invalid arguments: {problems}"
    return str(exc) or type(exc).__name__


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
